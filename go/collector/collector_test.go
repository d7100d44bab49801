// Package collector holds the end-to-end test of the receiver in a real
// OpenTelemetry Collector built by ocb (builder-config.yaml).
package collector

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"pcpu.invalid/go/internal/cfix"
	"pcpu.invalid/go/internal/otlpcmp"
)

// BuilderVersion is ocb's release, the collector modules' release.
const BuilderVersion = "v0.165.0"

func goDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// cacheDir keeps ocb and the collectors it built between runs:
// $PCPU_GO_CACHE, else the user's cache folder.
func cacheDir(t *testing.T) string {
	d := os.Getenv("PCPU_GO_CACHE")
	if d == "" {
		u, err := os.UserCacheDir()
		if err != nil {
			t.Fatal(err)
		}
		d = filepath.Join(u, "pcpu-go")
	}
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// sourceHash: what the collector binary depends on here -- the builder
// configuration, the module files and every non-test Go file of the
// receiver's module -- so an unchanged tree reuses the cached build.
func sourceHash(t *testing.T) string {
	h := sha256.New()
	root := goDir()
	var files []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		n := d.Name()
		if !d.IsDir() && (strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") ||
			n == "go.mod" || n == "go.sum" || n == "builder-config.yaml") {
			files = append(files, p)
		}
		return nil
	})
	sort.Strings(files)
	for _, p := range files {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "%s\n", strings.TrimPrefix(p, root))
		io.Copy(h, f)
		f.Close()
	}
	fmt.Fprintf(h, "%s %s\n", BuilderVersion, runtime.Version())
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// buildCollector returns the path of otelcol-pcpu built by ocb from
// builder-config.yaml, from the cache when the sources did not change.
func buildCollector(t *testing.T) string {
	cache := cacheDir(t)
	out := filepath.Join(cache, "otelcol-pcpu-"+sourceHash(t))
	bin := filepath.Join(out, "otelcol-pcpu")
	if _, err := os.Stat(bin); err == nil {
		t.Logf("collector from the cache: %s", bin)
		return bin
	}
	start := time.Now()
	gobin := filepath.Join(cache, "bin")
	builder := filepath.Join(gobin, "builder-"+BuilderVersion)
	if _, err := os.Stat(builder); err != nil {
		cmd := exec.Command("go", "install", "go.opentelemetry.io/collector/cmd/builder@"+BuilderVersion)
		cmd.Env = append(os.Environ(), "GOBIN="+gobin)
		if o, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("installing ocb: %v\n%s", err, o)
		}
		if err := os.Rename(filepath.Join(gobin, "builder"), builder); err != nil {
			t.Fatal(err)
		}
	}
	tmpl, err := os.ReadFile(filepath.Join(goDir(), "collector", "builder-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	work := out + ".tmp"
	os.RemoveAll(work)
	cfg := strings.NewReplacer("@GO_DIR@", goDir(), "@OUTPUT@", work).Replace(string(tmpl))
	cfgPath := filepath.Join(t.TempDir(), "builder-config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(builder, "--config", cfgPath)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if o, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ocb: %v\n%s", err, o)
	}
	if err := os.Rename(work, out); err != nil {
		t.Fatal(err)
	}
	// Builds of older sources are not needed again: keep the cache to one.
	old, _ := filepath.Glob(filepath.Join(cache, "otelcol-pcpu-*"))
	for _, o := range old {
		if o != out {
			os.RemoveAll(o)
		}
	}
	t.Logf("ocb built the collector in %v: %s", time.Since(start).Round(time.Second), bin)
	return bin
}

// TestCollectorEndToEnd: a collector built by ocb with the receiver and
// the otlphttp exporter of the same release reads segments written by the
// C programs and exports them, as OTLP/HTTP JSON, to a receiver in this
// test; every value exported equals the C reader's (pcpustat push --otlp
// and pcpustat --json -p).
// collectorConfig is a collector's configuration: the receivers given (YAML
// under receivers:), one pipeline from the one named to an otlp_http
// exporter sending JSON to exportTo, and no telemetry of its own.
func collectorConfig(receivers, name, exportTo string) string {
	return "receivers:\n" + receivers + fmt.Sprintf(`exporters:
  otlp_http:
    endpoint: %s
    encoding: json
    compression: none
    retry_on_failure:
      enabled: false
service:
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
  pipelines:
    metrics:
      receivers: [%s]
      exporters: [otlp_http]
`, exportTo, name)
}

// runCollector runs the built collector with this configuration until the
// end of the test.
func runCollector(t *testing.T, bin, config string) {
	t.Helper()
	cfgPath := filepath.Join(t.TempDir(), "otelcol.yaml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", "file:"+cfgPath)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	})
}

func TestCollectorEndToEnd(t *testing.T) {
	cfix.Need(t, "tools/pcpustat", "tests/segment/segment_fixture")
	dir, ws := cfix.StartAll(t)
	bin := buildCollector(t)
	srv := otlpcmp.Serve(t)
	runCollector(t, bin, collectorConfig(fmt.Sprintf(`  pcpu:
    directory: %s
    collection_interval: 200ms
    initial_delay: 0s
    per_slot: true
`, dir), "pcpu", srv.URL))
	var md pmetric.Metrics
	select {
	case md = <-srv.Got:
	case <-time.After(120 * time.Second):
		t.Fatal("the collector exported nothing in 120 s")
	}
	otlpcmp.CheckAgainstC(t, md, dir, ws)
}
