package segment

// Torn copies (torn.go) on any target: the rule alone, then the reader
// with its three copies forced on and a source that tears one word, as
// the C reader's tests/segment/test_torn_copy.c plays it with a read hook.

import (
	"errors"
	"math/bits"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pcpu.invalid/go/internal/cfix"
)

// TestSettledRule: three copies a, b, c, made in that order, settle on b
// only when their high halves agree and b lies between a and c.
func TestSettledRule(t *testing.T) {
	const max = ^uint64(0)
	cases := []struct {
		a, b, c uint64
		want    bool
		why     string
	}{
		{5, 5, 5, true, "unchanged"},
		{5, 6, 7, true, "rising, b between"},
		{7, 6, 5, true, "falling, b between"},
		{5, 8, 7, false, "rising, b past c"},
		{7, 4, 5, false, "falling, b past c"},
		{5, 4, 7, false, "rising, b before a"},
		// A counter going 2^32 - 1 -> 2^32 -> 2^32 - 1 during the middle
		// copy: low half first it reads 0, high half first 2^33 - 1; the
		// copies around it have its high half (the old rule kept it).
		{0xffffffff, 0, 0xffffffff, false, "torn low half first, between two of 2^32 - 1"},
		{0x100000000, 0x1ffffffff, 0x100000000, false, "torn high half first, between two of 2^32"},
		{0xffffffff, 0x1ffffffff, 0x100000000, false, "torn across the carry: high halves differ"},
		{0x100000000, 0x100000000, 0x1ffffffff, true, "third copy torn: the middle is kept"},
		// A gauge around 0: -1 -> 0 moves up by 1 (modulo 2^64).
		{max, 0, 0, false, "gauge -1 -> 0: high halves differ"},
		{max - 1, max, max, true, "gauge -2 -> -1"},
		{max, 0xffffffff00000000, max, false, "gauge -1 -> 0 -> -1, torn to -2^32 (high half of -1, low of 0)"},
		{0, 0xffffffff, 0, false, "gauge 0 -> -1 -> 0, torn to 2^32 - 1 (low half of -1, high of 0)"},
		// Falling counters (a counter of a gauge-like use, adds of -1).
		{max, max - 1, max - 2, true, "falling across nothing"},
		{0x100000001, 0x100000000, 0xffffffff, false, "falling across 2^32: high halves differ"},
		{0x100000002, 0x100000003, 0x100000001, false, "falling, b above a"},
		// Three copies torn alike cannot be told from a word that held
		// that value: the rule keeps it. A torn copy needs the word to
		// cross a multiple of 2^32 during it, so three alike need it to
		// cross back and forth three times in step with the copies.
		{0x1ffffffff, 0x1ffffffff, 0x1ffffffff, true, "three copies torn alike"},
	}
	for _, c := range cases {
		if got := settled(c.a, c.b, c.c); got != c.want {
			t.Errorf("settled(%#x, %#x, %#x) = %v, want %v: %s", c.a, c.b, c.c, got, c.want, c.why)
		}
	}
	if tornCopies != (bits.UintSize == 32) {
		t.Errorf("tornCopies %v on a %d-bit target", tornCopies, bits.UintSize)
	}
}

// tearSource returns, in every read that covers the word at `at`, what the
// word is found holding then: the next of seq while it lasts, then while
// left lasts its value `word` with the high half changed (+k x 2^32, k =
// 1, 2, ...: never the same twice in a row), then `word`.
type tearSource struct {
	source
	at    uint64
	word  uint64
	seq   []uint64
	left  int
	torn  int // reads torn by left
	reads int // reads that covered the word
}

func (s *tearSource) readAt(b []byte, off uint64) error {
	if err := s.source.readAt(b, off); err != nil {
		return err
	}
	if off > s.at || off+uint64(len(b)) < s.at+8 {
		return nil
	}
	s.reads++
	v := s.word
	switch {
	case len(s.seq) > 0:
		v, s.seq = s.seq[0], s.seq[1:]
	case s.left > 0:
		s.left--
		s.torn++
		v += uint64(s.torn) << 32
	}
	ne.PutUint64(b[s.at-off:], v)
	return nil
}

