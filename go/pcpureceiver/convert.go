package pcpureceiver

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"os"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"pcpu.invalid/go/segment"
)

// ScopeName is the instrumentation scope of every metric the receiver makes.
const ScopeName = "pcpu.invalid/go/pcpureceiver"

// UpMetric is the per-segment liveness gauge, as pcpustat serve names it:
// 1 if the segment was read, else 0 with attribute reason (missing,
// permission, incompatible, corrupt, writer_gone, not_ready, too_large,
// error).
const UpMetric = "pcpu_segment_up"

// collector reads the configured segments at each collection.
type collector struct {
	cfg      *Config
	names    map[string]bool
	now      func() time.Time
	owner    int   // whose files: Config.Owner's uid, else ours (-1: any, as root)
	ownerErr error // Config.Owner not a user (Validate says so first)
}

func newCollector(cfg *Config) *collector {
	c := &collector{cfg: cfg, now: time.Now}
	c.owner, c.ownerErr = cfg.ownerUID()
	if c.owner < 0 {
		// As pcpustat's default: our own user's files, any user's as root.
		if c.owner = os.Geteuid(); c.owner == 0 {
			c.owner = -1
		}
	}
	if len(cfg.Segments) > 0 {
		c.names = map[string]bool{}
		for _, n := range cfg.Segments {
			c.names[n] = true
		}
	}
	return c
}

// scrape reads every segment of the directory into one pmetric.Metrics:
// a ResourceMetrics per segment (attributes pcpu.segment, process.pid),
// with its families and its pcpu_segment_up. A segment that cannot be
// read is reported by its up 0 and reason, never fails the collection;
// only a directory that cannot be listed does. A configured segment name
// that no file of the directory has is reported as pcpustat serve reports
// a named segment it cannot find: a ResourceMetrics with pcpu.segment (no
// process.pid) whose pcpu_segment_up is 0 with reason "missing" -- a
// misspelt name or an application that is not running is said, not
// silently collected as nothing.
func (c *collector) scrape(ctx context.Context) (pmetric.Metrics, error) {
	if c.ownerErr != nil {
		return pmetric.NewMetrics(), c.ownerErr
	}
	md := pmetric.NewMetrics()
	files, err := segment.List(c.cfg.Directory)
	if err != nil {
		return md, err
	}
	now := pcommon.NewTimestampFromTime(c.now())
	found := map[string]bool{}
	for _, f := range files {
		if ctx.Err() != nil {
			return md, ctx.Err()
		}
		if c.names != nil && !c.names[f.Name] {
			continue
		}
		found[f.Name] = true
		rm := md.ResourceMetrics().AppendEmpty()
		res := rm.Resource().Attributes()
		res.PutStr("pcpu.segment", f.Name)
		res.PutInt("process.pid", int64(f.PID))
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName(ScopeName)
		snap, err := c.read(f.Path)
		if err == nil && (snap.Name != f.Name || snap.PID != f.PID) {
			err = fmt.Errorf("%w: %s holds segment %s of pid %d", segment.ErrCorrupt, f.Path, snap.Name, snap.PID)
		}
		addUp(sm.Metrics(), now, err)
		if err != nil {
			continue
		}
		Convert(sm.Metrics(), snap, now, c.cfg.PerSlot)
	}
	for _, name := range c.cfg.Segments {
		if found[name] {
			continue
		}
		found[name] = true // a name configured twice is reported once
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("pcpu.segment", name)
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName(ScopeName)
		addUp(sm.Metrics(), now, fmt.Errorf("%w: no segment named %q in %s", segment.ErrMissing, name,
			c.cfg.Directory))
	}
	return md, nil
}

// read snapshots one segment. As pcpustat's default, a collector that
// does not run as root reads only its own user's segment files; root reads
// any user's (each file must still belong to the uid its header names);
// with owner set, that user's (pcpustat -u).
func (c *collector) read(path string) (*segment.Snapshot, error) {
	r, err := segment.OpenOwned(path, c.owner)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	r.MaxBytes = c.cfg.MaxBytes
	return r.Snapshot(c.cfg.PerSlot)
}

