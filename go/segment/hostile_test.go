package segment_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"pcpu.invalid/go/internal/cfix"
	"pcpu.invalid/go/segment"
)

// A compacted segment's directory (compact(): entries at 256).
type dir struct {
	b      []byte
	used   int
	strOff uint64
}

func newDir(b []byte) dir {
	return dir{b: b, used: int(ne.Uint64(b[112:])), strOff: ne.Uint64(b[128:])}
}

func (d dir) entry(i int) []byte { return d.b[256+64*i : 256+64*(i+1)] }

// find returns the index of the first entry of kind k (and type typ, if
// not 0) whose blob starts with prefix.
func (d dir) find(t *testing.T, k uint16, typ byte, prefix string) int {
	t.Helper()
	for i := 0; i < d.used; i++ {
		e := d.entry(i)
		if ne.Uint16(e[8:]) != k || typ != 0 && e[10] != typ {
			continue
		}
		blob := d.b[d.strOff+ne.Uint64(e[24:]):]
		if bytes.HasPrefix(blob, []byte(prefix)) {
			return i
		}
	}
	t.Fatalf("no entry of kind %d type %d with blob %q", k, typ, prefix)
	return -1
}

func (d dir) blob(i int) []byte {
	e := d.entry(i)
	off := d.strOff + ne.Uint64(e[24:])
	return d.b[off : off+uint64(ne.Uint32(e[32:]))]
}

// TestHostileEntries: single, targeted corruptions of a real segment's
// directory, each of which the C reader refuses (EBADMSG): the Go reader
// must refuse it too, with ErrCorrupt, and pcpustat must agree.
func TestHostileEntries(t *testing.T) {
	cfix.Need(t, "tools/pcpustat", "tests/segment/segment_fixture")
	sdir := t.TempDir()
	w := cfix.Start(t, []string{"PCPU_SEGMENT_DIR=" + sdir}, cfix.SegWriter(t), "kinds", "kinds")
	orig := compact(t, w.Path)
	w.Stop()
	path := filepath.Join(t.TempDir(), filepath.Base(w.Path))
	cases := []struct {
		name   string
		damage func(d dir)
	}{
		{"label value not UTF-8", func(d dir) { d.blob(d.find(t, 2, 1, "/a"))[1] = 0xff }},
		{"label value overlong UTF-8", func(d dir) {
			b := d.blob(d.find(t, 2, 1, "/b"))
			b[2], b[3] = 0xc0, 0xa9 // é as an overlong 2-byte form
		}},
		{"metric name with '-'", func(d dir) { d.blob(d.find(t, 1, 0, "w_hits"))[1] = '-' }},
		{"metric name starting with a digit", func(d dir) { d.blob(d.find(t, 1, 0, "w_hits"))[0] = '1' }},
		{"label name reserved", func(d dir) {
			b := d.blob(d.find(t, 1, 0, "w_seconds"))
			i := bytes.Index(b, []byte("path\x00"))
			copy(b[i:], "__th")
		}},
		{"unit not the name's suffix", func(d dir) {
			b := d.blob(d.find(t, 1, 0, "w_seconds"))
			i := bytes.Index(b, []byte("seconds\x00path"))
			b[i] = 'x'
		}},
		{"value not aligned", func(d dir) {
			e := d.entry(d.find(t, 2, 1, ""))
			ne.PutUint64(e[48:], ne.Uint64(e[48:])+4)
		}},
		{"chunk past the end", func(d dir) {
			e := d.entry(d.find(t, 2, 1, ""))
			ne.PutUint32(e[40:], 7)
		}},
		{"family id 0", func(d dir) { ne.PutUint64(d.entry(d.find(t, 1, 0, "w_level"))[16:], 0) }},
		{"value size not the type's", func(d dir) {
			e := d.entry(d.find(t, 2, 2, ""))
			ne.PutUint32(e[44:], 32) // 8, 16 or 24 (fractions) only
		}},
		{"bounds not increasing", func(d dir) {
			b := d.blob(d.find(t, 1, 3, "w_latency_us"))
			n := len(b)
			copy(b[n-8:], b[n-16:n-8]) // the last bound equals the one before
		}},
		{"group member index past the group", func(d dir) {
			e := d.entry(d.find(t, 4, 1, "/a"))
			ne.PutUint32(e[40:], 5)
		}},
		{"two series sharing storage", func(d dir) {
			a, b := d.find(t, 2, 1, "/a"), d.find(t, 2, 1, "/b")
			ea, eb := d.entry(a), d.entry(b)
			copy(eb[40:56], ea[40:56]) // chunk, size, value offset
		}},
		{"histogram scheme unknown", func(d dir) {
			e := d.entry(d.find(t, 1, 3, "w_latency_us"))
			ne.PutUint32(e[40:], ne.Uint32(e[40:])|0x800)
		}},
		{"sparse histogram without pairs", func(d dir) { // 2.10: 0x400 only with 0x100
			e := d.entry(d.find(t, 1, 3, "w_latency_us"))
			ne.PutUint32(e[40:], ne.Uint32(e[40:])&^0x100|0x400)
		}},
		{"info flag on a counter", func(d dir) {
			e := d.entry(d.find(t, 1, 1, "w_hits"))
			ne.PutUint16(e[14:], ne.Uint16(e[14:])|4)
		}},
		{"fraction flag on a histogram", func(d dir) {
			e := d.entry(d.find(t, 1, 3, "w_latency_us"))
			ne.PutUint16(e[14:], ne.Uint16(e[14:])|16)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := append([]byte(nil), orig...)
			c.damage(newDir(b))
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			r, err := segment.Open(path)
			if err == nil {
				r.AllowStale = true
				_, err = r.Snapshot(true)
				r.Close()
			}
			if !errors.Is(err, segment.ErrCorrupt) {
				t.Errorf("Go reader: %v, want a corrupted segment", err)
			}
			out, cerr := exec.Command(filepath.Join(cfix.BuildDir(), "tools", "pcpustat"), "--json", "--stale", path).CombinedOutput()
			if cerr == nil || !bytes.Contains(out, []byte("corrupt")) {
				t.Errorf("pcpustat: %v %s, want a corrupted segment", cerr, out)
			}
		})
	}
}