// The C fuzz corpus's standard segment (seg_builder.h sb_standard()): 2
// slots of 512 bytes from data offset 0x900. requests{method="GET"} is
// slot 0's word at 16 (10), its mirror's (5) and slot 1's (7);
// temperature_celsius is slot 0's word at 32 (4), its mirror's (20) and
// slot 1's (-1).
const (
	stdGET   = 0x900 + 16
	stdTemp1 = 0x900 + 512 + 32
	wordLo   = 0xfffffff0 // 2^32 - 16
)

// tornStandard: the standard segment with requests{GET}'s slot 0 word
// set to 2^32 - 16, read with three copies through a tearSource on that
// word (at, word: on another word instead).
func tornStandard(t *testing.T, at, word uint64) (*Reader, *tearSource) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cfix.Root(), "tests", "segment", "corpus", "standard"))
	if err != nil {
		t.Fatal(err)
	}
	ne.PutUint64(b[stdGET:], wordLo)
	ne.PutUint64(b[at:], word)
	r, err := FromBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	r.settleCopies = true
	ts := &tearSource{source: r.src, at: at, word: word}
	r.src = ts
	return r, ts
}

// series returns family name's series with label value lv ("" for none).
func series(t *testing.T, s *Snapshot, name, lv string) *Series {
	t.Helper()
	for i := range s.Families {
		f := &s.Families[i]
		for j := range f.Series {
			if f.Name == name && (lv == "" || len(f.Series[j].LabelValues) > 0 && f.Series[j].LabelValues[0] == lv) {
				return &f.Series[j]
			}
		}
	}
	t.Fatalf("no series %s{%s}", name, lv)
	return nil
}

func expectValue(t *testing.T, r *Reader, perSlot bool, name, lv string, want uint64, what string) {
	t.Helper()
	s, err := r.Snapshot(perSlot)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if v := series(t, s, name, lv).Value; v != want {
		t.Fatalf("%s: %s{%s} read %#x, want %#x (%d x 2^32 off)", what, name, lv, v, want, int64(v-want)>>32)
	}
}

func expectRefused(t *testing.T, r *Reader, perSlot bool, what string) {
	t.Helper()
	s, err := r.Snapshot(perSlot)
	if err == nil {
		t.Fatalf("%s: a word torn at every read was returned as %#x (want a refusal)", what,
			series(t, s, "requests", "GET").Value)
	}
	var u *unsettledError
	if !errors.Is(err, ErrNotReady) || Reason(err) != "not_ready" || !errors.As(err, &u) ||
		!strings.Contains(err.Error(), "kept changing between its two halves (67 reads)") {
		t.Fatalf("%s: %v (reason %s), want ErrNotReady for a value that kept changing", what, err, Reason(err))
	}
	if u.off != stdGET {
		t.Fatalf("%s: refused for the word at %#x, the torn one is at %#x", what, u.off, stdGET)
	}
}

// TestTornValues: a word torn at every read is never returned, one that
// settles reads exact, and a middle copy torn between two copies that
// agree with its high half is read again, never kept.
func TestTornValues(t *testing.T) {
	const get = wordLo + 5 + 7
	for _, perSlot := range []bool{false, true} {
		r, ts := tornStandard(t, stdGET, wordLo)
		expectValue(t, r, perSlot, "requests", "GET", get, "not torn")
		if ts.reads != 3 {
			t.Fatalf("not torn: %d reads of the word, want 3 (a run's three copies)", ts.reads)
		}

		ts.left = 1 << 30
		expectRefused(t, r, perSlot, "torn at every read")
		if ts.torn != maxAttempts*(3+settleMax) {
			t.Fatalf("torn at every read: %d reads, want %d (each attempt's three copies and %d more)",
				ts.torn, maxAttempts*(3+settleMax), settleMax)
		}
		ts.left = 20
		expectValue(t, r, perSlot, "requests", "GET", get, "torn for 20 reads")
		ts.left = 150
		expectValue(t, r, perSlot, "requests", "GET", get, "torn for 150 reads (past two attempts)")
		ts.left = 0

		// The word went 2^32 - 16 -> 2^32 -> back during the middle copy,
		// which took one half from each: low half first 0, high half
		// first (the word at 2^32 and dipping) 2^33 - 16.
		ts.seq = []uint64{wordLo, 0, wordLo}
		expectValue(t, r, perSlot, "requests", "GET", get, "middle copy torn to 0 between two of 2^32 - 16")
		ts.seq = []uint64{wordLo + 16, 0x1fffffff0, wordLo + 16}
		expectValue(t, r, perSlot, "requests", "GET", get, "middle copy torn to 2^33 - 16 between two of 2^32")
		// A counter moving while copied, not torn: the middle copy kept
		// at once, rising or falling (adds of -1).
		ts.reads = 0
		ts.seq = []uint64{wordLo - 2, wordLo - 1, wordLo}
		expectValue(t, r, perSlot, "requests", "GET", get-1, "rising, the middle copy")
		ts.seq = []uint64{wordLo + 2, wordLo + 1, wordLo}
		expectValue(t, r, perSlot, "requests", "GET", get+1, "falling, the middle copy")
		if ts.reads != 6 {
			t.Fatalf("moving, not torn: %d reads of the word, want 6 (no read again)", ts.reads)
		}
	}
}

