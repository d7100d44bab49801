package segment_test

import (
	"errors"
	"os"
	"testing"

	"pcpu.invalid/go/internal/cfix"
	"pcpu.invalid/go/segment"
)

// TestFlowsTableSkipped: a segment holding a flows table (format 2.9, entry
// kind 5 FLOWS, its words at file offsets from 8 TiB up) reads as before:
// the table's entry is a kind this reader does not read, skipped, and the
// families and series beside it read to their values, stable, with no
// entry counted as changed.
func TestFlowsTableSkipped(t *testing.T) {
	dir := t.TempDir()
	w := cfix.Start(t, []string{"PCPU_SEGMENT_DIR=" + dir}, cfix.SegWriter(t), "flows", "flows")
	r, err := segment.Open(w.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s, err := r.Snapshot(true)
	if err != nil {
		t.Fatal(err)
	}
	if s.VersionMinor < 9 {
		t.Fatalf("format 2.%d: the writer predates flows tables", s.VersionMinor)
	}
	if !s.Stable || s.Changed != 0 || s.Incomplete() {
		t.Fatalf("stable %v, changed %d, incomplete %v", s.Stable, s.Changed, s.Incomplete())
	}
	if len(s.Families) != 1 || s.Families[0].Name != "requests" ||
		len(s.Families[0].Series) != 1 || s.Families[0].Series[0].Value != 5 {
		t.Fatalf("families: %+v", s.Families)
	}
}

// TestFlowsTableRead: the table itself, listed and read as the C reader
// does (the writer added 3 packets to flow 7 and collected).
func TestFlowsTableRead(t *testing.T) {
	dir := t.TempDir()
	w := cfix.Start(t, []string{"PCPU_SEGMENT_DIR=" + dir}, cfix.SegWriter(t), "flows", "flows")
	r, err := segment.Open(w.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ts, err := r.FlowsTables()
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 1 || ts[0].Name != "flow_traffic" || ts[0].Help != "Per-flow traffic." ||
		ts[0].NFlows != 1000 || len(ts[0].Counters) != 2 || ts[0].Counters[0] != "packets" ||
		ts[0].Counters[1] != "bytes" {
		t.Fatalf("tables: %+v", ts)
	}
	v := make([]uint64, 2*1000)
	if err := r.ReadFlows(&ts[0], 0, 1000, v); err != nil {
		t.Fatal(err)
	}
	for i, x := range v {
		if want := map[bool]uint64{true: 3, false: 0}[i == 14]; x != want {
			t.Fatalf("word %d: %d, not %d", i, x, want)
		}
	}
	if err := r.ReadFlows(&ts[0], 999, 2, v); err == nil {
		t.Fatal("a read past the table: no error")
	}
	// The writer gone (its registry destroyed, the file unlinked but open
	// here): the table keeps its last values, as series do.
	w.Stop()
	if err := r.ReadFlows(&ts[0], 7, 1, v); err != nil || v[0] != 3 {
		t.Fatalf("after the writer: %v, %d", err, v[0])
	}
}

// TestFlowsTableStale: an entry that changed after the listing (its seq
// moved on, as when the writer destroys the table and makes another) makes
// a read of the old listing ErrStale, never the other table's values; a
// new listing reads it.
func TestFlowsTableStale(t *testing.T) {
	dir := t.TempDir()
	w := cfix.Start(t, []string{"PCPU_SEGMENT_DIR=" + dir}, cfix.SegWriter(t), "flows", "flows")
	r, err := segment.Open(w.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ts, err := r.FlowsTables()
	if err != nil || len(ts) != 1 {
		t.Fatalf("tables: %v %+v", err, ts)
	}
	f, err := os.OpenFile(w.Path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hdr := make([]byte, 256)
	if _, err := f.ReadAt(hdr, 0); err != nil {
		t.Fatal(err)
	}
	eoff, used := ne.Uint64(hdr[96:]), ne.Uint64(hdr[112:])
	e := make([]byte, 64)
	found := false
	for i := uint64(0); i < used && !found; i++ {
		if _, err := f.ReadAt(e, int64(eoff+64*i)); err != nil {
			t.Fatal(err)
		}
		if ne.Uint16(e[8:]) == 5 {
			ne.PutUint64(e, ne.Uint64(e)+2)
			if _, err := f.WriteAt(e, int64(eoff+64*i)); err != nil {
				t.Fatal(err)
			}
			found = true
		}
	}
	if !found {
		t.Fatal("no FLOWS entry")
	}
	v := make([]uint64, 2)
	if err := r.ReadFlows(&ts[0], 7, 1, v); !errors.Is(err, segment.ErrStale) {
		t.Fatalf("a changed entry: %v, not ErrStale", err)
	}
	if ts, err = r.FlowsTables(); err != nil || len(ts) != 1 {
		t.Fatalf("listed again: %v %+v", err, ts)
	}
	if err := r.ReadFlows(&ts[0], 7, 1, v); err != nil || v[0] != 3 {
		t.Fatalf("listed again: %v, %d", err, v[0])
	}
}