// TestHostileSparse: a real segment's sparse histogram tables (2.10),
// damaged. A word that is not a place in a slot (a half even, an offset
// not a multiple of 16, a group past slot_stride, two groups in one
// place) is corruption for the Go reader and pcpustat alike; a word being
// stored (a half 0) or naming a chunk the header does not count reads as a
// group not made, to the same values in both.
func TestHostileSparse(t *testing.T) {
	cfix.Need(t, "tools/pcpustat", "tests/segment/segment_fixture")
	sdir := t.TempDir()
	w := cfix.Start(t, []string{"PCPU_SEGMENT_DIR=" + sdir}, cfix.SegWriter(t), "sparse", "sparse")
	orig := compact(t, w.Path)
	w.Stop()
	path := filepath.Join(t.TempDir(), filepath.Base(w.Path))
	stride, nchunks := ne.Uint64(orig[64:]), ne.Uint64(orig[88:])
	// word returns table word k of sp_latency_us's series whose label is
	// label (a group of /a: 0 and 1 made; of /b: 2).
	word := func(d dir, label string, k int) []byte {
		fam := d.entry(d.find(t, 1, 3, "sp_latency_us"))
		if ne.Uint32(fam[40:])&0x400 == 0 {
			t.Skip("the C writer makes dense series (before 2.10)")
		}
		for i := 0; i < d.used; i++ {
			e := d.entry(i)
			if ne.Uint16(e[8:]) == 2 && ne.Uint64(e[16:]) == ne.Uint64(fam[16:]) && string(d.blob(i)) == label+"\x00" {
				return d.b[d.strOff+ne.Uint64(e[48:])+8*uint64(k):][:8]
			}
		}
		t.Fatalf("no sp_latency_us{path=%q}", label)
		return nil
	}
	set := func(d dir, label string, k int, f func(hi, lo uint32) (uint32, uint32)) {
		b := word(d, label, k)
		w := ne.Uint64(b)
		if w == 0 {
			t.Fatalf("sp_latency_us{path=%q}: group %d not made", label, k)
		}
		hi, lo := f(uint32(w>>32), uint32(w))
		ne.PutUint64(b, uint64(hi)<<32|uint64(lo))
	}
	cases := []struct {
		name    string
		corrupt bool
		damage  func(d dir)
	}{
		{"high half even", true, func(d dir) { set(d, "/a", 0, func(h, l uint32) (uint32, uint32) { return h + 1, l }) }},
		{"low half even", true, func(d dir) { set(d, "/a", 1, func(h, l uint32) (uint32, uint32) { return h, l - 1 }) }},
		{"offset not a multiple of 16", true, func(d dir) {
			set(d, "/a", 0, func(h, l uint32) (uint32, uint32) { return h, l + 8 })
		}},
		{"group past slot_stride", true, func(d dir) {
			set(d, "/b", 2, func(h, l uint32) (uint32, uint32) { return h, uint32(stride-64) | 1 })
		}},
		{"two groups in one place", true, func(d dir) { copy(word(d, "/b", 2), word(d, "/a", 0)) }},
		{"high half 0", false, func(d dir) { set(d, "/a", 0, func(h, l uint32) (uint32, uint32) { return 0, l }) }},
		{"low half 0", false, func(d dir) { set(d, "/b", 2, func(h, l uint32) (uint32, uint32) { return h, 0 }) }},
		{"chunk past nchunks", false, func(d dir) {
			set(d, "/a", 1, func(h, l uint32) (uint32, uint32) { return 2*uint32(nchunks) + 1, l })
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := append([]byte(nil), orig...)
			c.damage(newDir(b))
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			r, err := segment.Open(path)
			var g *segment.Snapshot
			if err == nil {
				r.AllowStale = true
				g, err = r.Snapshot(true)
				r.Close()
			}
			if c.corrupt {
				if !errors.Is(err, segment.ErrCorrupt) {
					t.Errorf("Go reader: %v, want a corrupted segment", err)
				}
				out, cerr := exec.Command(filepath.Join(cfix.BuildDir(), "tools", "pcpustat"), "--json", "--stale", path).CombinedOutput()
				if cerr == nil || !bytes.Contains(out, []byte("corrupt")) {
					t.Errorf("pcpustat: %v %s, want a corrupted segment", cerr, out)
				}
				return
			}
			if err != nil {
				t.Fatalf("Go reader: %v", err)
			}
			if n := g.Families[0].Series[1].Count() + g.Families[0].Series[2].Count(); n >= 13 {
				t.Errorf("sp_latency_us /a and /b: %d observations, the group not left out", n)
			}
			compareWithC(t, g, cfix.Pcpustat(t, "--json", "-p", "--stale", path))
		})
	}
}
