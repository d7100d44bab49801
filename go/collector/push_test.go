package collector

// `pcpustat push` into a real OpenTelemetry Collector (issue 42): the
// collector ocb builds here also has the core otlp receiver, on gRPC and
// HTTP; what it forwards (otlp_http, JSON, to a server in the test) must be
// exactly what `pcpustat push` itself sends, point for point, over either
// protocol, gzip or not; and with --temporality delta the forwarded deltas
// add up to exactly the writer's increase, each point starting where the
// one before ended.

import (
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"pcpu.invalid/go/internal/cfix"
	"pcpu.invalid/go/internal/otlpcmp"
)

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startCollector runs the built collector with an otlp receiver on the two
// ports and an otlp_http exporter to srv; it returns once both listen.
func startCollector(t *testing.T, bin, exportTo string, grpcPort, httpPort int) {
	runCollector(t, bin, collectorConfig(fmt.Sprintf(`  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:%d
      http:
        endpoint: 127.0.0.1:%d
`, grpcPort, httpPort), "otlp", exportTo))
	deadline := time.Now().Add(120 * time.Second) // a bound for a hang only
	for _, port := range []int{grpcPort, httpPort} {
		for {
			c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the collector does not listen on %d", port)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func push(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(cfix.BuildDir(), "tools", "pcpustat"),
		append([]string{"push", "--count", "1", "-d", dir}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pcpustat push %v: %v\n%s", args, err, out)
	}
}

func forwarded(t *testing.T, srv *otlpcmp.Server) pmetric.Metrics {
	t.Helper()
	select {
	case md := <-srv.Got:
		return md
	case <-time.After(60 * time.Second): // a bound for a hang only
		t.Fatal("the collector forwarded nothing in 60 s")
	}
	return pmetric.Metrics{}
}

func TestPushThroughCollector(t *testing.T) {
	cfix.Need(t, "tools/pcpustat", "tests/segment/segment_fixture", "tests/push/push_fixture")
	dir, _ := cfix.StartAll(t)
	bin := buildCollector(t)
	srv := otlpcmp.Serve(t)
	grpcPort, httpPort := freePort(t), freePort(t)
	startCollector(t, bin, srv.URL, grpcPort, httpPort)
	want := otlpcmp.CPush(t, dir)

	for _, via := range [][]string{
		{"--otlp-grpc", fmt.Sprintf("http://127.0.0.1:%d", grpcPort)},
		{"--otlp-grpc", fmt.Sprintf("http://127.0.0.1:%d", grpcPort), "--compression", "gzip"},
		{"--otlp", fmt.Sprintf("http://127.0.0.1:%d/v1/metrics", httpPort), "--compression", "gzip"},
	} {
		push(t, dir, via...)
		n := otlpcmp.ComparePush(t, forwarded(t, srv), want)
		t.Logf("%v: %d points forwarded exactly", via, n)
	}

	// Delta through the collector: three agents in turn, the baseline
	// carried in a state file; the writer counts between them.
	ddir := t.TempDir()
	w := cfix.Start(t, []string{"PCPU_SEGMENT_DIR=" + ddir}, filepath.Join(cfix.BuildDir(), "tests", "push", "push_fixture"),
		"deltafix")
	add := func(n int) {
		fmt.Fprintf(w.In, "add %d\n", n)
		if !w.Lines.Scan() || w.Lines.Text() != "ok" {
			t.Fatalf("push_fixture: add %d not acknowledged", n)
		}
	}
	state := filepath.Join(t.TempDir(), "delta.state")
	grpcURL := fmt.Sprintf("http://127.0.0.1:%d", grpcPort)
	add(100)
	push(t, ddir, "--otlp-grpc", grpcURL, "--temporality", "delta", "--delta-state", state)
	forwarded(t, srv) // the first collection: the baseline, no counter point
	var sum int64
	var lastEnd uint64
	for i, n := range []int{23, 7, 1000} {
		add(n)
		push(t, ddir, "--otlp-grpc", grpcURL, "--temporality", "delta", "--delta-state", state)
		md := forwarded(t, srv)
		found := false
		for k, p := range otlpcmp.IndexPush(md) {
			if p.Metric.Name() != "push_requests" {
				continue
			}
			s := p.Metric.Sum()
			if s.AggregationTemporality() != pmetric.AggregationTemporalityDelta || !s.IsMonotonic() {
				t.Fatalf("%s: temporality %v, monotonic %v", k, s.AggregationTemporality(), s.IsMonotonic())
			}
			dp := s.DataPoints().At(p.Index)
			if m, _ := dp.Attributes().Get("method"); m.AsString() != "GET" {
				continue
			}
			if i > 0 && uint64(dp.StartTimestamp()) != lastEnd {
				t.Errorf("push %d: starts at %v, the point before ended at %v", i+2, dp.StartTimestamp(), lastEnd)
			}
			lastEnd = uint64(dp.Timestamp())
			if dp.IntValue() != int64(n) {
				t.Errorf("push %d: delta %d, the writer added %d", i+2, dp.IntValue(), n)
			}
			sum += dp.IntValue()
			found = true
		}
		if !found {
			t.Fatalf("push %d: no push_requests{method=GET} point forwarded", i+2)
		}
	}
	if sum != 23+7+1000 {
		t.Errorf("forwarded deltas add up to %d, the writer added %d", sum, 23+7+1000)
	}
	t.Logf("delta through the collector: 3 points, %d in all, each starting where the one before ended", sum)
}
