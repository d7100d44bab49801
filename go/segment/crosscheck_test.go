package segment_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"pcpu.invalid/go/internal/cfix"
	"pcpu.invalid/go/segment"
)

// rat parses a number as pcpustat wrote it, exactly.
func rat(t *testing.T, v any) *big.Rat {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("not a number: %#v", v)
	}
	r, ok := new(big.Rat).SetString(string(n))
	if !ok {
		t.Fatalf("bad number %q", n)
	}
	return r
}

// scaled is x * 10^scale, exactly.
func scaled(x *big.Rat, scale int8) *big.Rat {
	p := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(scale))), nil))
	if scale < 0 {
		return new(big.Rat).Quo(x, p)
	}
	return new(big.Rat).Mul(x, p)
}

func abs(x int8) int8 {
	if x < 0 {
		return -x
	}
	return x
}

// jsonFloat reads a value pcpustat's JSON wrote as a double: a number, or
// "NaN", "+Inf", "-Inf".
func jsonFloat(t *testing.T, v any) float64 {
	t.Helper()
	switch x := v.(type) {
	case string:
		switch x {
		case "NaN":
			return math.NaN()
		case "+Inf":
			return math.Inf(1)
		case "-Inf":
			return math.Inf(-1)
		}
	case json.Number:
		f, err := x.Float64()
		if err == nil {
			return f
		}
	}
	t.Fatalf("not a value: %#v", v)
	return 0
}

// sameFloat: equal doubles, NaN equal to NaN (-0 and 0 alike: JSON says 0).
func sameFloat(a, b float64) bool {
	return a == b || math.IsNaN(a) && math.IsNaN(b)
}

// seriesValue is a counter's or gauge's exposed value, exactly.
func seriesValue(f *segment.Family, s *segment.Series) *big.Rat {
	var v *big.Rat
	if f.Type == segment.Counter {
		v = new(big.Rat).SetInt(new(big.Int).SetUint64(s.Value))
	} else {
		v = new(big.Rat).SetInt64(int64(s.Value))
	}
	if f.Nanos {
		v.Add(v, big.NewRat(s.Nanos, 1e9))
	}
	return scaled(v, f.Scale)
}

// compareWithC checks a Go snapshot against pcpustat --json -p, value
// by value: every family, series, label, value, bucket and slot.
func compareWithC(t *testing.T, g *segment.Snapshot, c map[string]any) {
	t.Helper()
	slotIndex := map[uint32]string{1: "cpu", 2: "cid"}[g.SlotIndex]
	want := map[string]any{"segment": g.Name, "pid": fmt.Sprint(g.PID), "slots": fmt.Sprint(g.NSlots),
		"owned_slots": fmt.Sprint(g.OwnedSlots), "slot_index": slotIndex, "state": g.State.String()}
	for k, v := range want {
		if fmt.Sprint(c[k]) != v {
			t.Errorf("%s: Go %v, C %v", k, v, c[k])
		}
	}
	fams := c["statistics"].(map[string]any)["families"].([]any)
	// C writes a name's label sets (2.8) as one family: Go's families of
	// one name, in order, hold its metrics.
	names := 0
	for i := range g.Families {
		if i == 0 || g.Families[i].Name != g.Families[i-1].Name {
			names++
		}
	}
	if len(fams) != names {
		t.Fatalf("families: Go %d names, C %d", names, len(fams))
	}
	var slots []any
	if ps, ok := c["per_slot"].([]any); ok {
		slots = ps
	}
	nslot, ci, at := 0, -1, 0
	var ms []any
	for i := range g.Families {
		gf := &g.Families[i]
		if i == 0 || gf.Name != g.Families[i-1].Name {
			if ci >= 0 && at != len(ms) {
				t.Fatalf("%s: Go %d series, C %d", g.Families[i-1].Name, at, len(ms))
			}
			ci++
			at = 0
			cf := fams[ci].(map[string]any)
			typ := gf.Type.String()
			if cf["name"] != gf.Name || cf["type"] != typ || cf["help"] != gf.Help || cf["unit"] != gf.Unit {
				t.Errorf("family %d: Go %s %s %q %q, C %v %v %q %q", i, gf.Name, typ, gf.Help, gf.Unit,
					cf["name"], cf["type"], cf["help"], cf["unit"])
			}
			ms = cf["metrics"].([]any)
		}
		if at+len(gf.Series) > len(ms) {
			t.Fatalf("%s: Go has more series than C's %d", gf.Name, len(ms))
		}
		for k := range gf.Series {
			gs := &gf.Series[k]
			cm := ms[at].(map[string]any)
			at++
			labels := cm["labels"].(map[string]any)
			if len(labels) != len(gf.LabelNames) {
				t.Errorf("%s series %d: labels %v", gf.Name, k, labels)
			}
			for l, n := range gf.LabelNames {
				if labels[n] != gs.LabelValues[l] {
					t.Errorf("%s series %d: label %s: Go %q, C %v", gf.Name, k, n, gs.LabelValues[l], labels[n])
				}
			}
			if gf.Type != segment.Histogram && (gs.Residue != 0 || math.Signbit(gs.Residue)) {
				// 2.8, beyond the words: C's double (NaN and infinities
				// as strings in JSON), bit for bit Go's.
				if gv, cv := gs.Float(gf), jsonFloat(t, cm["value"]); !sameFloat(gv, cv) {
					t.Errorf("%s series %d: Go %v, C %v", gf.Name, k, gv, cv)
				}
			} else if gf.Type != segment.Histogram {
				if gv, cv := seriesValue(gf, gs), rat(t, cm["value"]); gv.Cmp(cv) != 0 {
					t.Errorf("%s series %d: Go %s, C %s", gf.Name, k, gv.FloatString(9), cv.FloatString(9))
				}
			} else {
				compareHistogram(t, gf, gs, cm)
			}
			if slots == nil {
				continue
			}
			cs := slots[nslot].(map[string]any)["slots"].([]any)
			nslot++
			if gs.Slots == nil {
				if len(cs) != 0 {
					t.Errorf("%s series %d: Go has no per-slot split, C %v", gf.Name, k, cs)
				}
				continue
			}
			if len(cs) != len(gs.Slots) {
				t.Fatalf("%s series %d: Go %d slots, C %d", gf.Name, k, len(gs.Slots), len(cs))
			}
			for s, v := range gs.Slots {
				gv := new(big.Rat).SetInt64(int64(v))
				if gf.Type != segment.Histogram {
					gv = scaled(gv, gf.Scale)
				}
				if cv := rat(t, cs[s]); gv.Cmp(cv) != 0 {
					t.Errorf("%s series %d slot %d: Go %s, C %s", gf.Name, k, s, gv.RatString(), cv.RatString())
				}
			}
		}
	}
	if ci >= 0 && at != len(ms) {
		t.Fatalf("%s: Go %d series, C %d", g.Families[len(g.Families)-1].Name, at, len(ms))
	}
	if slots != nil && nslot != len(slots) {
		t.Errorf("per_slot: Go %d series, C %d", nslot, len(slots))
	}
}

