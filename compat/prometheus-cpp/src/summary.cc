// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer: summaries (see
// prometheus/summary.h for how they differ from prometheus-cpp's).
#include <algorithm>
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
      windows_(static_cast<std::size_t>(age_buckets > 0 ? age_buckets : 1)),
      rotation_(std::chrono::duration_cast<std::chrono::steady_clock::duration>(max_age) /
                (age_buckets > 0 ? age_buckets : 1)),
      next_rotation_(std::chrono::steady_clock::now() + rotation_) {
  for (std::size_t i = 0; i < quantiles_.size(); i++) by_rank_.push_back(i);
  std::stable_sort(by_rank_.begin(), by_rank_.end(),
                   [this](std::size_t a, std::size_t b) { return quantiles_[a].quantile < quantiles_[b].quantile; });
}

Summary::Summary(Quantiles&& quantiles, std::chrono::milliseconds max_age, int age_buckets)
    : Summary(static_cast<const Quantiles&>(quantiles), max_age, age_buckets) {}

Summary::~Summary() = default;

void Summary::Rotate() const {
  auto now = std::chrono::steady_clock::now();
  while (now > next_rotation_) {
    windows_[current_].Clear();
    answers_valid_ = false;
    current_ = (current_ + 1) % windows_.size();
    next_rotation_ += rotation_;
  }
}

void Summary::Observe(double value) {
  std::lock_guard<std::mutex> lock{mutex_};
  count_++;
  sum_ += value;
  answers_valid_ = false;
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

// The nearest-rank quantiles (the observation of rank ceil(q n), 1-based)
// of the current window, in one walk of its buckets, lowest first: the
// quantiles in increasing order, each answered where the walk passes its
// rank. Called under mutex_.
void Summary::Answer() const {
  const Window& w = windows_[current_];
  answers_.assign(quantiles_.size(), std::numeric_limits<double>::quiet_NaN());
  answers_valid_ = true;
  if (w.n == 0) return;
  std::size_t k = 0;  // next in by_rank_
  std::uint64_t seen = 0;
  auto rank_of = [&w](double q) {
    auto rank = static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(w.n)));
    return rank < 1 ? std::uint64_t{1} : rank > w.n ? w.n : rank;
  };
  // Answers every pending quantile whose rank is within `seen` with `v`.
  auto answer = [&](double v) {
    while (k < by_rank_.size() && rank_of(quantiles_[by_rank_[k]].quantile) <= seen) answers_[by_rank_[k++]] = v;
  };
  for (auto it = w.neg.rbegin(); it != w.neg.rend() && k < by_rank_.size(); ++it) {
    seen += it->second.n;
    answer(it->second.sum / static_cast<double>(it->second.n));
  }
  seen += w.zero;
  answer(0.0);
  for (auto it = w.pos.begin(); it != w.pos.end() && k < by_rank_.size(); ++it) {
    seen += it->second.n;
    answer(it->second.sum / static_cast<double>(it->second.n));
  }
}

ClientMetric Summary::Collect() const {
  ClientMetric m;
  std::lock_guard<std::mutex> lock{mutex_};
  m.summary.sample_count = count_;
  m.summary.sample_sum = sum_;
  if (quantiles_.empty()) return m;  // no window to read (nor clock)
  Rotate();
  if (!answers_valid_) Answer();
  m.summary.quantile.resize(quantiles_.size());
  for (std::size_t i = 0; i < quantiles_.size(); i++) {
    m.summary.quantile[i].quantile = quantiles_[i].quantile;
    m.summary.quantile[i].value = answers_[i];
  }
  return m;
}

}  // inline namespace pcpu_v0
}  // namespace prometheus