func addUp(ms pmetric.MetricSlice, now pcommon.Timestamp, err error) {
	m := ms.AppendEmpty()
	m.SetName(UpMetric)
	m.SetDescription("1 if the receiver read the segment, else 0 and the reason.")
	dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(now)
	if err != nil {
		dp.SetIntValue(0)
		dp.Attributes().PutStr("reason", segment.Reason(err))
	} else {
		dp.SetIntValue(1)
	}
}

// otlpUnit maps the OpenMetrics units pcpu families use to UCUM (as
// pcpustat push --otlp does).
func otlpUnit(u string) string {
	switch u {
	case "seconds":
		return "s"
	case "milliseconds":
		return "ms"
	case "microseconds":
		return "us"
	case "nanoseconds":
		return "ns"
	case "bytes":
		return "By"
	case "ratio":
		return "1"
	case "celsius":
		return "Cel"
	case "hertz":
		return "Hz"
	case "volts":
		return "V"
	case "amperes":
		return "A"
	case "joules":
		return "J"
	case "grams":
		return "g"
	case "meters":
		return "m"
	}
	return u
}

var pow10 = func() (p [23]float64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10 // exact up to 10^22
	}
	return
}()

// Scaled is v * 10^scale as the double nearest the exact value: one
// correctly rounded division or multiplication when v is exact in a
// double, else exact arithmetic.
func Scaled(v int64, scale int8) float64 {
	if v > -1<<53 && v < 1<<53 {
		if scale < 0 {
			return float64(v) / pow10[-scale]
		}
		return float64(v) * pow10[scale]
	}
	return ratScaled(new(big.Rat).SetInt64(v), scale)
}

func scaledU(v uint64, scale int8) float64 {
	if v < 1<<53 {
		return Scaled(int64(v), scale)
	}
	return ratScaled(new(big.Rat).SetInt(new(big.Int).SetUint64(v)), scale)
}

func ratScaled(r *big.Rat, scale int8) float64 {
	p := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(math.Abs(float64(scale)))), nil))
	if scale < 0 {
		r.Quo(r, p)
	} else {
		r.Mul(r, p)
	}
	f, _ := r.Float64()
	return f
}

// nanosValue is whole + nanos * 10^-9, the double nearest the exact sum.
func nanosValue(whole *big.Int, nanos int64) float64 {
	r := new(big.Rat).SetInt(whole)
	r.Add(r, big.NewRat(nanos, 1e9))
	f, _ := r.Float64()
	return f
}

// numberValue sets a counter's or gauge's value: integers as integers
// (exact), a scale or a fraction as the double nearest the exposed value.
func numberValue(dp pmetric.NumberDataPoint, f *segment.Family, s *segment.Series) {
	switch {
	case f.Nanos && s.Residue != 0 || f.Nanos && math.Signbit(s.Residue):
		// 2.8: beyond the words (+-Inf, NaN, 1e300, 1e-12...): the C
		// library's double, bit for bit.
		dp.SetDoubleValue(s.Float(f))
	case f.Nanos:
		w := new(big.Int)
		if f.Type == segment.Counter {
			w.SetUint64(s.Value)
		} else {
			w.SetInt64(int64(s.Value))
		}
		dp.SetDoubleValue(nanosValue(w, s.Nanos))
	case f.Type == segment.Gauge && f.Scale == 0:
		dp.SetIntValue(int64(s.Value))
	case f.Type == segment.Gauge:
		dp.SetDoubleValue(Scaled(int64(s.Value), f.Scale))
	case f.Scale == 0 && s.Value <= math.MaxInt64:
		dp.SetIntValue(int64(s.Value))
	default:
		dp.SetDoubleValue(scaledU(s.Value, f.Scale))
	}
}

