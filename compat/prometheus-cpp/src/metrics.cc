// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer: counters, gauges and
// histograms on pcpu's per-CPU counters (see prometheus/detail/pcpu_value.h).
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <new>
#include <stdexcept>

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"

namespace prometheus {
inline namespace pcpu_v0 {
namespace detail {

PcpuValue::PcpuValue() : words_(pcpu_counter_alloc_array(2)) {
  if (!words_) throw std::bad_alloc();
}

PcpuValue::~PcpuValue() { pcpu_counter_free(words_); }

void PcpuValue::AddExtra(double d) {
  double old = extra_.load(std::memory_order_relaxed);
  while (!extra_.compare_exchange_weak(old, old + d, std::memory_order_relaxed)) {
  }
}

// Each word is a gauge's counter (struct pcpu_gauge wraps one struct
// pcpu_counter), so pcpu_gauge_set() gives it a value exactly, concurrent
// adds either before or after.
static void SetWord(pcpu_counter_t c, std::int64_t v) {
  (void)pcpu_gauge_set(reinterpret_cast<pcpu_gauge_t>(c), v);
}

void PcpuValue::Set(double v) {
  // The double itself, exactly, in `extra`; the words restart from 0, so
  // later changes add to it.
  std::lock_guard<std::mutex> lock{set_mutex_};
  SetWord(words_, 0);
  SetWord(pcpu_counter_at(words_, 1), 0);
  extra_.store(v, std::memory_order_relaxed);
}

double PcpuValue::Value() const {
  std::uint64_t w[2] = {0, 0};
  (void)pcpu_counter_fetch_array(words_, 2, w);  // one walk of the slots for both
  auto whole = static_cast<std::int64_t>(w[0]);
  auto nanos = static_cast<std::int64_t>(w[1]);
  // Whole seconds of the nanos first, so that 0.1 + 0.2 reads 0.3.
  double v = static_cast<double>(whole + nanos / 1000000000) +
             static_cast<double>(nanos % 1000000000) / 1e9;
  double extra = extra_.load(std::memory_order_relaxed);
  if (whole == 0 && nanos == 0) return extra;  // what Set() stored, -0.0 included
  return extra == 0.0 ? v : v + extra;
}

}  // namespace detail

ClientMetric Counter::Collect() const {
  ClientMetric m;
  m.counter.value = Value();
  return m;
}

void Gauge::SetToCurrentTime() {
  auto now = std::chrono::system_clock::now().time_since_epoch();
  Set(std::chrono::duration<double>(now).count());
}

ClientMetric Gauge::Collect() const {
  ClientMetric m;
  m.gauge.value = Value();
  return m;
}

static const Histogram::BucketBoundaries& CheckedBounds(const Histogram::BucketBoundaries& b) {
  for (std::size_t i = 1; i < b.size(); i++)
    if (!(b[i - 1] < b[i])) throw std::invalid_argument("Bucket Boundaries must be strictly sorted");
  return b;
}

Histogram::Histogram(const BucketBoundaries& buckets)
    : bounds_(CheckedBounds(buckets)),
      counts_(pcpu_counter_alloc_array(buckets.size() + 1)),
      fractions_(buckets.size() + 1, nullptr) {
  if (!counts_) throw std::bad_alloc();
}

Histogram::~Histogram() {
  for (auto* f : fractions_) delete f;
  pcpu_counter_free(counts_);
}

void Histogram::ObserveMultiple(const std::vector<double>& bucket_increments, double sum_of_values) {
  if (bucket_increments.size() != bounds_.size() + 1)
    throw std::length_error("bucket_increments must have one value per bucket, +Inf included");
  sum_.Add(sum_of_values);
  for (std::size_t i = 0; i < bucket_increments.size(); i++) {
    double d = bucket_increments[i];
    if (!(d > 0.0)) continue;  // a count never goes down (prometheus-cpp ignores it)
    if (d < detail::PcpuValue::kLimit && d == std::trunc(d)) {
      pcpu_counter_add(pcpu_counter_at(counts_, i), static_cast<std::int64_t>(d));
      continue;
    }
    std::lock_guard<std::mutex> lock{fractions_mutex_};
    if (!fractions_[i]) {
      fractions_[i] = new detail::PcpuValue();
      has_fractions_.store(true, std::memory_order_release);
    }
    fractions_[i]->Add(d);
  }
}

ClientMetric Histogram::Collect() const {
  ClientMetric m;
  const std::size_t n = bounds_.size() + 1;
  std::uint64_t small[64];
  std::vector<std::uint64_t> large;
  std::uint64_t* counts = small;
  if (n > 64) {
    large.resize(n);
    counts = large.data();
  }
  (void)pcpu_counter_fetch_array(counts_, n, counts);
  m.histogram.bucket.resize(n);
  for (std::size_t i = 0; i < n; i++)
    m.histogram.bucket[i].upper_bound = i < bounds_.size() ? bounds_[i] : std::numeric_limits<double>::infinity();
  if (!has_fractions_.load(std::memory_order_acquire)) {
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < n; i++) m.histogram.bucket[i].cumulative_count = cumulative += counts[i];
  } else {
    // prometheus-cpp's counts are doubles: the cumulative sum is one too,
    // converted to an integer per bucket.
    std::lock_guard<std::mutex> lock{fractions_mutex_};
    double cumulative = 0.0;
    for (std::size_t i = 0; i < n; i++) {
      cumulative += static_cast<double>(counts[i]) + (fractions_[i] ? fractions_[i]->Value() : 0.0);
      m.histogram.bucket[i].cumulative_count = static_cast<std::uint64_t>(cumulative);
    }
  }
  m.histogram.sample_count = m.histogram.bucket.back().cumulative_count;
  m.histogram.sample_sum = sum_.Value();
  return m;
}

}  // inline namespace pcpu_v0
}  // namespace prometheus
