package segment

// Sparse histograms (2.10) in synthetic segments, built here byte by byte
// as docs/segment-format.md lays them out: a sparse series must read as
// the dense series whose missing groups are zero, a word being stored or
// naming a chunk the header did not count as a group not made, and any
// other word that is not a place in a slot as corruption.

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"
)

// synth is a segment under construction: its directory, strings and
// chunks (each 2 x nslots regions of stride bytes).
type synth struct {
	nslots, stride, nchunks uint64
	ents, strs, data        []byte
	nfams, nsers            uint64
}

func newSynth(nslots, stride, nchunks uint64) *synth {
	return &synth{nslots: nslots, stride: stride, nchunks: nchunks,
		data: make([]byte, nchunks*2*nslots*stride)}
}

// str appends b to the strings at a multiple of 8 (as a table must lie)
// and returns its offset.
func (g *synth) str(b []byte) uint64 {
	for len(g.strs)%8 != 0 {
		g.strs = append(g.strs, 0)
	}
	off := uint64(len(g.strs))
	g.strs = append(g.strs, b...)
	return off
}

// entry appends a directory entry and returns its index.
func (g *synth) entry(kind uint16, typ MetricType, nlabels uint16, id uint64, blob []byte,
	nbuckets, u32a, u32b uint32, valueOff uint64) int {
	e := make([]byte, entrySize)
	ne.PutUint16(e[8:], kind)
	e[10] = byte(typ)
	ne.PutUint16(e[12:], nlabels)
	ne.PutUint64(e[16:], id)
	ne.PutUint64(e[24:], g.str(blob))
	ne.PutUint32(e[32:], uint32(len(blob)))
	ne.PutUint32(e[36:], nbuckets)
	ne.PutUint32(e[40:], u32a)
	ne.PutUint32(e[44:], u32b)
	ne.PutUint64(e[48:], valueOff)
	ne.PutUint64(e[56:], uint64(len(g.ents)/entrySize)) // serial: creation order
	g.ents = append(g.ents, e...)
	if kind == kindFamily {
		g.nfams++
	} else {
		g.nsers++
	}
	return len(g.ents)/entrySize - 1
}

// region is region r (r < nslots: slot r; else the mirror of r - nslots)
// of chunk c.
func (g *synth) region(c, r uint64) []byte {
	return g.data[(c*2*g.nslots+r)*g.stride:][:g.stride]
}

// bytes lays the segment out: header, directory, strings, chunks.
func (g *synth) bytes() []byte {
	entOff := uint64(headerSize)
	strOff := entOff + uint64(len(g.ents))
	dataOff := (strOff + uint64(len(g.strs)) + 63) &^ 63
	b := make([]byte, dataOff+uint64(len(g.data)))
	copy(b, magic)
	ne.PutUint16(b[8:], versionMajor)
	ne.PutUint16(b[10:], 10)
	ne.PutUint32(b[12:], headerSize)
	ne.PutUint32(b[16:], byteOrderMark)
	ne.PutUint64(b[24:], 2) // generation
	ne.PutUint32(b[32:], 1) // writer pid
	ne.PutUint32(b[56:], uint32(g.nslots))
	ne.PutUint32(b[60:], 1) // slots are CPUs
	ne.PutUint64(b[64:], g.stride)
	ne.PutUint64(b[72:], 2*g.nslots*g.stride)
	ne.PutUint64(b[80:], dataOff)
	ne.PutUint64(b[88:], g.nchunks)
	ne.PutUint64(b[96:], entOff)
	n := uint64(len(g.ents) / entrySize)
	ne.PutUint64(b[104:], n)
	ne.PutUint64(b[112:], n)
	ne.PutUint32(b[120:], entrySize)
	ne.PutUint64(b[128:], strOff)
	ne.PutUint64(b[136:], uint64(len(g.strs)))
	ne.PutUint64(b[144:], uint64(len(g.strs)))
	ne.PutUint64(b[152:], g.nfams)
	ne.PutUint64(b[160:], g.nsers)
	copy(b[176:], "sparse")
	copy(b[entOff:], g.ents)
	copy(b[strOff:], g.strs)
	copy(b[dataOff:], g.data)
	return b
}