func putLabels(attrs pcommon.Map, f *segment.Family, s *segment.Series) {
	attrs.EnsureCapacity(len(f.LabelNames) + 1)
	for l, n := range f.LabelNames {
		if s.LabelValues[l] != "" { // an empty label is no label (Prometheus, OTLP push)
			attrs.PutStr(n, s.LabelValues[l])
		}
	}
}

// NativeBound is base^i in exposed units, base = 2^(2^-schema).
func NativeBound(schema int, i int32) float64 {
	return math.Exp2(math.Ldexp(float64(i), -schema))
}

// Convert appends the OTLP form of every family of snap to ms, at time
// now (start time: the segment's publication): counters as cumulative
// monotonic sums (named without _total), gauges, classic histograms with
// the exposed `le` buckets, exponential histograms (pcpu's native index
// i is OTLP's i - 1), and with perSlot each series' slot parts as
// <name>.slot gauges. Several label sets of one name (segment format 2.8)
// are one metric, their points together. Cost: linear in the series and
// buckets.
func Convert(ms pmetric.MetricSlice, snap *segment.Snapshot, now pcommon.Timestamp, perSlot bool) {
	start := pcommon.Timestamp(snap.CreatedNs)
	ms.EnsureCapacity(ms.Len() + len(snap.Families))
	for i := 0; i < len(snap.Families); {
		j := i + 1
		for j < len(snap.Families) && snap.Families[j].Name == snap.Families[i].Name {
			j++
		}
		f := &snap.Families[i]
		m := ms.AppendEmpty()
		m.SetName(f.Name)
		m.SetDescription(f.Help)
		m.SetUnit(otlpUnit(f.Unit))
		switch {
		case f.Type == segment.Counter:
			sum := m.SetEmptySum()
			sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
			sum.SetIsMonotonic(true)
		case f.Type == segment.Gauge:
			m.SetEmptyGauge()
		case f.Scheme == segment.SchemeExponential:
			m.SetEmptyExponentialHistogram().SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		default:
			m.SetEmptyHistogram().SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		}
		for k := i; k < j; k++ {
			appendPoints(m, &snap.Families[k], start, now)
		}
		if perSlot {
			slotMetric(ms, snap.Families[i:j], snap, now)
		}
		i = j
	}
}

// appendPoints appends family f's series to m, a metric of f's kind.
func appendPoints(m pmetric.Metric, f *segment.Family, start, now pcommon.Timestamp) {
	switch {
	case f.Type == segment.Counter:
		dps := m.Sum().DataPoints()
		dps.EnsureCapacity(dps.Len() + len(f.Series))
		for k := range f.Series {
			dp := dps.AppendEmpty()
			putLabels(dp.Attributes(), f, &f.Series[k])
			dp.SetStartTimestamp(start)
			dp.SetTimestamp(now)
			numberValue(dp, f, &f.Series[k])
		}
	case f.Type == segment.Gauge:
		dps := m.Gauge().DataPoints()
		dps.EnsureCapacity(dps.Len() + len(f.Series))
		for k := range f.Series {
			dp := dps.AppendEmpty()
			putLabels(dp.Attributes(), f, &f.Series[k])
			dp.SetTimestamp(now)
			numberValue(dp, f, &f.Series[k])
		}
	case f.Scheme == segment.SchemeExponential:
		dps := m.ExponentialHistogram().DataPoints()
		dps.EnsureCapacity(dps.Len() + len(f.Series))
		for k := range f.Series {
			expoPoint(dps.AppendEmpty(), f, &f.Series[k], start, now)
		}
	default:
		exp := f.ExposedBuckets()
		bounds := make([]float64, len(exp)-1)
		for j, b := range exp[:len(exp)-1] {
			// As the C library writes a bound (pcpu_stats_scale() of
			// the int64 as a double): beyond 2^53 units that is not
			// the exact value's nearest double, but it is every
			// writer's, pcpustat push's included.
			bounds[j] = (&segment.Series{Sum: f.Upper[b]}).SumFloat(f)
		}
		dps := m.Histogram().DataPoints()
		dps.EnsureCapacity(dps.Len() + len(f.Series))
		for k := range f.Series {
			s := &f.Series[k]
			dp := dps.AppendEmpty()
			putLabels(dp.Attributes(), f, s)
			dp.SetStartTimestamp(start)
			dp.SetTimestamp(now)
			// Buckets between two exposed bounds fold into the next.
			counts := make([]uint64, len(exp))
			b := 0
			var total uint64
			for j, x := range exp {
				for ; b <= x; b++ {
					counts[j] += s.Counts[b]
				}
				total += counts[j]
			}
			dp.SetCount(total)
			dp.SetSum(histSum(f, s))
			dp.BucketCounts().FromRaw(counts)
			dp.ExplicitBounds().FromRaw(bounds)
		}
	}
}

