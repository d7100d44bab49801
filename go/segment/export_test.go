package segment

// SetSettleCopies turns the reader's three copies of values (torn.go) on
// or off, whatever the target: the tests of package segment_test read
// real segments through that path on a 64-bit machine too.
func SetSettleCopies(r *Reader, on bool) { r.settleCopies = on }
