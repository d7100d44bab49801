package segment_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"pcpu.invalid/go/internal/cfix"
	"pcpu.invalid/go/segment"
)

// TestDamageAgreesWithC: damaged copies of real segments, read by the Go
// reader and by pcpustat: both refuse the same ones, and read the others
// to the same values. One bit flipped in every header byte and in every
// 13th byte of the directory and strings, and a truncation at every 29th
// byte of those (each is one pcpustat run: about 500).
func TestDamageAgreesWithC(t *testing.T) {
	cfix.Need(t, "tools/pcpustat", "tests/segment/segment_fixture")
	dir := t.TempDir()
	w := cfix.Start(t, []string{"PCPU_SEGMENT_DIR=" + dir}, cfix.SegWriter(t), "kinds", "kinds")
	orig := compact(t, w.Path)
	w.Stop() // its writer is gone: both readers read it as stale
	meta := int(ne.Uint64(orig[80:]))
	path := filepath.Join(t.TempDir(), filepath.Base(w.Path))
	pcpustat := filepath.Join(cfix.BuildDir(), "tools", "pcpustat")
	disagree := 0
	runs := 0
	try := func(what string, b []byte) {
		runs++
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		var gerr error
		var g *segment.Snapshot
		r, err := segment.Open(path)
		if err == nil {
			r.AllowStale = true
			g, gerr = r.Snapshot(true)
			r.Close()
		} else {
			gerr = err
		}
		out, cerr := exec.Command(pcpustat, "--json", "-p", "--stale", path).Output()
		if (gerr == nil) != (cerr == nil) {
			disagree++
			if disagree <= 20 {
				var msg []byte
				if ee, ok := cerr.(*exec.ExitError); ok {
					msg = ee.Stderr
				}
				t.Errorf("%s: Go %v; C %v %s", what, gerr, cerr, bytes.TrimSpace(msg))
			}
			return
		}
		if gerr != nil {
			return
		}
		d := json.NewDecoder(bytes.NewReader(out))
		d.UseNumber()
		var c map[string]any
		if err := d.Decode(&c); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		t.Run(what, func(t *testing.T) { compareWithC(t, g, c) })
	}
	for i := 0; i < meta; i++ {
		if i >= 256 && i%13 != 0 {
			continue
		}
		b := append([]byte(nil), orig...)
		b[i] ^= 1 << (i % 8)
		try(fmt.Sprintf("flip byte %d bit %d", i, i%8), b)
	}
	for n := 0; n < meta+64; n += 29 {
		try(fmt.Sprintf("truncated at %d", n), orig[:n])
	}
	t.Logf("%d damaged copies tried (%d bytes of header, directory and strings)", runs, meta)
	if disagree > 0 {
		t.Errorf("%d damaged files read differently", disagree)
	}
}
