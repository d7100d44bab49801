package pcpureceiver

import (
	"context"
	"strconv"
	"testing"

	"pcpu.invalid/go/internal/cfix"
)

// BenchmarkScrape: one collection of a segment of 10^5 series (the mix of
// bench/push_bench.c) by the receiver alone: read and convert.
//
//	go test -run '^$' -bench Scrape -benchtime 20x ./pcpureceiver
func BenchmarkScrape(b *testing.B) {
	cfix.Need(b, "libpcpu.so")
	dir := b.TempDir()
	cfix.Start(b, []string{"PCPU_SEGMENT_DIR=" + dir}, cfix.SegWriter(b), "many", "bench", strconv.Itoa(100000))
	c := newCollector(&Config{Directory: dir})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		md, err := c.scrape(context.Background())
		if err != nil || md.DataPointCount() != 100001 {
			b.Fatalf("%v, %d points", err, md.DataPointCount())
		}
	}
}
