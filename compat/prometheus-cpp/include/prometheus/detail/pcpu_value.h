// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer (compat/prometheus-cpp):
// how a double counter or gauge lives in pcpu's int64 per-CPU words. Not a
// prometheus-cpp header.
#pragma once

#include <pcpu/counter.h>
#include <pcpu/gauge.h>

#include "prometheus/detail/core_export.h"

#include <atomic>
#include <cmath>
#include <cstdint>

// The hot paths are always inlined: a pcpu section in an inline function
// that a compiler emits out of line (a COMDAT copy per translation unit)
// leaves its __rseq_exit_point_array entry pointing at a copy the linker
// discards, which fails the link ("defined in discarded section").
#ifndef PCPU_PROMETHEUS_HOT
#define PCPU_PROMETHEUS_HOT __attribute__((always_inline))
#endif

namespace prometheus {
namespace detail {

/// A double as two per-CPU int64 words and a double. The words, `whole`
/// units and beside it `nanos` (billionths of a unit), are a pcpu series'
/// own when the metric is published in a pcpu registry
/// (detail::PcpuFamily: a family with fractions,
/// pcpu_registry_family_nanos()), so pcpu's expositions, snapshots and
/// published segments (pcpustat, the Python reader) show the value to
/// 1e-9: Increment(0.5) and Set(0.75) read there as 0.5 and 0.75.
/// Integer values are exact there up to 2^63; what the words cannot hold
/// (`extra` below) and the part of a Set() value beyond 1e-9 are
/// in-process only (Value(), Collect(), the TextSerializer).
///
/// The precision: an increment d with |d| < 2^62 adds trunc(d) to `whole`
/// (when not 0) and the fraction, rounded to the nearest 1e-9, to `nanos`
/// (when not 0): an integer increment -- Increment(), Observe() of a whole
/// number -- is one pcpu_counter_add(), exact; each fractional increment is
/// off by at most 5e-10 (prometheus-cpp's own double is off by half an ulp
/// of the running total, which passes 1e-9 at totals above 2^23).
/// Increments of 2^62 or more, infinities and NaN go to `extra` (an atomic
/// double, a compare-and-swap loop). Value() converts the words to double:
/// exact while the integer part is below 2^53.
///
/// Set(v) stores v itself, exactly, in `set`, trunc(v) in `whole` and the
/// fraction of v, rounded to the nearest 1e-9, in `nanos` (so that the
/// words alone show v to 1e-9); thereafter value = set + (whole -
/// trunc(set)) + (nanos - NanosOf(set)) * 1e-9 + extra.
/// A gauge that was only ever Set() (never incremented) is in its "set
/// only" state: Set() is two stores (the double, seq_cst, and slot 0's
/// word of `whole`, which no adder writes then; a third, slot 0's word of
/// `nanos`, where v has a fraction) and Value() is the double
/// -- prometheus-cpp's cost; concurrent Set()s leave Value() at one of
/// them and `whole` maybe at the other's whole part until the next Set().
/// The first increment or decrement of a gauge leaves that state for good
/// (once: a spin flag, pcpu_gauge_set() of `whole`); from then on, and
/// always for counters, Set() is pcpu_gauge_set() of `whole` and of `nanos`
/// under the spin flag (two Set()s never mix; a reader racing a Set() can
/// see some of its words and not others). Value() reads back exactly what
/// was set, -0.0 included, and later changes add to it.
/// Increments are per-CPU rseq adds (pcpu/counter.h): no shared cache line.
class PROMETHEUS_CPP_CORE_EXPORT PcpuValue {
 public:
  /// With words of its own (std::bad_alloc when none can be had), as a
  /// counter's value.
  PcpuValue();
  /// On `series`' two words (a counter or gauge of a pcpu registry's
  /// family with fractions, not owned); nullptr: words of its own.
  /// `gauge`: starts in the "set only" state.
  explicit PcpuValue(pcpu_counter_t series, bool gauge = false);
  ~PcpuValue();
  PcpuValue(const PcpuValue&) = delete;
  PcpuValue& operator=(const PcpuValue&) = delete;

  /// A counter's increments (no state check).
  PCPU_PROMETHEUS_HOT void AddWhole(std::int64_t n) { pcpu_counter_add(whole_, n); }

