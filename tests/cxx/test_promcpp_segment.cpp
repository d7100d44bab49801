// SPDX-License-Identifier: MIT
// One stack: a program written against prometheus-cpp's API (the layer)
// publishes its Registry as a pcpu segment, and pcpustat -- another
// process, reading the segment file -- prints the exact values the
// program set. Also checks what the layer documents about it: counters get
// `_total`, values are published whole (whole units, billionths and a
// residue: Increment(0.25), Set(-17.75), Set(16e9), Set(1e-12),
// Increment(1e300), +-Inf and NaN read in the segment as Value() and
// Collect() give them), a later Add() with other label names is another
// label set of the name in pcpu's registry and segment, a histogram's sum
// beyond its integer words is in them too, histogram bounds in decimal
// fractions become a pcpu scale.
//
// With PYTHON (and PYTHONPATH, PCPU_LIBRARY set for python/src/pcpu), the
// Python reader reads the same values.
//
// Usage: test_promcpp_segment PCPUSTAT [PYTHON]
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/info.h>
#include <prometheus/check_names.h>
#include <prometheus/pcpu.h>
#include <prometheus/registry.h>
#include <prometheus/summary.h>
#include <prometheus/text_serializer.h>

#include <pcpu/segment.h>
#include <pcpu/stats.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include <stdlib.h>
#include <unistd.h>

#define CHECK(cond)                                                                  \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      std::fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

using namespace prometheus;

// Runs `cmd`, returns its stdout with runs of blanks squeezed to one.
static std::string Run(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  CHECK(p);
  std::string out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  CHECK(pclose(p) == 0);
  std::string squeezed;
  for (char c : out) {
    if (c == ' ' && !squeezed.empty() && squeezed.back() == ' ') continue;
    squeezed += c;
  }
  return squeezed;
}

static bool Contains(const std::string& hay, const std::string& needle) {
  if (hay.find(needle) != std::string::npos) return true;
  std::fprintf(stderr, "missing: [%s]\n", needle.c_str());
  return false;
}