func compareHistogram(t *testing.T, gf *segment.Family, gs *segment.Series, cm map[string]any) {
	t.Helper()
	if gv, cv := new(big.Rat).SetUint64(gs.Count()), rat(t, cm["count"]); gv.Cmp(cv) != 0 {
		t.Errorf("%s count: Go %s, C %s", gf.Name, gv.RatString(), cv.RatString())
	}
	if gs.Residue != 0 { // 2.8: the sum beyond the integer words, a double
		if gv, cv := gs.SumFloat(gf), jsonFloat(t, cm["sum"]); !sameFloat(gv, cv) {
			t.Errorf("%s sum: Go %v, C %v", gf.Name, gv, cv)
		}
	} else if gv, cv := scaled(new(big.Rat).SetInt64(gs.Sum), gf.Scale), rat(t, cm["sum"]); gv.Cmp(cv) != 0 {
		t.Errorf("%s sum: Go %s, C %s", gf.Name, gv.FloatString(12), cv.FloatString(12))
	}
	cb := cm["buckets"].([]any)
	exp := gf.ExposedBuckets()
	if len(cb) != len(exp) {
		t.Fatalf("%s: Go exposes %d buckets, C %d", gf.Name, len(exp), len(cb))
	}
	var cum uint64
	k := 0
	for _, x := range exp {
		for ; k <= x; k++ {
			cum += gs.Counts[k]
		}
		b := cb[0].(map[string]any)
		cb = cb[1:]
		if gv, cv := new(big.Rat).SetUint64(cum), rat(t, b["count"]); gv.Cmp(cv) != 0 {
			t.Errorf("%s bucket %d: Go %d, C %s", gf.Name, x, cum, cv.RatString())
		}
		if x == gf.NBuckets()-1 {
			if b["le"] != "+Inf" {
				t.Errorf("%s: last le %v", gf.Name, b["le"])
			}
			continue
		}
		// The C writer prints a bound as a double (shortest form that
		// reads back): compare as doubles.
		// At 10^15 units and beyond C scales the int64 as a double
		// (pcpu_stats_scale(): one more rounding); below, exactly.
		gle, _ := scaled(new(big.Rat).SetInt64(gf.Upper[x]), gf.Scale).Float64()
		if u := gf.Upper[x]; u >= 1e15 || u <= -1e15 {
			gle = (&segment.Series{Sum: u}).SumFloat(gf)
		}
		cle, _ := rat(t, b["le"]).Float64()
		if gle != cle {
			t.Errorf("%s bucket %d: le Go %v, C %v", gf.Name, x, gle, cle)
		}
	}
}