// histSum is a histogram's exposed sum, its residue (2.8) included.
func histSum(f *segment.Family, s *segment.Series) float64 {
	if s.Residue != 0 {
		return s.SumFloat(f)
	}
	return Scaled(s.Sum, f.Scale)
}

func expoPoint(dp pmetric.ExponentialHistogramDataPoint, f *segment.Family, s *segment.Series, start, now pcommon.Timestamp) {
	putLabels(dp.Attributes(), f, s)
	dp.SetStartTimestamp(start)
	dp.SetTimestamp(now)
	c := s.Counts
	lo, hi := 1, len(c)-1 // the positive buckets sent: [lo, hi); the last (+Inf) is empty
	for lo < hi && c[lo] == 0 {
		lo++
	}
	for hi > lo && c[hi-1] == 0 {
		hi--
	}
	if lo < hi {
		dp.Positive().SetOffset(f.NativeIndex + int32(lo-1) - 1)
		dp.Positive().BucketCounts().FromRaw(c[lo:hi])
	}
	dp.SetCount(s.Count())
	dp.SetSum(histSum(f, s))
	dp.SetScale(int32(f.Schema))
	dp.SetZeroCount(c[0])
	dp.SetZeroThreshold(NativeBound(f.Schema, f.NativeIndex-1))
}

// SlotName labels slot k as pcpustat -p does: cpuN or cidN for CPU
// slots (by the segment's slot index), ownedK for owned slots.
func SlotName(snap *segment.Snapshot, k int) string {
	cpus := int(snap.NSlots - snap.OwnedSlots)
	if k >= cpus {
		return "owned" + strconv.Itoa(k-cpus)
	}
	if snap.SlotIndex == 1 {
		return "cpu" + strconv.Itoa(k)
	}
	return "cid" + strconv.Itoa(k)
}

// slotMetric: <name>.slot, a gauge of each slot's part of every series
// of a name's families (a histogram's: its observations), the slots that
// are not zero; group members have no per-slot split and are left out.
func slotMetric(ms pmetric.MetricSlice, fams []segment.Family, snap *segment.Snapshot, now pcommon.Timestamp) {
	f0 := &fams[0]
	m := ms.AppendEmpty()
	m.SetName(f0.Name + ".slot")
	m.SetDescription("Each slot's part of " + f0.Name + " (pcpustat -p): slot cpuN, cidN or ownedK.")
	if f0.Type != segment.Histogram {
		m.SetUnit(otlpUnit(f0.Unit))
	}
	dps := m.SetEmptyGauge().DataPoints()
	for i := range fams {
		f := &fams[i]
		for k := range f.Series {
			s := &f.Series[k]
			for slot, v := range s.Slots {
				if v == 0 {
					continue
				}
				dp := dps.AppendEmpty()
				putLabels(dp.Attributes(), f, s)
				dp.Attributes().PutStr("slot", SlotName(snap, slot))
				if f.Type == segment.Histogram || f.Scale == 0 {
					dp.SetIntValue(int64(v))
				} else {
					dp.SetDoubleValue(Scaled(int64(v), f.Scale))
				}
				dp.SetTimestamp(now)
			}
		}
	}
}