// The synthetic segment's layout: 3 slots of 1 KiB, 2 chunks, histograms
// of 20 buckets (3 groups, the last half used).
const (
	tSlots  = 3
	tStride = 1024
	tChunks = 2
	tNB     = 20
	tGroups = (tNB + sparseGroup - 1) / sparseGroup
)

// tGroup is where a group lies; group tGroups is the wide pair.
type tGroup struct {
	k          int
	chunk, off uint64
}

// tSeries are the histogram series of the synthetic segment: where their
// groups lie when sparse, where their value lies when dense.
var tSeries = []struct {
	fam, label       string
	wide             bool
	groups           []tGroup
	dchunk, denseOff uint64
}{
	// Groups in two chunks, out of order, one at the very end of a slot.
	{"s_us", "a", false, []tGroup{{2, 1, tStride - sparseGroupSize}, {0, 0, 256}}, 0, 256},
	// The wide pair at the end of a slot, where a group would not fit.
	{"sw_us", "a", true, []tGroup{{2, 0, 512}, {1, 1, 128}, {tGroups, 0, tStride - sparseWideSize}}, 0, 576},
	{"s_us", "b", false, nil, 1, 128}, // no group made
}

// tPair is bucket b's (count, sum) in region r of series si.
func tPair(si, b int, r uint64) (uint64, uint64) {
	return uint64(1000*si) + 100*r + uint64(b) + 1, (r + 1) * uint64(b+7+si)
}

// tBuild builds the synthetic segment with sparse or dense histogram
// families, the groups for which drop is true not made (dense: zero).
// The sparse tables' offsets in the strings are in tables (by series).
func tBuild(sparse bool, drop func(si, k int) bool) (g *synth, tables []uint64, ents []int) {
	g = newSynth(tSlots, tStride, tChunks)
	bounds := make([]byte, 8*(tNB-1))
	for i := 0; i < tNB-1; i++ {
		ne.PutUint64(bounds[8*i:], uint64(10*(i+1)))
	}
	scheme := uint32(SchemeExplicit | schemePairs)
	if sparse {
		scheme |= schemeSparse
	}
	famBlob := func(name string) []byte {
		return append([]byte(name+"\x00\x00k\x00"+string(make([]byte, (8-(len(name)+4)%8)%8))), bounds...)
	}
	ids := map[string]uint64{"s_us": 1, "sw_us": 2}
	g.entry(kindFamily, Histogram, 1, 1, famBlob("s_us"), tNB, scheme, 0, 0)
	g.entry(kindFamily, Histogram, 1, 2, famBlob("sw_us"), tNB, scheme|schemeWide, 0, 0)
	g.entry(kindFamily, Counter, 0, 3, []byte("c_total\x00\x00"), 0, 0, 0, 0)
	// A dense counter in chunk 0, before the groups.
	g.entry(kindSeries, Counter, 0, 3, nil, 0, 0, 8, 128)
	for r := uint64(0); r < 2*tSlots; r++ {
		ne.PutUint64(g.region(0, r)[128:], r+1)
	}
	for si, ts := range tSeries {
		nw := tGroups
		if ts.wide {
			nw++
		}
		table := make([]byte, 8*nw)
		for _, gr := range ts.groups {
			if drop != nil && drop(si, gr.k) {
				continue
			}
			chunk, off := gr.chunk, gr.off
			if !sparse { // the pairs of its buckets, then the wide pair
				chunk, off = ts.dchunk, ts.denseOff+uint64(sparseGroupSize*gr.k)
				if gr.k == tGroups {
					off = ts.denseOff + 16*tNB
				}
			}
			ne.PutUint64(table[8*gr.k:], (2*chunk+1)<<32|off|1)
			for r := uint64(0); r < 2*tSlots; r++ {
				v := g.region(chunk, r)[off:]
				if gr.k == tGroups { // the per-slot double, the residue
					ne.PutUint64(v, math.Float64bits(0.5+float64(r)))
					if r == 1 {
						ne.PutUint64(v[8:], math.Float64bits(0.25))
					}
					continue
				}
				for j := 0; j < sparseGroup; j++ {
					b := sparseGroup*gr.k + j
					if b >= tNB {
						if sparse { // past nbuckets: ignored
							ne.PutUint64(v[16*j:], 0xdead)
							ne.PutUint64(v[16*j+8:], 0xbeef)
						}
						continue
					}
					c, s := tPair(si, b, r)
					ne.PutUint64(v[16*j:], c)
					ne.PutUint64(v[16*j+8:], s)
				}
			}
		}
		blob := []byte(ts.label + "\x00")
		if sparse {
			t := g.str(table)
			tables = append(tables, t)
			ents = append(ents, g.entry(kindSeries, Histogram, 1, ids[ts.fam], blob, tNB, 0, uint32(len(table)), t))
			continue
		}
		size := uint32(16 * tNB)
		if ts.wide {
			size += 16
		}
		ents = append(ents, g.entry(kindSeries, Histogram, 1, ids[ts.fam], blob, tNB, uint32(ts.dchunk), size, ts.denseOff))
	}
	return g, tables, ents
}

