package segment_test

import (
	"fmt"
	"reflect"
	"testing"

	"pcpu.invalid/go/segment"
)

// TestSettledCopiesReadAlike: with nothing changing, the three copies a
// 32-bit target makes (torn.go), forced on here, read every seed (the C
// fuzz corpus, compacted real segments) exactly as one copy does: every
// kind of value word, whole and per slot.
func TestSettledCopiesReadAlike(t *testing.T) {
	for name, b := range seeds(t) {
		for _, perSlot := range []bool{false, true} {
			var got [2]string
			for i, on := range []bool{false, true} {
				r, err := segment.FromBytes(b)
				if err != nil {
					got[i] = "open: " + err.Error()
					continue
				}
				segment.SetSettleCopies(r, on)
				s, err := r.Snapshot(perSlot)
				if err != nil {
					got[i] = "snapshot: " + err.Error()
					continue
				}
				got[i] = fmt.Sprintf("%#v", s.Families) // printed: NaN is not equal to itself
			}
			if got[0] != got[1] {
				t.Errorf("%s (per slot %v): three copies read\n%s\none copy read\n%s", name, perSlot, got[1], got[0])
			}
		}
	}
}

// snapshotsAlike: a real segment file read with one copy of its values
// and with three (as on a 32-bit target) gives the same families.
func snapshotsAlike(t *testing.T, path string, g *segment.Snapshot) {
	t.Helper()
	r, err := segment.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	segment.SetSettleCopies(r, true)
	s, err := r.Snapshot(true)
	if err != nil {
		t.Fatalf("three copies: %v", err)
	}
	if !reflect.DeepEqual(g.Families, s.Families) &&
		fmt.Sprintf("%#v", g.Families) != fmt.Sprintf("%#v", s.Families) {
		t.Errorf("three copies read differently:\n%#v\none copy:\n%#v", s.Families, g.Families)
	}
}
