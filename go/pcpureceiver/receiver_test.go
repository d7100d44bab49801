package pcpureceiver

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"pcpu.invalid/go/internal/cfix"
	"pcpu.invalid/go/internal/otlpcmp"
)

// Writers starts the C writers of every kind in a fresh directory:
// segment_fixture golden and owned, segwriter kinds and tree, and a
// writer that died (its segment left behind).
func Writers(t *testing.T) (string, []*cfix.Writer) {
	t.Helper()
	cfix.Need(t, "tools/pcpustat", "tests/segment/segment_fixture")
	writer := cfix.SegWriter(t)
	fixture := filepath.Join(cfix.BuildDir(), "tests", "segment", "segment_fixture")
	dir := t.TempDir()
	env := []string{"PCPU_SEGMENT_DIR=" + dir}
	ws := []*cfix.Writer{
		cfix.Start(t, env, fixture, "golden", "golden"),
		cfix.Start(t, append(env, "PCPU_OWNED_SLOTS=2"), fixture, "owned", "owned"),
		cfix.Start(t, env, writer, "kinds", "kinds"),
		cfix.Start(t, append(env, "PCPU_INDEX=cpu"), writer, "tree", "tree", "3"),
	}
	dead := cfix.Start(t, env, fixture, "die", "dead")
	dead.Stop()
	return dir, ws
}

// collectOnce runs the receiver (its factory, as a collector would) until
// it has delivered one collection.
func collectOnce(t *testing.T, dir string) pmetric.Metrics {
	t.Helper()
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.Directory = dir
	cfg.PerSlot = true
	cfg.CollectionInterval = 100 * time.Millisecond
	cfg.InitialDelay = 0
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	sink := new(consumertest.MetricsSink)
	r, err := f.CreateMetrics(context.Background(), receivertest.NewNopSettings(Type), cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown(context.Background())
	deadline := time.Now().Add(30 * time.Second)
	for len(sink.AllMetrics()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no collection in 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return sink.AllMetrics()[0]
}

// TestReceiverMatchesC: the receiver's metrics of segments of every kind
// equal, point for point, what pcpustat push --otlp makes of them with
// the C reader, and its per-slot gauges what pcpustat --json -p shows.
func TestReceiverMatchesC(t *testing.T) {
	dir, ws := Writers(t)
	got := collectOnce(t, dir)
	CheckAgainstC(t, got, dir, ws)
}

// CheckAgainstC compares the metrics md of dir's segments with the C tools'.
func CheckAgainstC(t *testing.T, md pmetric.Metrics, dir string, ws []*cfix.Writer) {
	t.Helper()
	n := otlpcmp.Compare(t, md, otlpcmp.CPush(t, dir))
	for _, k := range []string{"sum/Int", "sum/Double", "gauge/Int", "gauge/Double", "Histogram", "ExponentialHistogram"} {
		if n[k] == 0 {
			t.Errorf("no %s point compared (%v)", k, n)
		}
	}
	t.Logf("points compared: %v", n)
	slots := 0
	for _, w := range ws {
		base := filepath.Base(w.Path) // pcpu.<pid>.<name>
		parts := strings.SplitN(base, ".", 3)
		slots += otlpcmp.CompareSlots(t, md, w.Path, parts[2], int64(w.Cmd.Process.Pid))
	}
	if slots < 10 {
		t.Errorf("only %d slot values compared", slots)
	}
	// The dead writer's segment: up 0, writer_gone.
	found := false
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		if s, _ := rm.Resource().Attributes().Get("pcpu.segment"); s.AsString() != "dead" {
			continue
		}
		m := rm.ScopeMetrics().At(0).Metrics().At(0)
		dp := m.Gauge().DataPoints().At(0)
		reason, _ := dp.Attributes().Get("reason")
		found = m.Name() == UpMetric && dp.IntValue() == 0 && reason.AsString() == "writer_gone"
	}
	if !found {
		t.Error("no pcpu_segment_up 0, writer_gone for the dead writer")
	}
}

// TestConfig: defaults and validation.
func TestConfig(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	if cfg.Directory == "" || cfg.CollectionInterval != time.Minute || cfg.PerSlot {
		t.Errorf("defaults: %+v", cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Error(err)
	}
	cfg.Segments = []string{"ok", "../etc"}
	if err := cfg.Validate(); err == nil {
		t.Error("a path as a segment name was accepted")
	}
	cfg.Segments = nil
	cfg.CollectionInterval = 0
	if cfg.Validate() == nil {
		t.Error("interval 0 accepted")
	}
}

// TestMissingDirectory: a directory that cannot be listed fails the
// collection (the scraper helper logs it); nothing is made up.
func TestMissingDirectory(t *testing.T) {
	c := newCollector(&Config{Directory: filepath.Join(t.TempDir(), "none")})
	if _, err := c.scrape(context.Background()); err == nil || !os.IsNotExist(unwrapAll(err)) {
		t.Errorf("missing directory: %v", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok || u.Unwrap() == nil {
			return err
		}
		err = u.Unwrap()
	}
}
