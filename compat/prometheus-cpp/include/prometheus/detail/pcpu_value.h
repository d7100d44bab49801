// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer (compat/prometheus-cpp):
// how a double counter or gauge lives in pcpu's int64 per-CPU words. Not a
// prometheus-cpp header.
#pragma once

#include <pcpu/counter.h>
#include <pcpu/gauge.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <mutex>

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

/// A double as two per-CPU int64 words and a rarely used double:
///   value = whole + nanos * 1e-9 + extra.
/// An increment d with |d| < 2^62 adds trunc(d) to `whole` (when not 0) and
/// the fraction, rounded to the nearest 1e-9, to `nanos` (when not 0): an
/// integer increment -- Increment(), Observe() of a whole number -- is one
/// pcpu_counter_add(). So integers are exact up to 2^62 in total and each
/// fractional increment is off by at most 5e-10 (prometheus-cpp's own
/// double is off by half an ulp of the running total, which passes 1e-9 at
/// totals above 2^23). Increments of 2^62 or more, infinities and NaN go to
/// `extra` (an atomic double, a compare-and-swap loop). Value() converts
/// the words to double: exact while the integer part is below 2^53.
/// Set(v) stores v itself, exactly, in `extra` and zeroes the words (under
/// a mutex, so two Set()s never mix; a reader racing a Set() can see the
/// new `extra` beside words not yet zeroed): a gauge that is only Set()
/// reads back exactly what was set, and later changes add to it.
/// Increments are per-CPU rseq adds (pcpu/counter.h): no shared cache line.
class PcpuValue {
 public:
  PcpuValue();
  ~PcpuValue();
  PcpuValue(const PcpuValue&) = delete;
  PcpuValue& operator=(const PcpuValue&) = delete;

  PCPU_PROMETHEUS_HOT void AddWhole(std::int64_t n) { pcpu_counter_add(words_, n); }

  PCPU_PROMETHEUS_HOT void Add(double d) {
    if (!(std::fabs(d) < kLimit)) {
      AddExtra(d);
      return;
    }
    double ip = std::trunc(d);
    auto whole = static_cast<std::int64_t>(ip);
    if (whole != 0) pcpu_counter_add(words_, whole);
    if (d != ip) {
      double f = (d - ip) * 1e9;  // in (-1e9, 1e9): rounded half away from zero
      auto nanos = static_cast<std::int64_t>(f + (f < 0 ? -0.5 : 0.5));
      if (nanos != 0) pcpu_counter_add(pcpu_counter_at(words_, 1), nanos);
    }
  }

  void Set(double v);
  double Value() const;

  static constexpr double kLimit = 4611686018427387904.0;  // 2^62

 private:
  void AddExtra(double d);
  pcpu_counter_t words_;  // [0] whole, [1] nanos
  std::atomic<double> extra_{0.0};
  std::mutex set_mutex_;
};

}  // namespace detail
}  // inline namespace pcpu_v0
}  // namespace prometheus
