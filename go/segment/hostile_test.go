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
			ne.PutUint32(e[40:], ne.Uint32(e[40:])|0x400)
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