int main(int argc, char** argv) {
  CHECK(argc == 2 || argc == 3);
  const std::string pcpustat = argv[1];
  char dir[] = "/tmp/pcpu-promcpp-seg.XXXXXX";
  CHECK(mkdtemp(dir));
  CHECK(setenv("PCPU_SEGMENT_DIR", dir, 1) == 0);

  Registry reg;
  pcpu_registry_t* c = PcpuRegistry(reg);
  CHECK(c);
  pcpu_segment_t* seg = pcpu_segment_publish(c, "promcpp", nullptr);
  CHECK(seg);

  auto& requests = BuildCounter().Name("app_requests_total").Help("Requests.").Register(reg);
  requests.Add({{"method", "GET"}, {"code", "200"}}).Increment(1234);
  requests.Add({{"method", "POST"}, {"code", "500"}}).Increment(7);
  // Other label names than the first Add's: another label set of the
  // name, in Collect() and in pcpu's registry and segment alike.
  requests.Add({{"path", "/"}}).Increment(5);

  auto& bytes = BuildCounter().Name("app_bytes").Register(reg);  // pcpu adds _total
  Counter& b = bytes.Add({});
  for (int i = 0; i < 1000; i++) b.Increment();
  b.Increment(0.25);  // the segment shows 1000.25
  // Fractions that sum past a unit: the billionths word folds into units.
  Counter& tenths = bytes.Add({});  // the same series
  CHECK(&tenths == &b);
  auto& cpu = BuildCounter().Name("app_cpu_seconds_total").Register(reg);
  Counter& cs = cpu.Add({});
  for (int i = 0; i < 30; i++) cs.Increment(0.1);  // 3.0 in billionths
  cs.Increment(1e-12);  // below a billionth: the residue keeps it

  auto& depth = BuildGauge().Name("app_queue_depth").Register(reg);
  Gauge& d = depth.Add({{"queue", "in"}});
  d.Set(40);
  d.Increment();
  d.Increment();
  Gauge& neg = depth.Add({{"queue", "out"}});
  neg.Set(-17.75);  // the fast path: three stores, the fraction too
  Gauge& ratio = depth.Add({{"queue", "ratio"}});
  ratio.Set(0.75);
  ratio.Set(0.1 + 1e-12);  // exact, in-process and in the segment
  Gauge& back = depth.Add({{"queue", "back"}});
  back.Set(0.5);
  back.Set(2);  // the billionths back to 0

  auto& lat = BuildHistogram().Name("app_latency_seconds").Register(reg);
  Histogram& h = lat.Add({}, Histogram::BucketBoundaries{0.001, 0.01, 0.1, 1});
  for (int i = 0; i < 90; i++) h.Observe(0.0005);
  for (int i = 0; i < 9; i++) h.Observe(0.005);
  h.Observe(2.5);

  auto& sizes = BuildHistogram().Name("app_size_bytes").Register(reg);
  sizes.Add({}, Histogram::BucketBoundaries{100, 1000}).Observe(500);
  // Beyond the integer sums: 5e22 bytes is 5e22 units (scale 0), past
  // 4e18: the double sum of the words, in the segment too (5e22 + 1e21
  // is 5.099999999999999e+22 in doubles, as in prometheus-cpp).
  Histogram& huge = sizes.Add({{"kind", "huge"}}, Histogram::BucketBoundaries{100, 1000});
  huge.Observe(5e22);
  huge.ObserveMultiple({0, 0, 2}, 1e21);

  // Values beyond the words: a gauge set or added past 2^62, below a
  // billionth, infinite, NaN; Value() and every reader agree.
  auto& mem = BuildGauge().Name("app_mem_bytes").Register(reg);
  mem.Add({{"k", "big"}}).Set(16e9);
  mem.Add({{"k", "tiny"}}).Set(1e-12);
  Gauge& grow = mem.Add({{"k", "huge"}});
  grow.Increment(1e300);
  grow.Increment(1);
  mem.Add({{"k", "inf"}}).Set(INFINITY);
  mem.Add({{"k", "nan"}}).Set(NAN);
  Gauge& adds = mem.Add({{"k", "adds"}});
  adds.Set(3);
  adds.Increment(0.5);
  adds.Increment(1e-12);
  adds.Set(-4e20);
  adds.Increment(0.25);
  // A summary has no pcpu type: in Collect() only.
  BuildSummary().Name("app_summary").Register(reg).Add({}, Summary::Quantiles{{0.5, 0.05}}).Observe(1);

  // A gauge only Set() (the fast path), then incremented (pcpu's words
  // from then on), then Set() again.
  Gauge& g = depth.Add({{"queue", "x"}});
  g.Set(2.5);
  CHECK(g.Value() == 2.5);
  g.Increment();
  CHECK(g.Value() == 3.5);
  g.Decrement(0.25);
  CHECK(g.Value() == 3.25);
  g.Set(-0.0);
  CHECK(g.Value() == 0.0 && std::signbit(g.Value()));
  g.Set(7.75);
  g.Increment(2);
  CHECK(g.Value() == 9.75);

  // prometheus-cpp 1.1: info metrics, resets, label names by type.
  auto& build = BuildInfo().Name("app_build").Help("Build.").Labels({{"team", "core"}}).Register(reg);
  build.Add({{"version", "1.2"}});
  Counter& resettable = BuildCounter().Name("app_resets").Register(reg).Add({});
  resettable.Increment(5);
  resettable.Reset();
  resettable.Increment(2);
  CHECK(resettable.Value() == 2);
  Histogram& hr = lat.Add({{"kind", "reset"}}, Histogram::BucketBoundaries{1});
  hr.Observe(0.5);
  hr.Reset();
  CHECK(hr.Collect().histogram.sample_count == 0 && hr.Collect().histogram.sample_sum == 0.0);
  CHECK(!CheckLabelName("le", MetricType::Histogram) && CheckLabelName("le", MetricType::Counter));
  CHECK(!CheckLabelName("quantile", MetricType::Summary));
  {
    Histogram moved(Histogram::BucketBoundaries{1, 2});
    moved.Observe(1.5);
    CHECK(moved.Collect().histogram.bucket[1].cumulative_count == 1);
  }

  // In-process: prometheus-cpp's values, fractions included.
  CHECK(b.Value() == 1000.25);
  CHECK(d.Value() == 42);
  CHECK(neg.Value() == -17.75);
  CHECK(ratio.Value() == 0.1 + 1e-12);
  CHECK(cs.Value() == 3.0 + 1e-12);
  CHECK(mem.Add({{"k", "big"}}).Value() == 16e9);
  CHECK(mem.Add({{"k", "tiny"}}).Value() == 1e-12);
  CHECK(grow.Value() == 1e300);
  CHECK(std::isinf(mem.Add({{"k", "inf"}}).Value()));
  CHECK(std::isnan(mem.Add({{"k", "nan"}}).Value()));
  CHECK(adds.Value() == -4e20 + 0.25);
  CHECK(huge.Collect().histogram.sample_sum == 5e22 + 1e21);
  std::string text = TextSerializer().Serialize(reg.Collect());
  CHECK(Contains(text, "app_requests_total{path=\"/\"} 5\n"));
  CHECK(Contains(text, "app_bytes 1000.25\n"));
  CHECK(Contains(text, "app_summary_count 1\n"));
  CHECK(Contains(text, "# TYPE app_build gauge\napp_build_info{team=\"core\",version=\"1.2\"} 1\n"));

  // pcpu's own exposition of the same registry.
  char* out = nullptr;
  std::size_t len = 0;
  CHECK(pcpu_registry_write(c, PCPU_FORMAT_PROMETHEUS, &out, &len) == 0);
  std::string ptext(out, len);
  std::free(out);
  CHECK(Contains(ptext, "app_requests_total{code=\"200\",method=\"GET\"} 1234\n"));
  CHECK(Contains(ptext, "app_bytes_total 1000.25\n"));
  CHECK(Contains(ptext, "app_cpu_seconds_total 3.000000000001\n"));
  CHECK(Contains(ptext, "app_queue_depth{queue=\"out\"} -17.75\n"));
  CHECK(Contains(ptext, "app_queue_depth{queue=\"ratio\"} 0.10000000000100001\n"));
  CHECK(Contains(ptext, "app_mem_bytes{k=\"big\"} 16000000000\n"));
  CHECK(Contains(ptext, "app_mem_bytes{k=\"tiny\"} 1e-12\n"));
  CHECK(Contains(ptext, "app_mem_bytes{k=\"huge\"} 1e+300\n"));
  CHECK(Contains(ptext, "app_mem_bytes{k=\"inf\"} +Inf\n"));
  CHECK(Contains(ptext, "app_mem_bytes{k=\"nan\"} NaN\n"));
  CHECK(Contains(ptext, "app_mem_bytes{k=\"adds\"} -4e+20\n"));
  CHECK(Contains(ptext, "app_size_bytes_sum{kind=\"huge\"} 5.099999999999999e+22\n"));
  // One metric of two label sets, one header (label sets by their names).
  CHECK(Contains(ptext, "# TYPE app_requests_total counter\n"
                        "app_requests_total{path=\"/\"} 5\n"
                        "app_requests_total{code=\"200\",method=\"GET\"} 1234\n"
                        "app_requests_total{code=\"500\",method=\"POST\"} 7\n"));
  CHECK(Contains(ptext, "app_queue_depth{queue=\"back\"} 2\n"));
  CHECK(Contains(ptext, "app_queue_depth{queue=\"x\"} 9.75\n"));
  CHECK(Contains(ptext, "app_latency_seconds_bucket{le=\"0.01\"} 99\n"));
  CHECK(Contains(ptext, "app_build_info{team=\"core\",version=\"1.2\"} 1\n"));
  CHECK(Contains(ptext, "app_resets_total 2\n"));
  CHECK(ptext.find("app_summary") == std::string::npos);

  // Another process reads the segment.
  std::string seen = Run("'" + pcpustat + "' -d '" + dir + "' promcpp");
  std::fputs(seen.c_str(), stdout);
  CHECK(Contains(seen, " app_bytes_total 1000.25\n"));
  CHECK(Contains(seen, " app_cpu_seconds_total 3.000000000001\n"));
  CHECK(Contains(seen, " app_queue_depth{queue=\"ratio\"} 0.10000000000100001\n"));
  CHECK(Contains(seen, " app_mem_bytes{k=\"big\"} 16000000000\n"));
  CHECK(Contains(seen, " app_mem_bytes{k=\"tiny\"} 1e-12\n"));
  CHECK(Contains(seen, " app_mem_bytes{k=\"huge\"} 1e+300\n"));
  CHECK(Contains(seen, " app_mem_bytes{k=\"inf\"} +Inf\n"));
  CHECK(Contains(seen, " app_mem_bytes{k=\"nan\"} NaN\n"));
  CHECK(Contains(seen, " app_size_bytes{kind=\"huge\"} count 3 sum 5.099999999999999e+22 "));
  CHECK(Contains(seen, " app_requests_total{path=\"/\"} 5\n"));
  CHECK(Contains(seen, " app_queue_depth{queue=\"back\"} 2\n"));
  CHECK(Contains(seen, " app_requests_total{code=\"200\",method=\"GET\"} 1234\n"));
  CHECK(Contains(seen, " app_requests_total{code=\"500\",method=\"POST\"} 7\n"));
  CHECK(Contains(seen, " app_queue_depth{queue=\"in\"} 42\n"));
  CHECK(Contains(seen, " app_queue_depth{queue=\"out\"} -17.75\n"));
  CHECK(Contains(seen, " app_queue_depth{queue=\"x\"} 9.75\n"));
  CHECK(Contains(seen, " app_latency_seconds count 100 sum 2.59 "));
  CHECK(Contains(seen, " app_size_bytes count 1 sum 500 "));
  CHECK(Contains(seen, " app_build_info{team=\"core\",version=\"1.2\"} 1\n"));

  if (argc == 3) {
    // The Python reader: `family labels value` per counter or gauge series.
    std::string py = Run("'" + std::string(argv[2]) +
                         "' -c 'import pcpu,sys\n"
                         "with pcpu.open_segment(\"promcpp\", dir=sys.argv[1]) as s:\n"
                         " for f in s.snapshot().families:\n"
                         "  for x in f.series:\n"
                         "   if not isinstance(x.value, (list, tuple, dict)) and not hasattr(x.value, \"__dict__\"):"
                         " print(f.name, sorted(x.labels.items()), x.value)' '" +
                         dir + "'");
    std::fputs(py.c_str(), stdout);
    CHECK(Contains(py, "app_bytes [] 1000.25\n"));
    CHECK(Contains(py, "app_queue_depth [('queue', 'ratio')] 0.10000000000100001\n"));
    CHECK(Contains(py, "app_mem_bytes [('k', 'big')] 16000000000\n"));
    CHECK(Contains(py, "app_mem_bytes [('k', 'tiny')] 1e-12\n"));
    CHECK(Contains(py, "app_mem_bytes [('k', 'inf')] inf\n"));
    CHECK(Contains(py, "app_mem_bytes [('k', 'nan')] nan\n"));
    CHECK(Contains(py, "app_requests [('path', '/')] 5\n"));
    CHECK(Contains(py, "app_requests [('code', '200'), ('method', 'GET')] 1234\n"));
    CHECK(Contains(py, "app_queue_depth [('queue', 'out')] -17.75\n"));
  }

  // Removing a metric and a family removes them from the segment.
  requests.Remove(&requests.Add({{"method", "POST"}, {"code", "500"}}));
  CHECK(reg.Remove(sizes));
  seen = Run("'" + pcpustat + "' -d '" + dir + "' promcpp");
  CHECK(seen.find("POST") == std::string::npos);
  CHECK(seen.find("app_size_bytes") == std::string::npos);
  CHECK(Contains(seen, " app_requests_total{code=\"200\",method=\"GET\"} 1234\n"));

  CHECK(pcpu_segment_unpublish(seg) == 0);
  rmdir(dir);
  std::puts("ok");
  return 0;
}