func snapshotGo(t *testing.T, path string) *segment.Snapshot {
	t.Helper()
	r, err := segment.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s, err := r.Snapshot(true)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCrossCheck: segments of every kind, written by the C library's own
// programs, read by the Go reader and by pcpustat: the same values.
func TestCrossCheck(t *testing.T) {
	cfix.Need(t, "tools/pcpustat", "tests/segment/segment_fixture")
	writer := cfix.SegWriter(t)
	fixture := filepath.Join(cfix.BuildDir(), "tests", "segment", "segment_fixture")
	dir := t.TempDir()
	env := []string{"PCPU_SEGMENT_DIR=" + dir}
	cases := []struct {
		name string
		env  []string
		prog string
		args []string
	}{
		{"golden", nil, fixture, []string{"golden", "golden"}},
		{"owned", []string{"PCPU_OWNED_SLOTS=2"}, fixture, []string{"owned", "owned"}},
		{"kinds", nil, writer, []string{"kinds", "kinds"}},
		{"sparse", nil, writer, []string{"sparse", "sparse"}},
		{"tree", []string{"PCPU_INDEX=cpu"}, writer, []string{"tree", "tree", "3"}},
		{"latency", nil, fixture, []string{"latency", "latency"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := cfix.Start(t, append(env, c.env...), c.prog, c.args...)
			if c.name == "latency" { // stop its recording thread: values stay put
				fmt.Fprintln(w.In, "stop")
				for w.Lines.Scan() {
					if len(w.Lines.Text()) > 6 && w.Lines.Text()[:6] == "native" {
						break
					}
				}
			}
			g := snapshotGo(t, w.Path)
			if !g.Stable || g.Changed != 0 {
				t.Errorf("Go snapshot: stable %v, changed %d", g.Stable, g.Changed)
			}
			compareWithC(t, g, cfix.Pcpustat(t, "--json", "-p", w.Path))
			checkKinds(t, c.name, g)
			snapshotsAlike(t, w.Path, g) // as a 32-bit target reads it
		})
	}
}

// checkKinds makes sure each case holds what it is there for (a writer
// that stopped writing a kind must not make the cross-check vacuous).
func checkKinds(t *testing.T, name string, g *segment.Snapshot) {
	t.Helper()
	has := map[string]bool{}
	for i, f := range g.Families {
		if i > 0 && f.Name == g.Families[i-1].Name {
			has["labelsets"] = true
		}
		if f.Sparse { // 2.10
			has["sparse"] = true
			if f.Nanos {
				has["sparse wide"] = true
			}
		}
		switch {
		case f.Nanos && f.Type == segment.Histogram:
			has["wide"] = true
		case f.Nanos:
			has["nanos"] = true
			for _, s := range f.Series {
				if s.Residue != 0 || math.IsNaN(s.Residue) {
					has["residue"] = true
				}
			}
		case f.Info:
			has["info"] = true
		case f.Type == segment.Histogram:
			has[map[int]string{1: "explicit", 2: "loglinear", 3: "exponential"}[f.Scheme]] = true
		}
		for _, s := range f.Series {
			if s.Group {
				has["group"] = true
			}
		}
	}
	need := map[string][]string{
		"golden":  {"explicit", "loglinear"},
		"kinds":   {"nanos", "residue", "wide", "labelsets", "info", "explicit", "loglinear", "exponential", "group"},
		"latency": {"loglinear", "exponential"},
		"sparse":  {"sparse", "sparse wide", "explicit", "exponential"},
		"tree":    {"sparse"},
	}[name]
	for _, k := range need {
		if !has[k] {
			t.Errorf("%s: no %s family", name, k)
		}
	}
	switch name {
	case "owned":
		if g.OwnedSlots != 2 {
			t.Errorf("owned slots %d", g.OwnedSlots)
		}
	case "tree":
		if g.Flags&segment.FlagTree == 0 {
			t.Errorf("not a tree: flags %#x", g.Flags)
		}
		// The publisher's 1 and its children's 1000, 2000, 3000.
		if v := g.Families[0].Series[0].Value; g.Families[0].Name != "t_requests" || v != 6001 {
			t.Errorf("tree total %s = %d", g.Families[0].Name, v)
		}
	}
}

// TestLiveness: up and reason as the C reader judges them: a writer that
// died is gone (ErrWriterGone, reason writer_gone), its values still
// readable with AllowStale; a tree lives while any of its processes does,
// and a read lock on byte 0 held by another process does not keep it live.
func TestLiveness(t *testing.T) {
	cfix.Need(t, "tools/pcpustat", "tests/segment/segment_fixture")
	writer := cfix.SegWriter(t)
	fixture := filepath.Join(cfix.BuildDir(), "tests", "segment", "segment_fixture")
	dir := t.TempDir()
	env := []string{"PCPU_SEGMENT_DIR=" + dir}

	w := cfix.Start(t, env, fixture, "die", "dead")
	w.Stop()
	r, err := segment.Open(w.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = r.Snapshot(false)
	if !errors.Is(err, segment.ErrWriterGone) || segment.Reason(err) != "writer_gone" {
		t.Fatalf("dead writer: %v (reason %q)", err, segment.Reason(err))
	}
	r.AllowStale = true
	s, err := r.Snapshot(true)
	if err != nil || s.State != segment.StateGone {
		t.Fatalf("stale read: %v, state %v", err, s)
	}
	compareWithC(t, s, cfix.Pcpustat(t, "--json", "-p", "--stale", w.Path))

	// A tree whose publisher was killed lives on in its children (they
	// hold the member lock), for the C reader and the Go reader alike --
	// until they exit too.
	hold := filepath.Join(t.TempDir(), "hold")
	if err := os.WriteFile(hold, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tw := cfix.Start(t, append(env, "PCPU_INDEX=cpu"), writer, "tree", "orphans", "2", hold)
	tw.Cmd.Process.Kill()
	tw.Cmd.Wait()
	tw.In = nil
	r2, err := segment.Open(tw.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	s2, err := r2.Snapshot(true)
	if err != nil || s2.State != segment.StateLive {
		t.Fatalf("tree without its publisher: %v %v", err, s2)
	}
	compareWithC(t, s2, cfix.Pcpustat(t, "--json", "-p", tw.Path))
	// A process that can only read the file takes read locks on byte 0
	// and on the member bytes (OFD locks, as another open file description
	// here): the member bytes are refused while the tree lives; held from
	// its death on, they must not keep the tree live.
	lf, err := os.Open(tw.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	const ofdSetlk, ofdSetlkw = 37, 38 // F_OFD_SETLK, F_OFD_SETLKW
	lk := syscall.Flock_t{Type: syscall.F_RDLCK, Len: 1}
	if err := syscall.FcntlFlock(lf.Fd(), ofdSetlk, &lk); err != nil {
		t.Errorf("a read lock on byte 0: %v", err)
	}
	lk = syscall.Flock_t{Type: syscall.F_RDLCK, Start: 1, Len: 1024}
	if err := syscall.FcntlFlock(lf.Fd(), ofdSetlk, &lk); err == nil {
		t.Errorf("a read lock on the member bytes was taken while the tree lives")
	}
	locked := make(chan error, 1)
	go func() {
		l := syscall.Flock_t{Type: syscall.F_RDLCK, Start: 1, Len: 1024}
		locked <- syscall.FcntlFlock(lf.Fd(), ofdSetlkw, &l)
	}()
	os.Remove(hold) // the children exit
	select {
	case err := <-locked:
		if err != nil {
			t.Fatalf("the foreign read lock: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the foreign read lock not taken in 60 s after the tree's processes exit")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err = r2.Snapshot(false)
		if errors.Is(err, segment.ErrWriterGone) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !errors.Is(err, segment.ErrWriterGone) {
		t.Errorf("tree whose processes all exited: %v", err)
	}
}

// TestOpenRefuses: what the C reader refuses before reading: a symlink,
// a FIFO (never opened for reading: O_PATH first), a directory, another
// owner than asked for.
func TestOpenRefuses(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pcpu.1.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	reg := filepath.Join(dir, "pcpu.1.reg")
	os.WriteFile(reg, make([]byte, 512), 0o600)
	link := filepath.Join(dir, "pcpu.1.link")
	os.Symlink(reg, link)
	for _, p := range []string{fifo, link, dir} {
		done := make(chan error, 1)
		go func() { _, err := segment.Open(p); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, segment.ErrPermission) {
				t.Errorf("%s: %v, want ErrPermission", p, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: Open blocked", p)
		}
	}
	if _, err := segment.OpenOwned(reg, os.Getuid()+1); !errors.Is(err, segment.ErrPermission) {
		t.Errorf("other owner: %v", err)
	}
	if _, err := segment.Open(reg); !errors.Is(err, segment.ErrNotReady) {
		t.Errorf("zero header: %v, want ErrNotReady", err)
	}
}
