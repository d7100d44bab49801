package segment_test

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"pcpu.invalid/go/internal/cfix"
	"pcpu.invalid/go/segment"
)

var ne = binary.NativeEndian

// compact turns a real segment file (hundreds of MiB of sparse regions)
// into an equivalent small one: the directory and strings as used, and
// each slot and mirror region cut to the smallest power of two that holds
// every value. A Go rewrite of the layout, for fuzzing seeds; the
// compacted copy must read exactly as the original (TestCompact).
func compact(t testing.TB, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	at := func(off, n uint64) []byte { // the file is sparse: read only what is used
		b := make([]byte, n)
		if _, err := f.ReadAt(b, int64(off)); err != nil {
			t.Fatal(err)
		}
		return b
	}
	raw := at(0, 256)
	u64 := func(o int) uint64 { return ne.Uint64(raw[o:]) }
	nslots := uint64(ne.Uint32(raw[56:]))
	stride, dataOff, nchunks := u64(64), u64(80), u64(88)
	entOff, used, esz := u64(96), u64(112), uint64(ne.Uint32(raw[120:]))
	strOff, strUsed := u64(128), u64(144)
	ents, strs := at(entOff, used*esz), at(strOff, strUsed)
	// The highest value end among series entries (+128: the chunk header);
	// a sparse histogram's (2.10): its groups', from its table.
	sparse := map[uint64]uint32{} // family id: nbuckets
	for i := uint64(0); i < used; i++ {
		e := ents[i*esz:]
		if ne.Uint16(e[8:]) == 1 && e[10] == 3 && ne.Uint32(e[40:])&0x400 != 0 {
			sparse[ne.Uint64(e[16:])] = ne.Uint32(e[36:])
		}
	}
	need := uint64(128)
	for i := uint64(0); i < used; i++ {
		e := ents[i*esz:]
		if k := ne.Uint16(e[8:]); k != 2 {
			continue
		}
		nb, ok := sparse[ne.Uint64(e[16:])]
		if !ok {
			if end := ne.Uint64(e[48:]) + uint64(ne.Uint32(e[44:])); end > need {
				need = end
			}
			continue
		}
		groups := (uint64(nb) + 7) / 8
		for k := uint64(0); k < uint64(ne.Uint32(e[44:]))/8; k++ {
			w := ne.Uint64(strs[ne.Uint64(e[48:])+8*k:])
			if w>>32 == 0 || uint32(w) == 0 {
				continue
			}
			size := uint64(128)
			if k == groups { // the wide pair
				size = 16
			}
			if end := uint64(uint32(w)&^1) + size; end > need {
				need = end
			}
		}
	}
	ns := uint64(1) << (64 - bits.LeadingZeros64(need-1))
	if ns < 16 {
		ns = 16
	}
	newEnt := uint64(256)
	newStr := newEnt + used*esz
	newData := (newStr + strUsed + 7) &^ 7
	span := 2 * nslots * ns
	out := make([]byte, newData+nchunks*span)
	copy(out, raw[:256])
	copy(out[newEnt:], ents)
	copy(out[newStr:], strs)
	for c := uint64(0); c < nchunks; c++ {
		for r := uint64(0); r < 2*nslots; r++ {
			src := dataOff + c*2*nslots*stride + r*stride
			copy(out[newData+c*span+r*ns:], at(src, ns))
		}
	}
	put := func(o int, v uint64) { ne.PutUint64(out[o:], v) }
	put(64, ns)
	put(72, span)
	put(80, newData)
	put(96, newEnt)
	put(104, used)
	put(128, newStr)
	put(136, strUsed)
	return out
}

// seeds: the C project's fuzz corpus (tests/segment/corpus, made by its
// seg_builder), and compacted segments of its real writers when the C
// build is there.
func seeds(t testing.TB) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	dir := filepath.Join(cfix.Root(), "tests", "segment", "corpus")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out["corpus/"+e.Name()] = b
	}
	out["synthetic/sparse"] = segment.SparseSeed()
	if _, err := os.Stat(filepath.Join(cfix.BuildDir(), "libpcpu.so")); err != nil && os.Getenv("PCPU_GO_REQUIRE_C") != "1" {
		return out
	}
	writer := cfix.SegWriter(t)
	fixture := filepath.Join(cfix.BuildDir(), "tests", "segment", "segment_fixture")
	env := []string{"PCPU_SEGMENT_DIR=" + t.TempDir()}
	for _, c := range []struct {
		name string
		env  []string
		prog string
		args []string
	}{
		{"golden", nil, fixture, []string{"golden", "golden"}},
		{"owned", []string{"PCPU_OWNED_SLOTS=2"}, fixture, []string{"owned", "owned"}},
		{"kinds", nil, writer, []string{"kinds", "kinds"}},
		{"sparse", nil, writer, []string{"sparse", "sparse"}},
		{"tree", []string{"PCPU_INDEX=cpu"}, writer, []string{"tree", "tree", "2"}},
	} {
		w := cfix.Start(t, append(env, c.env...), c.prog, c.args...)
		out["live/"+c.name] = compact(t, w.Path)
		w.Stop()
	}
	return out
}