// SparseSeed is the synthetic segment with sparse histograms, for the
// fuzz targets' seeds.
func SparseSeed() []byte {
	g, _, _ := tBuild(true, nil)
	return g.bytes()
}

// tRead snapshots a segment, its values copied three times when settle.
func tRead(t *testing.T, src source, perSlot, settle bool) (*Snapshot, error) {
	t.Helper()
	r := &Reader{src: src, Path: "(memory)", AllowStale: true, settleCopies: settle}
	if err := r.init(); err != nil {
		return nil, err
	}
	return r.Snapshot(perSlot)
}

// tSame fails unless the sparse read s equals the dense read d but for
// the families' Sparse.
func tSame(t *testing.T, s, d *Snapshot) {
	t.Helper()
	for i := range s.Families {
		if f := &s.Families[i]; f.Type == Histogram {
			if !f.Sparse {
				t.Fatalf("%s: not sparse", f.Name)
			}
			f.Sparse = false
		}
	}
	// Printed, as values: NaN is not equal to itself.
	if !reflect.DeepEqual(s.Families, d.Families) &&
		fmt.Sprintf("%#v", s.Families) != fmt.Sprintf("%#v", d.Families) {
		t.Fatalf("sparse reads\n%#v\ndense reads\n%#v", s.Families, d.Families)
	}
}

// TestSparseReadsAsDense: groups in two chunks, out of order, in every
// slot and mirror, with pairs past nbuckets and the wide pair: the same
// values, whole and per slot, as the dense histograms, with one copy of
// the values and with three (as a 32-bit target reads them).
func TestSparseReadsAsDense(t *testing.T) {
	sg, _, _ := tBuild(true, nil)
	dg, _, _ := tBuild(false, nil)
	sb, db := sg.bytes(), dg.bytes()
	for _, perSlot := range []bool{false, true} {
		for _, settle := range []bool{false, true} {
			s, err := tRead(t, memSource(sb), perSlot, settle)
			if err != nil {
				t.Fatal(err)
			}
			d, err := tRead(t, memSource(db), perSlot, settle)
			if err != nil {
				t.Fatal(err)
			}
			// Not vacuous: the values are there.
			h := &s.Families[1].Series[0] // s_us{k="a"}
			if s.Families[1].Name != "s_us" || len(h.Counts) != tNB {
				t.Fatalf("families %+v", s.Families)
			}
			var want0, want17, sum uint64
			for r := uint64(0); r < 2*tSlots; r++ {
				c, _ := tPair(0, 0, r)
				want0 += c
				c, _ = tPair(0, 17, r)
				want17 += c
				for b := 0; b < tNB; b++ {
					if b/sparseGroup != 1 {
						_, x := tPair(0, b, r)
						sum += x
					}
				}
			}
			if h.Counts[0] != want0 || h.Counts[8] != 0 || h.Counts[17] != want17 || uint64(h.Sum) != sum {
				t.Errorf("s_us{a}: counts %v, sum %d; want [0] %d, [8] 0, [17] %d, sum %d",
					h.Counts, h.Sum, want0, want17, sum)
			}
			// Slot s's double: 0.5 + s in its region, 3.5 + s in its mirror.
			if w := &s.Families[2].Series[0]; w.Residue != 4+6+8+0.25 {
				t.Errorf("sw_us{a}: residue %v, want 18.25", w.Residue)
			}
			if perSlot && h.Slots[1] == 0 {
				t.Errorf("s_us{a}: slots %v", h.Slots)
			}
			tSame(t, s, d)
		}
	}
}

