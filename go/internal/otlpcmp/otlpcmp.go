// Package otlpcmp compares the receiver's OTLP metrics with what the C
// tools make of the same segments: `pcpustat push --otlp` (the C reader's
// snapshot as OTLP, one resource, series labelled pcpu_segment and
// pcpu_pid) and `pcpustat --json -p` (each slot's part). For the tests
// only.
package otlpcmp

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/big"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"pcpu.invalid/go/internal/cfix"
)

// Server is an OTLP/HTTP metrics endpoint for tests: every request's
// metrics (protobuf or JSON, gzip or not) go to Got.
type Server struct {
	URL string
	Got chan pmetric.Metrics
	srv *http.Server
}

// Serve starts a Server on 127.0.0.1; it stops at the end of the test.
func Serve(t testing.TB) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{URL: "http://" + ln.Addr().String(), Got: make(chan pmetric.Metrics, 1024)}
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			z, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			body = z
		}
		b, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		var md pmetric.Metrics
		if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			md, err = (&pmetric.JSONUnmarshaler{}).UnmarshalMetrics(b)
		} else {
			md, err = (&pmetric.ProtoUnmarshaler{}).UnmarshalMetrics(b)
		}
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		select {
		case s.Got <- md:
		default:
		}
		w.Header().Set("Content-Type", r.Header.Get("Content-Type"))
		if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			w.Write([]byte("{}"))
		}
	})}
	go s.srv.Serve(ln)
	t.Cleanup(func() { s.srv.Close() })
	return s
}

// CPush runs `pcpustat push --otlp` once over the segments of dir and
// returns what it sent.
func CPush(t testing.TB, dir string) pmetric.Metrics {
	t.Helper()
	s := Serve(t)
	cmd := exec.Command(filepath.Join(cfix.BuildDir(), "tools", "pcpustat"), "push", "--otlp", s.URL+"/v1/metrics",
		"--count", "1", "--compression", "none", "-d", dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pcpustat push: %v\n%s", err, out)
	}
	select {
	case md := <-s.Got:
		return md
	case <-time.After(30 * time.Second):
		t.Fatal("pcpustat push sent nothing")
	}
	return pmetric.Metrics{}
}

// Point is one data point, keyed by segment, pid, metric and attributes.
type Point struct {
	Metric pmetric.Metric
	Index  int // data point index in Metric
}

func attrKey(m pcommon.Map, skip map[string]bool) string {
	var kv []string
	m.Range(func(k string, v pcommon.Value) bool {
		if !skip[k] {
			kv = append(kv, k+"="+v.AsString())
		}
		return true
	})
	sort.Strings(kv)
	return strings.Join(kv, ",")
}

var pushLabels = map[string]bool{"pcpu_segment": true, "pcpu_pid": true}

func points(m pmetric.Metric) (int, func(int) pcommon.Map) {
	switch m.Type() {
	case pmetric.MetricTypeSum:
		d := m.Sum().DataPoints()
		return d.Len(), func(i int) pcommon.Map { return d.At(i).Attributes() }
	case pmetric.MetricTypeGauge:
		d := m.Gauge().DataPoints()
		return d.Len(), func(i int) pcommon.Map { return d.At(i).Attributes() }
	case pmetric.MetricTypeHistogram:
		d := m.Histogram().DataPoints()
		return d.Len(), func(i int) pcommon.Map { return d.At(i).Attributes() }
	case pmetric.MetricTypeExponentialHistogram:
		d := m.ExponentialHistogram().DataPoints()
		return d.Len(), func(i int) pcommon.Map { return d.At(i).Attributes() }
	}
	return 0, nil
}

