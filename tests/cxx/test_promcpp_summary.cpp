// SPDX-License-Identifier: MIT
// libpcpu-prometheus's Summary: its stated accuracy (every quantile's value
// is an observation whose rank is within ceil(q n) +- e_min n, e_min the
// smallest error of the summary's quantiles) on random, sorted, reversed
// and duplicate-heavy inputs, collected at many points (the buffer partly
// full and just merged); exact count and sum; the window's rotation; and
// Observe() racing Collect() from several threads (run under TSan in the
// thread-sanitized build).
#include <prometheus/family.h>
#include <prometheus/registry.h>
#include <prometheus/summary.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#define CHECK(cond)                                                                  \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      std::fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

using namespace prometheus;

// Every reported quantile against the sorted observations.
static void CheckQuantiles(const Summary::Quantiles& qs, const ClientMetric& m, std::vector<double> obs) {
  std::sort(obs.begin(), obs.end());
  const double n = static_cast<double>(obs.size());
  double emin = 1e300;
  for (const auto& q : qs) emin = std::min(emin, q.error);
  CHECK(m.summary.quantile.size() == qs.size());
  for (std::size_t i = 0; i < qs.size(); i++) {
    const double v = m.summary.quantile[i].value;
    CHECK(m.summary.quantile[i].quantile == qs[i].quantile);
    if (obs.empty()) {
      CHECK(std::isnan(v));
      continue;
    }
    // The ranks v holds (1-based): [lo, hi]; it must be an observation.
    const double lo = static_cast<double>(std::lower_bound(obs.begin(), obs.end(), v) - obs.begin()) + 1;
    const double hi = static_cast<double>(std::upper_bound(obs.begin(), obs.end(), v) - obs.begin());
    CHECK(lo <= hi);
    const double r = std::max(1.0, std::ceil(qs[i].quantile * n));
    const double slack = emin * n + 1e-9;
    if (!(hi >= r - slack && lo <= r + slack)) {
      std::fprintf(stderr, "q %g e %g n %g: value %g has ranks [%g, %g], wanted %g +- %g\n", qs[i].quantile,
                   qs[i].error, n, v, lo, hi, r, slack);
      CHECK(false);
    }
  }
}

static void Accuracy(const Summary::Quantiles& qs, const std::vector<double>& input, std::size_t every) {
  Summary s{qs};
  std::vector<double> seen;
  double sum = 0.0;
  for (std::size_t i = 0; i < input.size(); i++) {
    s.Observe(input[i]);
    seen.push_back(input[i]);
    sum += input[i];
    if ((i + 1) % every == 0 || i + 1 == input.size() || i < 20) {
      ClientMetric m = s.Collect();
      CHECK(m.summary.sample_count == seen.size());
      CHECK(m.summary.sample_sum == sum);
      CheckQuantiles(qs, m, seen);
      CheckQuantiles(qs, s.Collect(), seen);  // the cached answers
    }
  }
}

