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
)

// TestNginxSegment: the receiver reads the statistics of nginx's pcpu
// module (integrations/nginx) -- a tree its master made before
// daemonising, written by every worker. Run by the module's test
// (integrations/nginx/tests/nginx_test.py readers), which starts nginx,
// sends PCPU_NGINX_REQUESTS requests and names the segment's file in
// PCPU_NGINX_SEGMENT; skipped without them.
func TestNginxSegment(t *testing.T) {
	path := os.Getenv("PCPU_NGINX_SEGMENT")
	want, err := strconv.ParseInt(os.Getenv("PCPU_NGINX_REQUESTS"), 10, 64)
	if path == "" || err != nil {
		t.Skip("run by integrations/nginx/tests/nginx_test.py readers")
	}
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.Directory = filepath.Dir(path)
	cfg.CollectionInterval = 100 * time.Millisecond
	cfg.InitialDelay = 0
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
	// The nginx segment's resource (other segments of the directory may
	// be there too): its requests, and an upness of 1.
	var got int64 = -1
	up := -1.0
	rms := sink.AllMetrics()[0].ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		name, _ := rm.Resource().Attributes().Get("pcpu.segment")
		pid, _ := rm.Resource().Attributes().Get("process.pid")
		if "pcpu."+strconv.FormatInt(pid.Int(), 10)+"."+name.Str() != filepath.Base(path) {
			continue
		}
		ms := rm.ScopeMetrics().At(0).Metrics()
		for j := 0; j < ms.Len(); j++ {
			m := ms.At(j)
			switch {
			case m.Name() == "nginx_http_requests" && m.Type() == pmetric.MetricTypeSum:
				got = 0
				for k := 0; k < m.Sum().DataPoints().Len(); k++ {
					got += m.Sum().DataPoints().At(k).IntValue()
				}
			case m.Name() == "pcpu_segment_up":
				up = m.Gauge().DataPoints().At(0).DoubleValue()
				if up == 0 {
					up = float64(m.Gauge().DataPoints().At(0).IntValue())
				}
			case m.Name() == "nginx_http_request_duration_seconds" &&
				m.Type() != pmetric.MetricTypeExponentialHistogram:
				t.Errorf("the request time is %v, not an exponential histogram", m.Type())
			}
		}
	}
	if got != want || up != 1 {
		t.Fatalf("nginx_http_requests = %d (want %d), pcpu_segment_up = %v", got, want, up)
	}
}
