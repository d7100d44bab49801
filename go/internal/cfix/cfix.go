// Package cfix runs the C project's programs for the Go tests: the
// segment writers (tests/segment/segment_fixture, go/testdata/segwriter.c
// built against the C build's libpcpu) and the C reader (build/tools/pcpustat).
//
// The C build is found in $PCPU_BUILD_DIR, else ../build from the go/
// folder. Without it, tests that need it skip -- unless
// PCPU_GO_REQUIRE_C=1 (scripts/test.sh sets it), where they fail.
package cfix

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// Root is the repository root (go/..).
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// BuildDir is the C build folder.
func BuildDir() string {
	if d := os.Getenv("PCPU_BUILD_DIR"); d != "" {
		return d
	}
	return filepath.Join(Root(), "build")
}

// Need skips (or fails, with PCPU_GO_REQUIRE_C=1) when the C build lacks
// the files named (relative to BuildDir).
func Need(t testing.TB, files ...string) {
	t.Helper()
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(BuildDir(), f)); err != nil {
			if os.Getenv("PCPU_GO_REQUIRE_C") == "1" {
				t.Fatalf("C build: %v (build the C project first)", err)
			}
			t.Skipf("C build: %v (build the C project first; PCPU_BUILD_DIR)", err)
		}
	}
}

var (
	writerOnce sync.Once
	writerPath string
	writerErr  error
)

// SegWriter returns go/testdata/segwriter.c built against the C build's
// libpcpu (once per test binary, in a temporary folder).
func SegWriter(t testing.TB) string {
	t.Helper()
	Need(t, "libpcpu.so", "tools/pcpustat")
	writerOnce.Do(func() {
		// One folder per user, the binary replaced atomically: test
		// binaries of several packages build it at once, and none
		// leaves a folder behind.
		dir := filepath.Join(os.TempDir(), fmt.Sprintf("pcpu-segwriter-%d", os.Getuid()))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			writerErr = err
			return
		}
		tmp, err := os.CreateTemp(dir, "segwriter-*")
		if err != nil {
			writerErr = err
			return
		}
		tmp.Close()
		writerPath = filepath.Join(dir, "segwriter")
		cc := os.Getenv("CC")
		if cc == "" {
			cc = "cc"
		}
		root, build := Root(), BuildDir()
		out, err := exec.Command(cc, "-O1", "-Wall", "-Werror", "-I"+filepath.Join(root, "include"),
			"-I"+filepath.Join(build, "include"), filepath.Join(root, "go", "testdata", "segwriter.c"),
			"-o", tmp.Name(), "-L"+build, "-lpcpu-stats", "-lpcpu", "-Wl,-rpath,"+build, "-lpthread").CombinedOutput()
		if err != nil {
			os.Remove(tmp.Name())
			writerErr = fmt.Errorf("building segwriter: %v\n%s", err, out)
			return
		}
		writerErr = os.Rename(tmp.Name(), writerPath)
	})
	if writerErr != nil {
		t.Fatal(writerErr)
	}
	return writerPath
}

// Writer is a running C writer: its segment's path, and its standard
// input (closing it makes the writer unpublish and exit).
type Writer struct {
	Path  string
	Cmd   *exec.Cmd
	In    io.WriteCloser
	Lines *bufio.Scanner
}

// Start runs a writer with env added to the environment (PCPU_SEGMENT_DIR
// among them) and waits for its "ready PATH" line. The writer is stopped
// at the end of the test.
func Start(t testing.TB, env []string, prog string, args ...string) *Writer {
	t.Helper()
	cmd := exec.Command(prog, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &Writer{Cmd: cmd, In: in, Lines: bufio.NewScanner(out)}
	t.Cleanup(func() { w.Stop() })
	ready := make(chan string, 1)
	go func() {
		for w.Lines.Scan() {
			if p, ok := strings.CutPrefix(w.Lines.Text(), "ready "); ok {
				ready <- p
				return
			}
		}
		close(ready)
	}()
	select {
	case p, ok := <-ready:
		if !ok {
			t.Fatalf("%s %v exited before it was ready", prog, args)
		}
		w.Path = p
	case <-time.After(60 * time.Second):
		t.Fatalf("%s %v: not ready after 60 s", prog, args)
	}
	return w
}

// Stop closes the writer's standard input and waits for it.
func (w *Writer) Stop() {
	if w.In != nil {
		w.In.Close()
		w.In = nil
		w.Cmd.Wait()
	}
}

// Pcpustat runs build/tools/pcpustat with args and decodes its --json
// output (numbers kept as written).
func Pcpustat(t testing.TB, args ...string) map[string]any {
	t.Helper()
	out, err := exec.Command(filepath.Join(BuildDir(), "tools", "pcpustat"), args...).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("pcpustat %v: %v\n%s", args, err, stderr)
	}
	d := json.NewDecoder(bytes.NewReader(out))
	d.UseNumber()
	var v map[string]any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("pcpustat %v: %v\n%s", args, err, out)
	}
	return v
}

// StartAll starts the C writers of every kind in a fresh directory:
// segment_fixture golden and owned, segwriter kinds and a tree of 3
// children, and a writer that died (its segment left behind, named dead).
func StartAll(t *testing.T) (string, []*Writer) {
	t.Helper()
	Need(t, "tools/pcpustat", "tests/segment/segment_fixture")
	writer := SegWriter(t)
	fixture := filepath.Join(BuildDir(), "tests", "segment", "segment_fixture")
	dir := t.TempDir()
	env := []string{"PCPU_SEGMENT_DIR=" + dir}
	ws := []*Writer{
		Start(t, env, fixture, "golden", "golden"),
		Start(t, append(env, "PCPU_OWNED_SLOTS=2"), fixture, "owned", "owned"),
		Start(t, env, writer, "kinds", "kinds"),
		Start(t, append(env, "PCPU_INDEX=cpu"), writer, "tree", "tree", "3"),
	}
	dead := Start(t, env, fixture, "die", "dead")
	dead.Stop()
	return dir, ws
}