  PCPU_PROMETHEUS_HOT void Add(double d) {
    if (!(std::fabs(d) < kLimit)) {
      AddExtra(d);
      return;
    }
    double ip = std::trunc(d);
    auto whole = static_cast<std::int64_t>(ip);
    if (whole != 0) pcpu_counter_add(whole_, whole);
    if (d != ip) {
      double f = (d - ip) * 1e9;  // in (-1e9, 1e9): rounded half away from zero
      auto nanos = static_cast<std::int64_t>(f + (f < 0 ? -0.5 : 0.5));
      if (nanos != 0) {
        pcpu_counter_t w = nanos_.load(std::memory_order_acquire);
        pcpu_counter_add(w ? w : UseNanos(), nanos);
      }
    }
  }

  /// A gauge's increments: leave the "set only" state first.
  PCPU_PROMETHEUS_HOT void GaugeAddWhole(std::int64_t n) {
    if (state_.load(std::memory_order_acquire) != kAdding) StartAdding();
    AddWhole(n);
  }
  PCPU_PROMETHEUS_HOT void GaugeAdd(double d) {
    if (state_.load(std::memory_order_acquire) != kAdding) StartAdding();
    Add(d);
  }

  /// Sets the value (see the class comment for the cost).
  void Set(double v) {
    if (state_.load(std::memory_order_acquire) == kSetOnly) {
      __atomic_store_n(&whole_->pcpu__word, WholeOf(v), __ATOMIC_RELAXED);
      std::int64_t nanos = NanosOf(v);
      pcpu_counter_t w = nanos_.load(std::memory_order_acquire);
      if (nanos != 0 || w) __atomic_store_n(&(w ? w : UseNanos())->pcpu__word, nanos, __ATOMIC_RELAXED);
      set_.store(v, std::memory_order_seq_cst);
      if (state_.load(std::memory_order_seq_cst) == kSetOnly) return;
    }
    SetSlow(v);  // adders exist (or are starting): under the spin flag
  }
  /// The value. Inline: a gauge in its "set only" state reads the double,
  /// and where only whole units were ever added (no Set() value but +0.0,
  /// no fraction word, no extra) it is the whole word's sum -- what
  /// ValueSlow() computes then, without a call into the layer.
  double Value() const {
    double set = set_.load(std::memory_order_acquire);
    if (state_.load(std::memory_order_acquire) != kAdding) return set;
    std::uint64_t set_bits;
    __builtin_memcpy(&set_bits, &set, sizeof set_bits);
    if (set_bits == 0 && !nanos_.load(std::memory_order_acquire) && extra_.load(std::memory_order_relaxed) == 0.0)
      return static_cast<double>(static_cast<std::int64_t>(pcpu_counter_fetch(whole_)));
    return ValueSlow();
  }
  /// Value()'s general case.
  double ValueSlow() const;

  static constexpr double kLimit = 4611686018427387904.0;  // 2^62

 private:
  enum : unsigned char { kSetOnly, kStarting, kAdding };
  static std::int64_t WholeOf(double v) {
    return std::fabs(v) < kLimit ? static_cast<std::int64_t>(std::trunc(v)) : 0;
  }
  // The fraction of v in billionths, rounded half away from zero, as Add()
  // rounds (0 where WholeOf() is 0 for want of range).
  static std::int64_t NanosOf(double v) {
    if (!(std::fabs(v) < kLimit)) return 0;
    double f = (v - std::trunc(v)) * 1e9;
    return static_cast<std::int64_t>(f + (f < 0 ? -0.5 : 0.5));
  }
  void AddExtra(double d);
  // The `nanos` word, marked in use: Value() reads it from then on.
  pcpu_counter_t UseNanos() {
    pcpu_counter_t w = pcpu_counter_at(whole_, 1);
    nanos_.store(w, std::memory_order_release);
    return w;
  }
  void StartAdding();
  void SetSlow(double v);
  void Lock();
  void Unlock() { busy_.store(false, std::memory_order_release); }

  pcpu_counter_t whole_;                        // the series' two words, or own
  std::atomic<pcpu_counter_t> nanos_{nullptr};  // whole_'s word 1 once a fraction was seen
  std::atomic<double> set_{0.0};                // the last Set()'s value
  std::atomic<double> extra_{0.0};              // increments past 2^62, inf, NaN
  std::atomic<unsigned char> state_;
  std::atomic<bool> busy_{false};  // Set()s and StartAdding() one at a time
  bool owns_whole_;
};

}  // namespace detail
}  // namespace prometheus