// IndexPush indexes the C push's points: segment/pid/metric/attrs.
func IndexPush(md pmetric.Metrics) map[string]Point {
	out := map[string]Point{}
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		sms := md.ResourceMetrics().At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				n, attrs := points(m)
				for p := 0; p < n; p++ {
					a := attrs(p)
					seg, _ := a.Get("pcpu_segment")
					pid, _ := a.Get("pcpu_pid")
					out[seg.AsString()+"/"+pid.AsString()+"/"+m.Name()+"{"+attrKey(a, pushLabels)+"}"] = Point{m, p}
				}
			}
		}
	}
	return out
}

// IndexReceiver indexes the receiver's points the same way (segment and
// pid from the resource); metrics whose name ends in ".slot" are left out.
func IndexReceiver(md pmetric.Metrics) map[string]Point {
	out := map[string]Point{}
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		seg, _ := rm.Resource().Attributes().Get("pcpu.segment")
		pid, _ := rm.Resource().Attributes().Get("process.pid")
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				if strings.HasSuffix(m.Name(), ".slot") {
					continue
				}
				n, attrs := points(m)
				for p := 0; p < n; p++ {
					out[seg.AsString()+"/"+pid.AsString()+"/"+m.Name()+"{"+attrKey(attrs(p), nil)+"}"] = Point{m, p}
				}
			}
		}
	}
	return out
}

// Compare checks every point of the C push against the receiver's:
// same kind, temporality, monotonicity, unit, description, start time,
// values, counts, sums, bounds and buckets, exactly (doubles bit for
// bit). Returns the number of points compared of each kind (metric
// type, and for numbers int or double).
func Compare(t testing.TB, recv, cpush pmetric.Metrics) map[string]int {
	t.Helper()
	return compareIndexed(t, IndexReceiver(recv), IndexPush(cpush), "receiver", "pcpustat push", true)
}

// ComparePush checks that got (what `pcpustat push` sent, here as a
// collector forwarded it) has exactly want's points (`pcpustat push`'s
// own request, CPush), value for value: a receiver in between changed
// nothing. It returns the number of points compared.
func ComparePush(t testing.TB, got, want pmetric.Metrics) int {
	t.Helper()
	n := 0
	for _, k := range compareIndexed(t, IndexPush(got), IndexPush(want), "forwarded request", "pcpustat push's own", false) {
		n += k
	}
	return n
}

// compareIndexed checks got's points against want's, key by key, both
// ways; with noOmitted, want's pcpu_segments_omitted (which only push
// sends, never the receiver) is left out. It returns the number compared
// by kind.
func compareIndexed(t testing.TB, got, want map[string]Point, gotName, wantName string, noOmitted bool) map[string]int {
	t.Helper()
	n := map[string]int{}
	for k, w := range want {
		if noOmitted && strings.Contains(k, "/pcpu_segments_omitted{") {
			continue
		}
		g, ok := got[k]
		if !ok {
			t.Errorf("%s has no %s", gotName, k)
			continue
		}
		n[kind(w)]++
		if err := comparePoint(g, w); err != nil {
			t.Errorf("%s: %v", k, err)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s has %s, %s does not", gotName, k, wantName)
		}
	}
	return n
}

func kind(p Point) string {
	switch p.Metric.Type() {
	case pmetric.MetricTypeSum:
		return "sum/" + p.Metric.Sum().DataPoints().At(p.Index).ValueType().String()
	case pmetric.MetricTypeGauge:
		return "gauge/" + p.Metric.Gauge().DataPoints().At(p.Index).ValueType().String()
	}
	return p.Metric.Type().String()
}

