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
inline namespace pcpu_v0 {
namespace detail {

/// A double as one or two per-CPU int64 words and a double:
///   value = whole + nanos * 1e-9 + extra.
/// `whole` is the pcpu series' own counter or gauge word when the metric
/// is published in a pcpu registry (detail::PcpuFamily), so pcpu's
/// expositions, snapshots and published segments (pcpustat, the Python
/// reader) show the whole units of the value: exact for integer values up
/// to 2^63, fractions left out. `nanos` is made on the first fractional
/// change and is the layer's own (in-process Value(), Collect() and the
/// TextSerializer see it; pcpu's registry does not).
/// The precision: an increment d with |d| < 2^62 adds trunc(d) to `whole`
/// (when not 0) and the fraction, rounded to the nearest 1e-9, to `nanos`
/// (when not 0): an integer increment -- Increment(), Observe() of a whole
/// number -- is one pcpu_counter_add(), exact; each fractional increment is
/// off by at most 5e-10 (prometheus-cpp's own double is off by half an ulp
/// of the running total, which passes 1e-9 at totals above 2^23).
/// Increments of 2^62 or more, infinities and NaN go to `extra` (an atomic
/// double, a compare-and-swap loop). Value() converts the words to double:
/// exact while the integer part is below 2^53.
/// Set(v) gives `whole` trunc(v) (pcpu_gauge_set()), zeroes `nanos` and
/// stores the fraction v - trunc(v), exactly, in `extra` (under a spin
/// flag, so two Set()s never mix; a reader racing a Set() can see some of
/// its words and not others): a gauge that is only Set() reads back
/// exactly what was set, -0.0 included, and later changes add to it.
/// Increments are per-CPU rseq adds (pcpu/counter.h): no shared cache line.
class PROMETHEUS_CPP_CORE_EXPORT PcpuValue {
 public:
  /// With words of its own (std::bad_alloc when none can be had).
  PcpuValue();
  /// On `series`' word (a pcpu registry's counter or gauge, not owned);
  /// nullptr: as PcpuValue().
  explicit PcpuValue(pcpu_counter_t series);
  ~PcpuValue();
  PcpuValue(const PcpuValue&) = delete;
  PcpuValue& operator=(const PcpuValue&) = delete;

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
        if (!w) w = MakeNanos();
        if (w)
          pcpu_counter_add(w, nanos);
        else
          AddExtra(d - ip);  // no memory for the word: the fraction as a double
      }
    }
  }

  void Set(double v);
  double Value() const;
  /// Whether the words are a pcpu registry's series.
  bool published() const { return !owns_whole_; }

  static constexpr double kLimit = 4611686018427387904.0;  // 2^62

 private:
  void AddExtra(double d);
  pcpu_counter_t MakeNanos();
  pcpu_counter_t whole_;                        // the series' word, or own
  std::atomic<pcpu_counter_t> nanos_{nullptr};  // own, made on first use
  std::atomic<double> extra_{0.0};
  std::atomic<bool> set_busy_{false};
  bool owns_whole_ = true;
};

}  // namespace detail
}  // inline namespace pcpu_v0
}  // namespace prometheus
