// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer: counters, gauges and
// histograms on pcpu's per-CPU counters (see prometheus/detail/pcpu_value.h).
#include <chrono>
#include <ctime>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>
#include <utility>

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/info.h"

namespace prometheus {
namespace detail {

PcpuValue::PcpuValue() : PcpuValue(nullptr) {}

PcpuValue::PcpuValue(pcpu_counter_t series, bool gauge)
    : whole_(series), state_(gauge ? kSetOnly : kAdding), owns_whole_(series == nullptr) {
  if (owns_whole_) {
    whole_ = pcpu_counter_alloc_array(PCPU_FRACTION_WORDS);  // whole units, billionths, residue
    if (!whole_) throw std::bad_alloc();
  }
}

PcpuValue::~PcpuValue() {
  if (owns_whole_) pcpu_counter_free(whole_);
}

// In the words, where pcpu's registry and segment readers see it.
void PcpuValue::AddResidue(double d) {
  residue_.store(true, std::memory_order_release);
  pcpu_counter_add_double(whole_, d);
}

void PcpuValue::StoreResidue(double r) {
  residue_.store(true, std::memory_order_release);
  pcpu_fraction_store_residue(whole_, r);
}

// Each word is a gauge's counter (struct pcpu_gauge wraps one struct
// pcpu_counter), so pcpu_gauge_set() gives it a value exactly, concurrent
// adds either before or after.
namespace {
void SetWord(pcpu_counter_t c, std::int64_t v) {
  (void)pcpu_gauge_set(reinterpret_cast<pcpu_gauge_t>(c), v);
}
}  // namespace

void PcpuValue::Lock() {
  while (busy_.exchange(true, std::memory_order_acquire)) {
  }
}

void PcpuValue::StartAdding() {
  Lock();
  if (state_.load(std::memory_order_relaxed) == kSetOnly) {
    // Set()s still in their fast path see this and redo themselves under
    // the flag after it; adders wait for kAdding.
    state_.store(kStarting, std::memory_order_seq_cst);
    // No adder has written the words yet: give them the last Set()'s value
    // (racing fast Set()s may have left another's), through
    // pcpu_gauge_set_double() as every later change.
    double set = set_.load(std::memory_order_seq_cst);
    (void)UseNanos();
    residue_.store(true, std::memory_order_release);
    (void)pcpu_gauge_set_double(reinterpret_cast<pcpu_gauge_t>(whole_), set);
    state_.store(kAdding, std::memory_order_release);
  }
  Unlock();
}

void PcpuValue::SetSlow(double v) {
  Lock();
  if (state_.load(std::memory_order_relaxed) != kSetOnly) {
    // The words by offset and the residue stored (pcpu's striped lock):
    // the value reads v exactly, adds racing it land before or after.
    (void)UseNanos();
    residue_.store(true, std::memory_order_release);
    (void)pcpu_gauge_set_double(reinterpret_cast<pcpu_gauge_t>(whole_), v);
  } else {
    std::int64_t whole, nanos;
    double residue;
    pcpu__fraction_split(v, 1, &whole, &nanos, &residue);
    __atomic_store_n(&whole_->pcpu__word, whole, __ATOMIC_RELAXED);
    __atomic_store_n(&UseNanos()->pcpu__word, nanos, __ATOMIC_RELAXED);
    StoreResidue(residue);
  }
  set_.store(v, std::memory_order_relaxed);
  Unlock();
}

double PcpuValue::ValueSlow() const {
  if (state_.load(std::memory_order_acquire) != kAdding) return set_.load(std::memory_order_acquire);
  // What pcpu's readers compute from the words (pcpu_fraction_value()):
  // the whole units and billionths as integers first, so that 0.1 + 0.2
  // reads 0.3, then the residue. Read as a gauge's (signed); a counter's
  // whole units never pass 2^63 here.
  std::uint64_t w[PCPU_FRACTION_WORDS];
  (void)pcpu_counter_fetch_array(whole_, PCPU_FRACTION_WORDS, w);
  double residue;
  std::memcpy(&residue, &w[2], sizeof residue);
  return pcpu_fraction_value(w[0], static_cast<std::int64_t>(w[1]), residue, 1);
}

}  // namespace detail

void Gauge::SetToCurrentTime() {
  // Whole seconds, as prometheus-cpp (time(): the vDSO's cheapest clock).
  Set(static_cast<double>(std::time(nullptr)));
}

ClientMetric Info::Collect() const {
  ClientMetric m;
  m.info.value = 1.0;
  return m;
}

static const Histogram::BucketBoundaries& CheckedBounds(const Histogram::BucketBoundaries& b) {
  for (std::size_t i = 1; i < b.size(); i++)
    if (!(b[i - 1] < b[i])) throw std::invalid_argument("Bucket Boundaries must be strictly sorted");
  return b;
}

Histogram::Histogram(const BucketBoundaries& buckets) : Histogram(detail::SeriesTag{}, buckets) {}

Histogram::Histogram(BucketBoundaries&& buckets) : Histogram(detail::SeriesTag{}, std::move(buckets)) {}

struct Histogram::Fractions {
  std::mutex mutex;
  std::vector<detail::PcpuValue*> values;  // per bucket, made on first use
  ~Fractions() {
    for (auto* f : values) delete f;
  }
};

Histogram::Histogram(detail::SeriesTag s, const BucketBoundaries& buckets) {
  CheckedBounds(buckets);  // throws also where the bounds are shared
  bounds_ = s.bounds ? s.bounds : std::make_shared<const BucketBoundaries>(buckets);
  Init(s);
}

Histogram::Histogram(detail::SeriesTag s, BucketBoundaries&& buckets) {
  CheckedBounds(buckets);
  bounds_ = s.bounds ? s.bounds : std::make_shared<const BucketBoundaries>(std::move(buckets));
  Init(s);
}

void Histogram::Init(detail::SeriesTag s) {
  mult_ = std::pow(10.0, -detail::SumScaleExp10(*bounds_));
  if (s.series) {
    // A pcpu histogram series of these bounds (detail::PcpuFamily checked
    // them): its words, [2b] count and [2b + 1] sum of bucket b.
    counts_ = static_cast<pcpu_histogram_t*>(s.series)->pcpu__c;
    owns_counts_ = false;
  } else {
    // The buckets' pairs, then the double sum (as a pcpu histogram of a
    // family with fractions has them).
    counts_ = pcpu_counter_alloc_array(2 * (bounds_->size() + 1) + PCPU_FRACTION_SUM_WORDS);
    if (!counts_) throw std::bad_alloc();
  }
}

Histogram::~Histogram() {
  delete fractions_.load(std::memory_order_relaxed);
  if (owns_counts_) pcpu_counter_free(counts_);
}

Histogram::Fractions* Histogram::GetFractions() {
  Fractions* f = fractions_.load(std::memory_order_acquire);
  if (f) return f;
  auto* fresh = new Fractions();
  fresh->values.assign(bounds_->size() + 1, nullptr);
  if (fractions_.compare_exchange_strong(f, fresh, std::memory_order_acq_rel)) return fresh;
  delete fresh;  // another thread made them first
  return f;
}

void Histogram::Reset() {
  for (std::size_t i = 0; i < 2 * (bounds_->size() + 1); i++) detail::SetWord(pcpu_counter_at(counts_, i), 0);
  if (Fractions* f = fractions_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock{f->mutex};
    for (auto* v : f->values)
      if (v) v->Set(0.0);
  }
  pcpu_fraction_sum_reset(OtherSum());
}

// In the words, where pcpu's registry and segment readers see it: the
// calling CPU's double (an rseq compare-and-store), +-Inf and NaN a shared
// residue.
void Histogram::AddOtherSum(double v) { pcpu_fraction_sum_add(OtherSum(), v); }

void Histogram::ObserveMultiple(const std::vector<double>& bucket_increments, double sum_of_values) {
  if (bucket_increments.size() != bounds_->size() + 1)
    throw std::length_error("bucket_increments must have one value per bucket, +Inf included");
  AddOtherSum(sum_of_values);
  for (std::size_t i = 0; i < bucket_increments.size(); i++) {
    double d = bucket_increments[i];
    if (!(d > 0.0)) continue;  // a count never goes down (prometheus-cpp ignores it)
    if (d < detail::PcpuValue::kLimit && d == std::trunc(d)) {
      pcpu_counter_add(pcpu_counter_at(counts_, 2 * i), static_cast<std::int64_t>(d));
      continue;
    }
    Fractions* f = GetFractions();
    std::lock_guard<std::mutex> lock{f->mutex};
    if (!f->values[i]) f->values[i] = new detail::PcpuValue();
    f->values[i]->Add(d);
  }
}

ClientMetric Histogram::Collect() const {
  ClientMetric m;
  const BucketBoundaries& bounds = *bounds_;
  const std::size_t n = bounds.size() + 1;
  std::uint64_t small[128];
  std::vector<std::uint64_t> large;
  std::uint64_t* words = small;
  if (2 * n > 128) {
    large.resize(2 * n);
    words = large.data();
  }
  (void)pcpu_counter_fetch_array(counts_, 2 * n, words);  // one walk: count and sum of each bucket
  std::uint64_t sum_units = 0;  // modulo 2^64, as the words
  for (std::size_t i = 0; i < n; i++) {
    sum_units += words[2 * i + 1];
    words[i] = words[2 * i];
  }
  const std::uint64_t* counts = words;
  m.histogram.bucket.resize(n);
  for (std::size_t i = 0; i < n; i++)
    m.histogram.bucket[i].upper_bound = i < bounds.size() ? bounds[i] : std::numeric_limits<double>::infinity();
  Fractions* f = fractions_.load(std::memory_order_acquire);
  if (!f) {
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < n; i++) m.histogram.bucket[i].cumulative_count = cumulative += counts[i];
  } else {
    // prometheus-cpp's counts are doubles: the cumulative sum is one too,
    // converted to an integer per bucket.
    std::lock_guard<std::mutex> lock{f->mutex};
    double cumulative = 0.0;
    for (std::size_t i = 0; i < n; i++) {
      cumulative += static_cast<double>(counts[i]) + (f->values[i] ? f->values[i]->Value() : 0.0);
      m.histogram.bucket[i].cumulative_count = static_cast<std::uint64_t>(cumulative);
    }
  }
  m.histogram.sample_count = m.histogram.bucket.back().cumulative_count;
  // The sum's units to double: whole units of 10^0 first, then the rest,
  // so that sums of decimal fractions read as their decimal value.
  auto units = static_cast<std::int64_t>(sum_units);
  double sum;
  if (mult_ == 1.0) {
    sum = static_cast<double>(units);
  } else {
    auto per = static_cast<std::int64_t>(mult_);
    sum = static_cast<double>(units / per);
    if (units % per != 0) sum += static_cast<double>(units % per) / mult_;
  }
  double other = pcpu_fraction_sum_read(OtherSum());
  m.histogram.sample_sum = other == 0.0 ? sum : sum + other;
  return m;
}

}  // namespace prometheus