int main() {
  const Summary::Quantiles common{{0.5, 0.05}, {0.9, 0.01}, {0.95, 0.005}, {0.99, 0.001}};
  Summary::Quantiles linear;
  for (int i = 0; i <= 20; i++) linear.emplace_back(i / 20.0, 0.01);
  const Summary::Quantiles loose{{0.99, 0.02}, {0.25, 0.05}, {0.5, 0.1}};  // not in order
  const Summary::Quantiles exact{{0.0, 0.0}, {0.5, 0.0}, {0.9, 0.0}, {1.0, 0.0}};

  std::mt19937_64 rng(1234);
  std::uniform_real_distribution<double> uni(0, 100);
  std::lognormal_distribution<double> logn(0, 2);
  std::uniform_int_distribution<int> small(-5, 5);
  const std::size_t N = 30000;
  std::vector<double> uniform(N), lognormal(N), dups(N), ramp(N), down(N), mixed(N);
  for (std::size_t i = 0; i < N; i++) {
    uniform[i] = uni(rng);
    lognormal[i] = logn(rng);
    dups[i] = small(rng);
    ramp[i] = static_cast<double>(i);
    down[i] = static_cast<double>(N - i);
    mixed[i] = i % 3 == 0 ? -uni(rng) : i % 3 == 1 ? 0.0 : 1e6 * uni(rng);
  }
  for (const Summary::Quantiles* qs : {&common, static_cast<const Summary::Quantiles*>(&linear), &loose}) {
    for (const std::vector<double>* in : {&uniform, &lognormal, &dups, &ramp, &down, &mixed}) {
      Accuracy(*qs, *in, 997);
      Accuracy(*qs, std::vector<double>(in->begin(), in->begin() + 1500), 1);
    }
  }
  Accuracy(exact, std::vector<double>(uniform.begin(), uniform.begin() + 5000), 61);
  Accuracy(exact, std::vector<double>(dups.begin(), dups.begin() + 2000), 1);

  {
    // Exact quantiles: the nearest rank.
    Summary s{exact};
    for (int i = 1; i <= 10; i++) s.Observe(11 - i);
    ClientMetric m = s.Collect();
    CHECK(m.summary.quantile[0].value == 1 && m.summary.quantile[1].value == 5);
    CHECK(m.summary.quantile[2].value == 9 && m.summary.quantile[3].value == 10);
  }
  {
    // NaN: 0 in the window, NaN in the sum; an empty window: NaN.
    Summary s{Summary::Quantiles{{0.5, 0.0}}};
    CHECK(std::isnan(s.Collect().summary.quantile[0].value));
    s.Observe(std::nan(""));
    ClientMetric m = s.Collect();
    CHECK(m.summary.sample_count == 1 && std::isnan(m.summary.sample_sum));
    CHECK(m.summary.quantile[0].value == 0.0);
  }
  {
    // No quantiles: count and sum only.
    Summary s{Summary::Quantiles{}};
    for (int i = 0; i < 1000; i++) s.Observe(i);
    ClientMetric m = s.Collect();
    CHECK(m.summary.sample_count == 1000 && m.summary.sample_sum == 499500.0 && m.summary.quantile.empty());
  }
  {
    // The window: 2 age buckets of 200 ms; old observations leave it (those
    // still buffered too), count and sum stay.
    Summary s{Summary::Quantiles{{0.5, 0.01}}, std::chrono::milliseconds{400}, 2};
    for (int i = 0; i < 700; i++) s.Observe(1.0);
    CHECK(s.Collect().summary.quantile[0].value == 1.0);
    std::this_thread::sleep_for(std::chrono::milliseconds{1000});
    CHECK(std::isnan(s.Collect().summary.quantile[0].value));
    for (int i = 0; i < 3; i++) s.Observe(5.0);
    ClientMetric m = s.Collect();
    CHECK(m.summary.quantile[0].value == 5.0);
    CHECK(m.summary.sample_count == 703 && m.summary.sample_sum == 715.0);
  }
  {
    // Threads: observers racing a collector; integer values, so the sum is
    // exact in any order; at the end the whole input is the window.
    Registry reg;
    auto& s = BuildSummary().Name("latency").Register(reg).Add({}, common);
    constexpr int kThreads = 4;
    constexpr int kPer = 20000;
    std::vector<std::vector<double>> in(kThreads);
    for (int t = 0; t < kThreads; t++)
      for (int i = 0; i < kPer; i++) in[t].push_back(static_cast<double>(rng() % 100000));
    std::vector<std::thread> ts;
    for (int t = 0; t < kThreads; t++)
      ts.emplace_back([&s, &in, t] {
        for (double v : in[t]) s.Observe(v);
      });
    std::thread collector([&s] {
      for (int i = 0; i < 2000; i++) {
        ClientMetric m = s.Collect();
        CHECK(m.summary.quantile.size() == 4);
      }
    });
    for (auto& th : ts) th.join();
    collector.join();
    std::vector<double> all;
    double sum = 0.0;
    for (auto& v : in)
      for (double x : v) {
        all.push_back(x);
        sum += x;
      }
    ClientMetric m = s.Collect();
    CHECK(m.summary.sample_count == all.size() && m.summary.sample_sum == sum);
    CheckQuantiles(common, m, all);
  }
  std::puts("ok");
  return 0;
}