// TestSparseWordsNotMade: a word with one half 0 (being stored, copied 32
// bits at a time) and a word naming a chunk the header does not count
// (made after it was read) read as a group not made, whatever the slots
// hold where the group was.
func TestSparseWordsNotMade(t *testing.T) {
	cases := []struct {
		name string
		si   int // series and group of the word
		k    int
		word func(chunk, off uint64) uint64
	}{
		{"high half 0", 0, 2, func(c, o uint64) uint64 { return o | 1 }},
		{"low half 0", 0, 0, func(c, o uint64) uint64 { return (2*c + 1) << 32 }},
		{"the wide pair's high half 0", 1, tGroups, func(c, o uint64) uint64 { return o | 1 }},
		{"chunk nchunks", 1, 1, func(c, o uint64) uint64 { return (2*tChunks+1)<<32 | o | 1 }},
		{"chunk 2^31 - 1", 0, 0, func(c, o uint64) uint64 { return 0xffffffff<<32 | o | 1 }},
		// Where in a chunk not counted yet is not checked (as in C).
		{"chunk nchunks, offset not a multiple of 16", 0, 2, func(c, o uint64) uint64 { return (2*tChunks+1)<<32 | 9 }},
		{"chunk nchunks, past slot_stride", 0, 0, func(c, o uint64) uint64 { return (2*tChunks+1)<<32 | (tStride - 16) | 1 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sg, tables, _ := tBuild(true, nil)
			for _, gr := range tSeries[c.si].groups {
				if gr.k == c.k {
					ne.PutUint64(sg.strs[tables[c.si]+8*uint64(c.k):], c.word(gr.chunk, gr.off))
				}
			}
			dg, _, _ := tBuild(false, func(si, k int) bool { return si == c.si && k == c.k })
			s, err := tRead(t, memSource(sg.bytes()), true, false)
			if err != nil {
				t.Fatal(err)
			}
			d, err := tRead(t, memSource(dg.bytes()), true, false)
			if err != nil {
				t.Fatal(err)
			}
			tSame(t, s, d)
		})
	}
}

// TestSparseRefused: words that are not places in a slot, tables that are
// not where the format puts them, groups sharing storage, and the scheme
// bit without pairs: a corrupted segment (the entries did not change).
func TestSparseRefused(t *testing.T) {
	word := func(si, k int, w uint64) func(*synth, []uint64, []int) {
		return func(g *synth, tables []uint64, _ []int) {
			ne.PutUint64(g.strs[tables[si]+8*uint64(k):], w)
		}
	}
	place := func(chunk, off uint64) uint64 { return (2*chunk+1)<<32 | off | 1 }
	field := func(si, at int, v uint32) func(*synth, []uint64, []int) {
		return func(g *synth, _ []uint64, ents []int) {
			ne.PutUint32(g.ents[entrySize*ents[si]+at:], v)
		}
	}
	scheme := func(fi int, v uint32) func(*synth, []uint64, []int) {
		return func(g *synth, _ []uint64, _ []int) { ne.PutUint32(g.ents[entrySize*fi+40:], v) }
	}
	cases := []struct {
		name   string
		damage func(*synth, []uint64, []int)
	}{
		{"high half even", word(0, 2, 2<<32|(tStride-sparseGroupSize)|1)},
		{"low half even", word(0, 0, 1<<32|256)},
		{"both halves even", word(0, 0, 2<<32|256)},
		{"offset not a multiple of 16", word(0, 0, place(0, 264))},
		{"group past slot_stride", word(0, 0, place(0, tStride-64))},
		{"group where only the wide pair fits", word(1, 2, place(0, tStride-sparseWideSize))},
		{"wide pair past slot_stride", word(1, tGroups, place(0, tStride))},
		{"offset past 2^31", word(0, 0, place(0, 0xfffffff0))},
		{"group over a counter", word(2, 1, place(0, 128))},
		{"two groups in one place", word(1, 0, place(0, 512))},
		{"groups of two series in one place", word(2, 0, place(0, 256))},
		{"chunk not 0", field(0, 40, 1)},
		{"table not aligned", field(0, 48, 4)},
		{"table past strings_used", func(g *synth, _ []uint64, ents []int) {
			ne.PutUint64(g.ents[entrySize*ents[0]+48:], uint64(len(g.strs)-8)&^7)
		}},
		{"table size a dense value's", field(0, 44, 16*tNB)},
		{"sparse without pairs", scheme(0, SchemeExplicit|schemeSparse)},
		{"sparse and wide without pairs", scheme(1, SchemeExplicit|schemeSparse|schemeWide)},
		{"unknown scheme bit", scheme(0, SchemeExplicit|schemePairs|schemeSparse|0x800)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, tables, ents := tBuild(true, nil)
			c.damage(g, tables, ents)
			_, err := tRead(t, memSource(g.bytes()), true, false)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%v, want a corrupted segment", err)
			}
		})
	}
}