// TestTornGauge: a gauge going -1 -> 0 -> -1 while its middle copy is
// made high half first reads -2^32 (the high half of -1, the low half of
// 0), between two copies of -1 with the same high half: read again, never
// kept.
func TestTornGauge(t *testing.T) {
	const minus1 = ^uint64(0)
	for _, perSlot := range []bool{false, true} {
		r, ts := tornStandard(t, stdTemp1, minus1)
		expectValue(t, r, perSlot, "temperature_celsius", "", 4+20-1, "not torn")
		ts.seq = []uint64{minus1, 0xffffffff00000000, minus1}
		expectValue(t, r, perSlot, "temperature_celsius", "", 4+20-1, "middle copy torn to -2^32 between two of -1")
		ts.seq = []uint64{minus1, 0, 0} // -1 -> 0: high halves differ; read again, then -1 again
		expectValue(t, r, perSlot, "temperature_celsius", "", 4+20-1, "-1 -> 0 -> -1")
	}
}

// TestTornFlows: a flows table's words (ReadFlows) are settled as a
// snapshot's values: through a real segment of the C writer (flow 7's
// packets are 3: word 14), read through a source that tears that word.
func TestTornFlows(t *testing.T) {
	w := cfix.Start(t, []string{"PCPU_SEGMENT_DIR=" + t.TempDir()}, cfix.SegWriter(t), "flows", "flows")
	r, err := Open(w.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ts, err := r.FlowsTables()
	if err != nil || len(ts) != 1 {
		t.Fatalf("tables: %v, %+v", err, ts)
	}
	tab := &ts[0]
	r.settleCopies = true
	tear := &tearSource{source: r.src, at: tab.off + 14*8, word: 3}
	r.src = tear
	v := make([]uint64, 2*10)
	read := func(what string) error {
		t.Helper()
		clear(v)
		err := r.ReadFlows(tab, 0, 10, v)
		if err == nil && v[14] != 3 {
			t.Fatalf("%s: flow 7's packets read %#x, want 3", what, v[14])
		}
		return err
	}
	if err := read("not torn"); err != nil || tear.reads != 3 {
		t.Fatalf("not torn: %v, %d reads of the word (want 3)", err, tear.reads)
	}
	tear.seq = []uint64{0xffffffff, 0, 0xffffffff}
	if err := read("middle copy torn to 0"); err != nil {
		t.Fatal(err)
	}
	tear.left = 1 << 30
	err = read("torn at every read")
	if err == nil {
		t.Fatalf("torn at every read: returned %#x, want a refusal", v[14])
	}
	var u *unsettledError
	if !errors.Is(err, ErrNotReady) || !errors.As(err, &u) || u.off != tab.off+14*8 {
		t.Fatalf("torn at every read: %v, want ErrNotReady for the word at %d", err, tab.off+14*8)
	}
	tear.left = 20
	if err := read("torn for 20 reads"); err != nil {
		t.Fatal(err)
	}
}
