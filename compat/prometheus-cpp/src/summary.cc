// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer: summaries (see
// prometheus/summary.h for the estimator and its accuracy).
//
// Each window is a Greenwald-Khanna summary of its n observations: tuples
// (v, g, d) by increasing v, where the least rank of v is the sum of g up
// to it (rmin) and its greatest rmin + d (rmax), kept to g + d <= 2 e n
// (e: the smallest error of the quantiles). Then for any rank r, the
// tuple before the first whose rmax exceeds r + e n has a rank within
// r +- e n: its rmax is at most r + e n, and its rmin is the next one's
// rmin minus the next one's g, above r + e n - (g + d) >= r - e n.
// The first tuple is the window's minimum (g 1, d 0) and the last its
// maximum (d 0), never merged away, so ranks 1 and n need no other.
#include <algorithm>
#include <cmath>
#include <limits>

#include "prometheus/summary.h"

namespace prometheus {

namespace {
// Observations buffered before they are merged into the windows.
constexpr std::size_t kBatch = 512;
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
  eps_ = std::numeric_limits<double>::infinity();
  for (const auto& q : quantiles_) eps_ = std::min(eps_, q.error > 0.0 ? q.error : 0.0);  // NaN: 0
  if (quantiles_.empty()) eps_ = 0.0;
}

Summary::Summary(Quantiles&& quantiles, std::chrono::milliseconds max_age, int age_buckets)
    : Summary(static_cast<const Quantiles&>(quantiles), max_age, age_buckets) {}

Summary::~Summary() = default;

void Summary::Rotate() const {
  auto now = std::chrono::steady_clock::now();
  if (!(now > next_rotation_)) return;
  Flush();  // what was observed before a window is cleared stays out of it
  while (now > next_rotation_) {
    windows_[current_].t.clear();
    windows_[current_].n = 0;
    answers_valid_ = false;
    current_ = (current_ + 1) % windows_.size();
    next_rotation_ += rotation_;
  }
}

void Summary::SortPending() const {
  if (sorted_ == pending_.size()) return;
  auto mid = pending_.begin() + static_cast<std::ptrdiff_t>(sorted_);
  std::sort(mid, pending_.end());
  if (pending_.end() - mid == 1) {  // one more observation (a collect after each)
    std::rotate(std::upper_bound(pending_.begin(), mid, *mid), mid, pending_.end());
  } else {
    std::inplace_merge(pending_.begin(), mid, pending_.end());
  }
  sorted_ = pending_.size();
}

// The buffer into every window: one merge of the sorted buffer into the
// window's tuples, compressed as it goes. Called under mutex_.
void Summary::Flush() const {
  if (pending_.empty()) return;
  SortPending();
  const std::size_t b = pending_.size();
  for (Window& w : windows_) {
    const std::uint64_t n = w.n + b;
    // g + d of a merged tuple must stay within 2 e n.
    const double capd = std::floor(2.0 * eps_ * static_cast<double>(n));
    const std::uint64_t cap = capd >= 1.8e19 ? std::numeric_limits<std::uint64_t>::max()
                                             : static_cast<std::uint64_t>(capd);
    merged_.clear();
    merged_.reserve(w.t.size() + b);
    auto put = [this, cap](Tuple x) {
      // Merges the last tuple out into x where the sum allows; the first
      // (the minimum) stays.
      if (merged_.size() >= 2 && merged_.back().g + x.g + x.d <= cap) {
        x.g += merged_.back().g;
        merged_.back() = x;
      } else {
        merged_.push_back(x);
      }
    };
    std::size_t i = 0, j = 0;
    const std::size_t m = w.t.size();
    while (i < m || j < b) {
      if (j == b || (i < m && w.t[i].v <= pending_[j])) {
        put(w.t[i++]);
      } else {
        // A new observation before tuple i: its rank is at most tuple i's
        // rmax - 1 plus the new ones up to it (i: none, it is the maximum).
        put(Tuple{pending_[j++], 1, i < m ? w.t[i].g + w.t[i].d - 1 : 0});
      }
    }
    w.t.swap(merged_);
    w.n = n;
  }
  pending_.clear();
  sorted_ = 0;
}

// Every quantile of the current window in one walk of its tuples merged
// with the buffer (as Flush() would merge it, uncompressed): the quantiles
// in increasing order, each answered by the tuple before the first whose
// rmax exceeds its rank + e n. Called under mutex_.
void Summary::Answer() const {
  const Window& w = windows_[current_];
  answers_.assign(quantiles_.size(), std::numeric_limits<double>::quiet_NaN());
  answers_valid_ = true;
  SortPending();
  const std::size_t b = pending_.size(), m = w.t.size();
  const std::uint64_t n = w.n + b;
  if (n == 0) return;
  const double slack = eps_ * static_cast<double>(n);
  std::size_t k = 0;  // next in by_rank_
  double bound = 0.0;  // its rank + e n
  auto next_bound = [&] {
    if (k == by_rank_.size()) return;
    double r = std::ceil(quantiles_[by_rank_[k]].quantile * static_cast<double>(n));
    r = r < 1.0 ? 1.0 : r > static_cast<double>(n) ? static_cast<double>(n) : r;  // NaN: 1
    bound = r + slack;
  };
  next_bound();
  std::uint64_t rmin = 0;
  double prev = 0.0;
  bool have_prev = false;
  std::size_t i = 0, j = 0;
  while (k < by_rank_.size() && (i < m || j < b)) {
    double v;
    std::uint64_t d;
    if (j == b || (i < m && w.t[i].v <= pending_[j])) {
      v = w.t[i].v;
      rmin += w.t[i].g;
      d = w.t[i].d;
      i++;
    } else {
      v = pending_[j++];
      rmin += 1;
      d = i < m ? w.t[i].g + w.t[i].d - 1 : 0;
    }
    const auto rmax = static_cast<double>(rmin + d);
    while (k < by_rank_.size() && rmax > bound) {
      answers_[by_rank_[k++]] = have_prev ? prev : v;
      next_bound();
    }
    prev = v;
    have_prev = true;
  }
  for (; k < by_rank_.size(); k++) answers_[by_rank_[k]] = prev;  // the maximum
}

void Summary::Observe(double value) {
  std::lock_guard<std::mutex> lock{mutex_};
  count_++;
  sum_ += value;
  if (quantiles_.empty()) return;  // no window to keep
  answers_valid_ = false;
  Rotate();
  pending_.push_back(std::isnan(value) ? 0.0 : value);
  if (pending_.size() >= kBatch) Flush();
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

}  // namespace prometheus
