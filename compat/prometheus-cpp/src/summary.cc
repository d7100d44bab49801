// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer: summaries (see
// prometheus/summary.h for how they differ from prometheus-cpp's).
#include <cmath>
#include <limits>
#include <new>

#include "prometheus/summary.h"

namespace prometheus {
inline namespace pcpu_v0 {

namespace {
// Buckets of relative width about 2 * kAlpha: v in bucket i when
// gamma^(i-1) < |v| <= gamma^i; a bucket reports the mean of its values.
constexpr double kAlpha = 5e-5;
const double kGamma = (1 + kAlpha) / (1 - kAlpha);
const double kLogGamma = std::log(kGamma);

int BucketOf(double a) { return static_cast<int>(std::ceil(std::log(a) / kLogGamma)); }
}  // namespace

Summary::Summary(const Quantiles& quantiles, std::chrono::milliseconds max_age, int age_buckets)
    : quantiles_(quantiles),
      count_(pcpu_counter_alloc()),
      windows_(static_cast<std::size_t>(age_buckets > 0 ? age_buckets : 1)),
      rotation_(std::chrono::duration_cast<std::chrono::steady_clock::duration>(max_age) /
                (age_buckets > 0 ? age_buckets : 1)),
      next_rotation_(std::chrono::steady_clock::now() + rotation_) {
  if (!count_) throw std::bad_alloc();
}

Summary::Summary(Quantiles&& quantiles, std::chrono::milliseconds max_age, int age_buckets)
    : Summary(static_cast<const Quantiles&>(quantiles), max_age, age_buckets) {}

Summary::~Summary() { pcpu_counter_free(count_); }

void Summary::Rotate() const {
  auto now = std::chrono::steady_clock::now();
  while (now > next_rotation_) {
    windows_[current_].Clear();
    current_ = (current_ + 1) % windows_.size();
    next_rotation_ += rotation_;
  }
}

void Summary::Observe(double value) {
  pcpu_counter_inc(count_);
  sum_.Add(value);
  std::lock_guard<std::mutex> lock{mutex_};
  Rotate();
  double a = std::fabs(value);
  for (auto& w : windows_) {
    w.n++;
    if (a == 0.0 || std::isnan(value))
      w.zero++;
    else {
      Cell& c = value > 0 ? w.pos[BucketOf(a)] : w.neg[BucketOf(a)];
      c.n++;
      c.sum += value;
    }
  }
}

double Summary::Quantile(const Window& w, double q) const {
  if (w.n == 0) return std::numeric_limits<double>::quiet_NaN();
  // The nearest-rank quantile: the observation of rank ceil(q n), 1-based.
  auto rank = static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(w.n)));
  if (rank < 1) rank = 1;
  if (rank > w.n) rank = w.n;
  std::uint64_t seen = 0;
  for (auto it = w.neg.rbegin(); it != w.neg.rend(); ++it) {
    seen += it->second.n;
    if (seen >= rank) return it->second.sum / static_cast<double>(it->second.n);
  }
  seen += w.zero;
  if (seen >= rank) return 0.0;
  for (auto& b : w.pos) {
    seen += b.second.n;
    if (seen >= rank) return b.second.sum / static_cast<double>(b.second.n);
  }
  const Cell& last = w.pos.rbegin()->second;  // rank <= n: not reached
  return last.sum / static_cast<double>(last.n);
}

ClientMetric Summary::Collect() const {
  ClientMetric m;
  m.summary.sample_count = pcpu_counter_fetch(count_);
  m.summary.sample_sum = sum_.Value();
  std::lock_guard<std::mutex> lock{mutex_};
  Rotate();
  for (auto& q : quantiles_) {
    ClientMetric::Quantile cq;
    cq.quantile = q.quantile;
    cq.value = Quantile(windows_[current_], q.quantile);
    m.summary.quantile.push_back(cq);
  }
  return m;
}

}  // inline namespace pcpu_v0
}  // namespace prometheus