// swapSource serves before until the first read of the strings, then
// after: a writer that made a group (stored its word, then added 2 to the
// generation) while the reader read the values.
type swapSource struct {
	before, after memSource
	strOff        uint64
	swapped       bool
	flip          int // > 0: the directory's byte at flip changes at every second read of it
	dirReads      int
}

func (s *swapSource) readAt(b []byte, off uint64) error {
	src := s.before
	if s.swapped {
		src = s.after
	}
	if err := src.readAt(b, off); err != nil {
		return err
	}
	if off == s.strOff {
		s.swapped = true
	}
	if s.flip > 0 && off == headerSize {
		if s.dirReads++; s.dirReads%2 == 0 {
			b[s.flip-headerSize] ^= 1
		}
	}
	return nil
}

func (s *swapSource) size() (uint64, error)                    { return s.after.size() }
func (s *swapSource) dataAt(pos uint64) (uint64, uint64, bool) { return pos, ^uint64(0), true }
func (s *swapSource) holeAt(d uint64) uint64                   { return ^uint64(0) }

// TestSparseGroupMadeDuringRead: a word stored after the strings were
// read changes the generation: the read is not stable and is made again,
// and then has the group.
func TestSparseGroupMadeDuringRead(t *testing.T) {
	full, _, _ := tBuild(true, nil)
	after := full.bytes()
	ne.PutUint64(after[24:], 4)
	g, tables, _ := tBuild(true, nil)
	ne.PutUint64(g.strs[tables[0]:], 0) // group 0 of s_us{a}, not made yet
	before := g.bytes()
	src := &swapSource{before: before, after: after, strOff: ne.Uint64(before[128:])}
	s, err := tRead(t, src, true, false)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Stable || !src.swapped {
		t.Fatalf("stable %v, swapped %v", s.Stable, src.swapped)
	}
	d, _, _ := tBuild(false, nil)
	want, err := tRead(t, memSource(d.bytes()), true, false)
	if err != nil {
		t.Fatal(err)
	}
	tSame(t, s, want)
}

// TestSparseInFlux: a sparse series whose entry changed during the read
// is left out, its table unread: even one with a word that is not a
// place (the entry's table may be another's by then).
func TestSparseInFlux(t *testing.T) {
	g, tables, ents := tBuild(true, nil)
	ne.PutUint64(g.strs[tables[0]:], 2<<32|256|1) // high half even
	b := g.bytes()
	src := &swapSource{before: b, after: b, strOff: ne.Uint64(b[128:]),
		flip: headerSize + entrySize*ents[0] + 56} // its serial
	s, err := tRead(t, src, true, false)
	if err != nil {
		t.Fatal(err)
	}
	if s.Changed != 1 || len(s.Families[1].Series) != 1 || s.Families[1].Series[0].LabelValues[0] != "b" {
		t.Fatalf("changed %d, s_us %+v", s.Changed, s.Families[1].Series)
	}
}
