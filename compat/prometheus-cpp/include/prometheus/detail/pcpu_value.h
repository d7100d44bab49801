// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer (compat/prometheus-cpp):
// how a double counter or gauge lives in pcpu's int64 per-CPU words. Not a
// prometheus-cpp header.
#pragma once

#include <pcpu/counter.h>
#include <pcpu/fraction.h>
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

/// A double as a pcpu value with fractions (pcpu/fraction.h): two
/// per-CPU int64 words, `whole` units and beside it `nanos` (billionths of
/// a unit), and a residue (a double, slot 0's mirror word of word 2) for
/// what the words cannot hold. They are a pcpu series' own when the metric
/// is published in a pcpu registry (detail::PcpuFamily: a family with
/// fractions, pcpu_registry_family_nanos()), so pcpu's expositions,
/// snapshots and published segments (pcpustat, the Go and Python readers)
/// show the value Value() and Collect() give, every double: Increment(0.5),
/// Set(0.75), Set(16e9), Set(1e-12), Increment(1e300), +-Inf, NaN.
///
/// The precision: an increment d with |d| < 2^62 adds trunc(d) to `whole`
/// (when not 0) and the fraction, rounded to the nearest 1e-9, to `nanos`
/// (when not 0): an integer increment -- Increment(), Observe() of a whole
/// number -- is one pcpu_counter_add(), exact; each fractional increment is
/// off by at most 5e-10 (prometheus-cpp's own double is off by half an ulp
/// of the running total, which passes 1e-9 at totals above 2^23).
/// Increments of 2^62 or more, those that would round to 0 (below 5e-10),
/// infinities and NaN go to the residue (a compare-and-swap on its word).
///
/// Set(v) stores v exactly: trunc(v) in `whole`, the fraction of v rounded
/// to the nearest 1e-9 in `nanos` and v minus what those read in the
/// residue (pcpu_fraction_split()), so the value reads back v bit for bit
/// (-0.0 included), in pcpu's readers too, and later changes add to it.
/// A gauge that was only ever Set() (never incremented) is in its "set
/// only" state: Set() is plain stores (the double, seq_cst, and slot 0's
/// word of `whole`, which no adder writes then; slot 0's word of `nanos`
/// where v has a fraction; the residue, an atomic exchange, where it is or
/// was not 0) and Value() is the double -- prometheus-cpp's cost;
/// concurrent Set()s leave Value() at one of them and the words maybe at
/// the other's until the next Set(). The first increment or decrement of a
/// gauge leaves that state for good (once: a spin flag,
/// pcpu_gauge_set_double() of the last Set()); from then on, and always
/// for counters, Set() is pcpu_gauge_set_double() (the words by offset, the
/// residue stored, under pcpu's striped lock and the spin flag: two Set()s
/// never mix; a reader racing a Set() can see some of its words and not
/// others), and Value() is pcpu_fraction_value() of the words read.
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
      AddResidue(d);
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
      } else if (whole == 0) {
        AddResidue(d);  // 0 < |d| < 5e-10: it would round to nothing
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
      std::int64_t whole, nanos;
      double residue;
      pcpu__fraction_split(v, 1, &whole, &nanos, &residue);
      __atomic_store_n(&whole_->pcpu__word, whole, __ATOMIC_RELAXED);
      pcpu_counter_t w = nanos_.load(std::memory_order_acquire);
      if (nanos != 0 || w) __atomic_store_n(&(w ? w : UseNanos())->pcpu__word, nanos, __ATOMIC_RELAXED);
      if (residue != 0.0 || std::signbit(residue) || residue_.load(std::memory_order_relaxed))
        StoreResidue(residue);
      set_.store(v, std::memory_order_seq_cst);
      if (state_.load(std::memory_order_seq_cst) == kSetOnly) return;
    }
    SetSlow(v);  // adders exist (or are starting): under the spin flag
  }
  /// The value. Inline: a gauge in its "set only" state reads the double,
  /// and where only whole units were ever added (no Set() value but +0.0,
  /// no fraction word, no residue) it is the whole word's sum -- what
  /// ValueSlow() computes then, without a call into the layer.
  double Value() const {
    double set = set_.load(std::memory_order_acquire);
    if (state_.load(std::memory_order_acquire) != kAdding) return set;
    std::uint64_t set_bits;
    __builtin_memcpy(&set_bits, &set, sizeof set_bits);
    if (set_bits == 0 && !nanos_.load(std::memory_order_acquire) && !residue_.load(std::memory_order_acquire))
      return static_cast<double>(static_cast<std::int64_t>(pcpu_counter_fetch(whole_)));
    return ValueSlow();
  }
  /// Value()'s general case.
  double ValueSlow() const;

  static constexpr double kLimit = 4611686018427387904.0;  // 2^62

 private:
  enum : unsigned char { kSetOnly, kStarting, kAdding };
  void AddResidue(double d);
  void StoreResidue(double r);
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

  pcpu_counter_t whole_;                        // the series' three words, or own
  std::atomic<pcpu_counter_t> nanos_{nullptr};  // whole_'s word 1 once a fraction was seen
  std::atomic<double> set_{0.0};                // the last Set()'s value (the "set only" state)
  std::atomic<bool> residue_{false};            // the residue (word 2) was ever written
  std::atomic<unsigned char> state_;
  std::atomic<bool> busy_{false};  // Set()s and StartAdding() one at a time
  bool owns_whole_;
};

}  // namespace detail
}  // namespace prometheus