func comparePoint(g, w Point) error {
	gm, wm := g.Metric, w.Metric
	// pcpu_segment_up's description names its reader (pcpustat or the receiver).
	if gm.Type() != wm.Type() || gm.Unit() != wm.Unit() ||
		gm.Description() != wm.Description() && gm.Name() != "pcpu_segment_up" {
		return fmt.Errorf("metric %v %q %q, C %v %q %q", gm.Type(), gm.Unit(), gm.Description(), wm.Type(), wm.Unit(), wm.Description())
	}
	switch gm.Type() {
	case pmetric.MetricTypeSum:
		gs, ws := gm.Sum(), wm.Sum()
		if gs.IsMonotonic() != ws.IsMonotonic() || gs.AggregationTemporality() != ws.AggregationTemporality() {
			return fmt.Errorf("sum kind differs")
		}
		return compareNumber(gs.DataPoints().At(g.Index), ws.DataPoints().At(w.Index))
	case pmetric.MetricTypeGauge:
		return compareNumber(gm.Gauge().DataPoints().At(g.Index), wm.Gauge().DataPoints().At(w.Index))
	case pmetric.MetricTypeHistogram:
		gp, wp := gm.Histogram().DataPoints().At(g.Index), wm.Histogram().DataPoints().At(w.Index)
		if gm.Histogram().AggregationTemporality() != wm.Histogram().AggregationTemporality() ||
			gp.Count() != wp.Count() || !sameDouble(gp.Sum(), wp.Sum()) || gp.StartTimestamp() != wp.StartTimestamp() ||
			!slices.Equal(gp.BucketCounts().AsRaw(), wp.BucketCounts().AsRaw()) ||
			!slices.Equal(gp.ExplicitBounds().AsRaw(), wp.ExplicitBounds().AsRaw()) {
			return fmt.Errorf("histogram: count %d sum %v start %v buckets %v bounds %v; C %d %v %v %v %v",
				gp.Count(), gp.Sum(), gp.StartTimestamp(), gp.BucketCounts().AsRaw(), gp.ExplicitBounds().AsRaw(),
				wp.Count(), wp.Sum(), wp.StartTimestamp(), wp.BucketCounts().AsRaw(), wp.ExplicitBounds().AsRaw())
		}
	case pmetric.MetricTypeExponentialHistogram:
		gp, wp := gm.ExponentialHistogram().DataPoints().At(g.Index), wm.ExponentialHistogram().DataPoints().At(w.Index)
		if gp.Count() != wp.Count() || !sameDouble(gp.Sum(), wp.Sum()) || gp.Scale() != wp.Scale() ||
			gp.ZeroCount() != wp.ZeroCount() || gp.ZeroThreshold() != wp.ZeroThreshold() ||
			gp.StartTimestamp() != wp.StartTimestamp() ||
			gp.Positive().Offset() != wp.Positive().Offset() ||
			!slices.Equal(gp.Positive().BucketCounts().AsRaw(), wp.Positive().BucketCounts().AsRaw()) ||
			gp.Negative().BucketCounts().Len() != wp.Negative().BucketCounts().Len() {
			return fmt.Errorf("exponential histogram differs: %d %v s%d z%d/%v off %d %v; C %d %v s%d z%d/%v off %d %v",
				gp.Count(), gp.Sum(), gp.Scale(), gp.ZeroCount(), gp.ZeroThreshold(), gp.Positive().Offset(), gp.Positive().BucketCounts().AsRaw(),
				wp.Count(), wp.Sum(), wp.Scale(), wp.ZeroCount(), wp.ZeroThreshold(), wp.Positive().Offset(), wp.Positive().BucketCounts().AsRaw())
		}
	}
	return nil
}

// sameDouble: one value, NaN included (segment format 2.8 carries NaN).
func sameDouble(a, b float64) bool {
	return a == b || math.IsNaN(a) && math.IsNaN(b)
}

func compareNumber(g, w pmetric.NumberDataPoint) error {
	if g.ValueType() != w.ValueType() || g.IntValue() != w.IntValue() || !sameDouble(g.DoubleValue(), w.DoubleValue()) ||
		g.StartTimestamp() != w.StartTimestamp() {
		return fmt.Errorf("value %v %d %v start %v, C %v %d %v start %v", g.ValueType(), g.IntValue(), g.DoubleValue(),
			g.StartTimestamp(), w.ValueType(), w.IntValue(), w.DoubleValue(), w.StartTimestamp())
	}
	return nil
}

