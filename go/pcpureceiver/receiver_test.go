package pcpureceiver

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"pcpu.invalid/go/internal/cfix"
	"pcpu.invalid/go/internal/otlpcmp"
)

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
	dir, ws := cfix.StartAll(t)
	got := collectOnce(t, dir)
	otlpcmp.CheckAgainstC(t, got, dir, ws)
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

// TestOwner: owner names the user whose segment files are read (a member
// of a server's group reads the server's): with our own uid the segments
// are read, with another uid every one is refused (up 0, reason
// "permission") -- root included, which otherwise reads any user's; a
// name that is no user, or a negative uid, is refused by Validate.
func TestOwner(t *testing.T) {
	dir, _ := cfix.StartAll(t)
	up := func(owner string) (read, refused int) {
		c := newCollector(&Config{Directory: dir, Segments: []string{"kinds"}, Owner: owner})
		md, err := c.scrape(context.Background())
		if err != nil {
			t.Fatalf("owner %q: %v", owner, err)
		}
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			ms := md.ResourceMetrics().At(i).ScopeMetrics().At(0).Metrics()
			for k := 0; k < ms.Len(); k++ {
				if ms.At(k).Name() != UpMetric {
					continue
				}
				dp := ms.At(k).Gauge().DataPoints().At(0)
				reason, _ := dp.Attributes().Get("reason")
				if dp.IntValue() == 1 {
					read++
				} else if reason.AsString() == "permission" {
					refused++
				} else {
					t.Errorf("owner %q: up 0, reason %q", owner, reason.AsString())
				}
			}
		}
		return read, refused
	}
	me := strconv.Itoa(os.Geteuid())
	if read, refused := up(me); read != 1 || refused != 0 {
		t.Errorf("owner %s (ours): %d read, %d refused; want 1, 0", me, read, refused)
	}
	other := strconv.Itoa(os.Geteuid() + 1)
	if read, refused := up(other); read != 0 || refused != 1 {
		t.Errorf("owner %s (not ours): %d read, %d refused; want 0, 1", other, read, refused)
	}
	for _, bad := range []string{"no-such-user.pcpu", "-3"} {
		cfg := NewFactory().CreateDefaultConfig().(*Config)
		cfg.Owner = bad
		if cfg.Validate() == nil {
			t.Errorf("owner %q accepted", bad)
		}
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

// TestSegmentsFilter: with segments set, only those names are read (every
// process publishing one), others are not even opened.
func TestSegmentsFilter(t *testing.T) {
	dir, _ := cfix.StartAll(t)
	c := newCollector(&Config{Directory: dir, Segments: []string{"kinds", "dead"}})
	md, err := c.scrape(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		s, _ := md.ResourceMetrics().At(i).Resource().Attributes().Get("pcpu.segment")
		got = append(got, s.AsString())
	}
	if len(got) != 2 || got[0] != "dead" || got[1] != "kinds" {
		t.Errorf("segments read: %v, want [dead kinds]", got)
	}
}

// TestMissingSegment: a configured segment name that no file of the
// directory has is reported, as pcpustat serve reports it: its own
// resource (pcpu.segment, no process.pid) with pcpu_segment_up 0, reason
// "missing" -- once, however often it is configured; the segments that
// exist are read as before.
func TestMissingSegment(t *testing.T) {
	dir, _ := cfix.StartAll(t)
	c := newCollector(&Config{Directory: dir, Segments: []string{"kinds", "nosuch", "nosuch"}})
	md, err := c.scrape(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var missing, kinds int
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		name, _ := rm.Resource().Attributes().Get("pcpu.segment")
		ms := rm.ScopeMetrics().At(0).Metrics()
		var up pmetric.NumberDataPoint
		found := false
		for k := 0; k < ms.Len(); k++ {
			if ms.At(k).Name() == UpMetric {
				up, found = ms.At(k).Gauge().DataPoints().At(0), true
			}
		}
		if !found {
			t.Fatalf("segment %s: no %s", name.AsString(), UpMetric)
		}
		reason, _ := up.Attributes().Get("reason")
		switch name.AsString() {
		case "nosuch":
			missing++
			if _, hasPID := rm.Resource().Attributes().Get("process.pid"); hasPID || up.IntValue() != 0 ||
				reason.AsString() != "missing" {
				t.Errorf("nosuch: pid %v, up %d, reason %q; want no pid, 0, missing", hasPID,
					up.IntValue(), reason.AsString())
			}
		case "kinds":
			kinds++
			if up.IntValue() != 1 {
				t.Errorf("kinds: up %d reason %q", up.IntValue(), reason.AsString())
			}
		default:
			t.Errorf("unexpected segment %s", name.AsString())
		}
	}
	if missing != 1 || kinds != 1 {
		t.Errorf("missing reported %d times, kinds %d times; want 1 and 1", missing, kinds)
	}
}
