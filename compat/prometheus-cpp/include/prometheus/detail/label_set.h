// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp compatibility layer: how a Family stores each
// series' labels and finds a series by them. Not a prometheus-cpp header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "prometheus/detail/core_export.h"
#include "prometheus/labels.h"

namespace prometheus {
namespace detail {

/// A Labels map packed in one allocation: per label a 32-bit name length,
/// the name, a 32-bit value length, the value (about a quarter of a
/// std::map's memory for short labels). Immutable; not thread-safe to
/// destroy while read (its Family's mutex orders that).
class PROMETHEUS_CPP_CORE_EXPORT LabelSet {
 public:
  /// Copies `labels` (std::bad_alloc when out of memory).
  explicit LabelSet(const Labels& labels);
  /// Whether it holds exactly `labels`. Cost: a pass over both.
  bool Equals(const Labels& labels) const;
  /// The labels as a map (Remove's rare path).
  Labels ToLabels() const;
  /// Calls f(name, name_len, value, value_len) per label, in name order.
  template <typename F>
  void ForEach(F f) const {
    const unsigned char* p = data_.get();
    if (!p) return;
    std::uint32_t n = Read32(p);
    p += 4;
    for (std::uint32_t i = 0; i < n; i++) {
      std::uint32_t nl = Read32(p);
      const char* name = reinterpret_cast<const char*>(p + 4);
      p += 4 + nl;
      std::uint32_t vl = Read32(p);
      const char* value = reinterpret_cast<const char*>(p + 4);
      p += 4 + vl;
      f(name, static_cast<std::size_t>(nl), value, static_cast<std::size_t>(vl));
    }
  }
  /// The same hash as detail::LabelHasher of the labels.
  std::size_t Hash() const;
  /// The number of labels.
  std::size_t size() const { return data_ ? Read32(data_.get()) : 0; }

 private:
  static std::uint32_t Read32(const unsigned char* p) {
    return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
           static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
  }
  std::unique_ptr<unsigned char[]> data_;  // null: no labels
};

/// What a Family's index points to: the labels of one series (the Entry
/// that derives from it holds the metric).
struct PROMETHEUS_CPP_CORE_EXPORT SeriesKey {
  explicit SeriesKey(const Labels& l) : labels(l) {}
  LabelSet labels;
  bool published = false;  // the metric's words are a pcpu series
  // The low 32 bits of the labels' hash (SeriesIndex::Insert() sets it; in
  // what was padding): a probe compares it before the labels, growing
  // places keys by it instead of hashing their labels again.
  std::uint32_t hash32 = 0;
};

/// A Family's series by the hash of their labels (detail::LabelHasher):
/// open addressing with linear probing in one array of key pointers, at
/// most 3/4 full (11 to 21 bytes per series, where a node-based map takes
/// a node and a bucket); a probe compares the key's 32 hash bits, then the
/// labels themselves; growing places keys by those bits. Not thread-safe:
/// the Family's mutex guards it.
class PROMETHEUS_CPP_CORE_EXPORT SeriesIndex {
 public:
  /// The key holding exactly `labels`, or nullptr. Cost: a probe.
  SeriesKey* Find(std::size_t hash, const Labels& labels) const;
  /// Adds `key` (not already in). std::bad_alloc when out of memory.
  void Insert(std::size_t hash, SeriesKey* key);
  /// Removes `key` (nothing if absent).
  void Erase(std::size_t hash, const SeriesKey* key);

 private:
  static SeriesKey* Tombstone() { return reinterpret_cast<SeriesKey*>(alignof(SeriesKey)); }
  void Grow();
  void Place(std::size_t hash, SeriesKey* key);
  std::vector<SeriesKey*> slots_;  // nullptr: empty; Tombstone(): erased
  std::size_t used_ = 0;  // keys and tombstones
};

}  // namespace detail
}  // namespace prometheus