// TestCompact: a compacted segment reads exactly as its original, which
// also exercises the reader's region arithmetic with another stride (and
// a sparse histogram's groups, 2.10, at their offsets in it).
func TestCompact(t *testing.T) {
	cfix.Need(t, "libpcpu.so", "tests/segment/segment_fixture")
	dir := t.TempDir()
	for _, kind := range []string{"kinds", "sparse"} {
		w := cfix.Start(t, []string{"PCPU_SEGMENT_DIR=" + dir}, cfix.SegWriter(t), kind, kind)
		orig := snapshotGo(t, w.Path)
		r, err := segment.FromBytes(compact(t, w.Path))
		if err != nil {
			t.Fatal(err)
		}
		small, err := r.Snapshot(true)
		if err != nil {
			t.Fatal(err)
		}
		// Printed, as values: NaN (2.8) is not equal to itself.
		if !reflect.DeepEqual(orig.Families, small.Families) &&
			fmt.Sprintf("%#v", orig.Families) != fmt.Sprintf("%#v", small.Families) {
			t.Fatalf("%s: compacted segment reads differently", kind)
		}
	}
}

// read is what the fuzz targets run: a snapshot of bytes, which must be an
// error of this package's vocabulary or a consistent snapshot, never a
// panic.
func read(t *testing.T, data []byte) {
	r, err := segment.FromBytes(data)
	if err == nil {
		r.MaxBytes = 64 << 20
		var s *segment.Snapshot
		s, err = r.Snapshot(true)
		if err == nil {
			for _, f := range s.Families {
				for _, se := range f.Series {
					if len(se.LabelValues) != len(f.LabelNames) ||
						f.Type == segment.Histogram && len(se.Counts) != f.NBuckets() ||
						se.Slots != nil && len(se.Slots) != int(s.NSlots) {
						t.Fatalf("inconsistent snapshot: %+v", f)
					}
				}
			}
			return
		}
	}
	if segment.Reason(err) == "error" {
		t.Fatalf("error outside the vocabulary: %v", err)
	}
}

// FuzzSnapshot: arbitrary bytes (seeded with real segments) as a segment.
func FuzzSnapshot(f *testing.F) {
	for _, b := range seeds(f) {
		f.Add(b)
	}
	f.Fuzz(read)
}

// FuzzDamage: a real segment truncated at one offset and with one bit
// flipped -- the damage the C reader's tests apply, searched by the fuzzer.
func FuzzDamage(f *testing.F) {
	s := seeds(f)
	var names []string
	for n := range s {
		names = append(names, n)
	}
	sortStrings(names)
	for i := range names {
		f.Add(uint8(i), uint32(len(s[names[i]])), uint32(0), uint8(0))
		f.Add(uint8(i), uint32(len(s[names[i]])), uint32(120), uint8(3))
	}
	f.Fuzz(func(t *testing.T, which uint8, cut, at uint32, bit uint8) {
		b := append([]byte(nil), s[names[int(which)%len(names)]]...)
		if int(cut) < len(b) {
			b = b[:cut]
		}
		if len(b) > 0 {
			b[int(at)%len(b)] ^= 1 << (bit & 7)
		}
		read(t, b)
	})
}

// TestDamage: deterministically, every truncation of every seed and every
// bit flip of its header and directory (where the C reader's hostile
// tests mutate), and a flip in every 64th byte of the rest.
func TestDamage(t *testing.T) {
	for name, b := range seeds(t) {
		t.Run(name, func(t *testing.T) {
			step := 1
			if len(b) > 4096 {
				step = 7
			}
			for n := 0; n < len(b); n += step {
				read(t, b[:n])
			}
			meta := len(b)
			if len(b) >= 88 {
				if d := int(ne.Uint64(b[80:])); d > 0 && d < len(b) {
					meta = d
				}
			}
			c := append([]byte(nil), b...)
			for i := 0; i < len(c); i++ {
				if i >= meta && i%64 != 0 {
					continue
				}
				for bit := 0; bit < 8; bit++ {
					c[i] ^= 1 << bit
					read(t, c)
					c[i] ^= 1 << bit
				}
			}
		})
	}
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
