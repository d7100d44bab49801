module pcpu.invalid/go

go 1.26
