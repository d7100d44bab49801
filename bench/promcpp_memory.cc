// SPDX-License-Identifier: MIT
// Memory per series of prometheus-cpp's API: 10^5 labelled counters (and
// then 10^5 labelled 11-bucket histograms) in one Registry, measured as the
// growth of the process's resident memory (/proc/self/statm) and of the
// bytes malloc has handed out (mallinfo2), divided by the series made.
// The same source is built against the real prometheus-cpp and against
// pcpu's layer (bench/promcpp_compat.sh builds and runs both):
//   g++ -O2 promcpp_memory.cc -lprometheus-cpp-core                  (real)
//   g++ -O2 -I compat/prometheus-cpp/include ... -lpcpu-prometheus  (layer)
// Each series is updated once, so the memory its first update touches
// (a per-CPU word, a page of pcpu's zone) is counted.
// Usage: promcpp_memory [SERIES (default 100000)]
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

static double ResidentBytes() {
  std::ifstream f("/proc/self/statm");
  long size = 0, resident = 0;
  f >> size >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

static double MallocBytes() { return static_cast<double>(mallinfo2().uordblks); }

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 100000;
#ifdef PCPU_PROMETHEUS_LAYER
  const char* lib = "pcpu layer";
#else
  const char* lib = "prometheus-cpp";
#endif
  prometheus::Registry registry;
  auto& counters = prometheus::BuildCounter().Name("requests_total").Help("Requests.").Register(registry);
  auto& histograms = prometheus::BuildHistogram().Name("latency_seconds").Help("Latency.").Register(registry);
  const prometheus::Histogram::BucketBoundaries bounds{0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                       0.5,   1,    2.5,   5,    10};
  // One series of each first: the families' one-time costs are not counted.
  counters.Add({{"path", "/warmup"}, {"code", "200"}}).Increment();
  histograms.Add({{"path", "/warmup"}, {"code", "200"}}, bounds).Observe(0.1);

  double rss0 = ResidentBytes(), heap0 = MallocBytes();
  for (long i = 0; i < n; i++) counters.Add({{"path", "/item/" + std::to_string(i)}, {"code", "200"}}).Increment();
  double rss1 = ResidentBytes(), heap1 = MallocBytes();
  for (long i = 0; i < n; i++)
    histograms.Add({{"path", "/item/" + std::to_string(i)}, {"code", "200"}}, bounds).Observe(0.1);
  double rss2 = ResidentBytes(), heap2 = MallocBytes();

  std::printf("%-15s counter   %7.0f B/series resident  %7.0f B/series malloc  (%ld series)\n", lib,
              (rss1 - rss0) / n, (heap1 - heap0) / n, n);
  std::printf("%-15s histogram %7.0f B/series resident  %7.0f B/series malloc  (%ld series, 11 buckets)\n", lib,
              (rss2 - rss1) / n, (heap2 - heap1) / n, n);
  return 0;
}