// CompareSlots checks the receiver's <name>.slot points of the segment at
// path against `pcpustat --json -p`: every slot that is not zero, with its
// value, and none other. Series are matched by family and labels (the
// C's per_slot list follows its families and series in order), slots by
// pcpustat's names (cpuN, cidN, ownedK). Returns the slots compared.
func CompareSlots(t testing.TB, recv pmetric.Metrics, path, segName string, pid int64) int {
	t.Helper()
	c := cfix.Pcpustat(t, "--json", "-p", path)
	slots, _ := c["per_slot"].([]any)
	nslots, owned := int(mustInt(c["slots"])), int(mustInt(c["owned_slots"]))
	word := c["slot_index"].(string)
	want := map[string]*big.Rat{}
	i := 0
	for _, f := range c["statistics"].(map[string]any)["families"].([]any) {
		fm := f.(map[string]any)
		for _, m := range fm["metrics"].([]any) {
			var kv []string
			for n, v := range m.(map[string]any)["labels"].(map[string]any) {
				if v != "" {
					kv = append(kv, n+"="+v.(string))
				}
			}
			sort.Strings(kv)
			e := slots[i].(map[string]any)
			i++
			for k, v := range e["slots"].([]any) {
				r, _ := new(big.Rat).SetString(string(v.(json.Number)))
				if r.Sign() == 0 {
					continue
				}
				name := fmt.Sprintf("%s%d", word, k)
				if k >= nslots-owned {
					name = fmt.Sprintf("owned%d", k-(nslots-owned))
				}
				want[fmt.Sprintf("%s{%s}@%s", fm["name"], strings.Join(kv, ","), name)] = r
			}
		}
	}
	got := map[string]float64{}
	for i := 0; i < recv.ResourceMetrics().Len(); i++ {
		rm := recv.ResourceMetrics().At(i)
		sv, _ := rm.Resource().Attributes().Get("pcpu.segment")
		pv, _ := rm.Resource().Attributes().Get("process.pid")
		if sv.AsString() != segName || pv.Int() != pid {
			continue
		}
		ms := rm.ScopeMetrics().At(0).Metrics()
		for k := 0; k < ms.Len(); k++ {
			m := ms.At(k)
			if !strings.HasSuffix(m.Name(), ".slot") {
				continue
			}
			for p := 0; p < m.Gauge().DataPoints().Len(); p++ {
				dp := m.Gauge().DataPoints().At(p)
				slot, _ := dp.Attributes().Get("slot")
				key := fmt.Sprintf("%s{%s}@%s", strings.TrimSuffix(m.Name(), ".slot"),
					attrKey(dp.Attributes(), map[string]bool{"slot": true}), slot.AsString())
				v := float64(dp.IntValue())
				if dp.ValueType() == pmetric.NumberDataPointValueTypeDouble {
					v = dp.DoubleValue()
				}
				got[key] = v
			}
		}
	}
	for k, w := range want {
		g, ok := got[k]
		wf, _ := w.Float64()
		if !ok || g != wf {
			t.Errorf("slot %s: receiver %v (%v), C %v", k, g, ok, w.RatString())
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("slot %s: receiver has it, C does not", k)
		}
	}
	return len(want)
}

func mustInt(v any) int64 {
	n, _ := v.(json.Number).Int64()
	return n
}

// CheckAgainstC compares the metrics md of dir's segments with the C tools'.
func CheckAgainstC(t *testing.T, md pmetric.Metrics, dir string, ws []*cfix.Writer) {
	t.Helper()
	n := Compare(t, md, CPush(t, dir))
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
		slots += CompareSlots(t, md, w.Path, parts[2], int64(w.Cmd.Process.Pid))
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
		found = m.Name() == "pcpu_segment_up" && dp.IntValue() == 0 && reason.AsString() == "writer_gone"
	}
	if !found {
		t.Error("no pcpu_segment_up 0, writer_gone for the dead writer")
	}
}
