// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer: the registry, the
// builders, name checks and the label hash.
#include <algorithm>
#include <functional>
#include <iterator>
#include <stdexcept>
#include <string>

#include "prometheus/check_names.h"
#include "prometheus/counter.h"
#include "prometheus/detail/builder.h"
#include "prometheus/detail/utils.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "prometheus/summary.h"

// The symbol every unit built against the layer refers to
// (prometheus/detail/core_export.h): defined here alone.
extern "C" {
extern const char pcpu_prometheus_layer_headers_need_lpcpu_prometheus;
const char pcpu_prometheus_layer_headers_need_lpcpu_prometheus = 0;
}

namespace prometheus {
inline namespace pcpu_v0 {

static bool AsciiAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static bool AsciiDigit(char c) { return c >= '0' && c <= '9'; }

static bool NameStartsValid(const std::string& name) {
  return !name.empty() && !AsciiDigit(name[0]) && name.compare(0, 2, "__") != 0;
}

bool CheckMetricName(const std::string& name) {
  if (!NameStartsValid(name)) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return AsciiAlpha(c) || AsciiDigit(c) || c == '_' || c == ':'; });
}

bool CheckLabelName(const std::string& name) {
  if (!NameStartsValid(name)) return false;
  return std::all_of(name.begin(), name.end(), [](char c) { return AsciiAlpha(c) || AsciiDigit(c) || c == '_'; });
}

namespace detail {

std::size_t LabelHasher::operator()(const Labels& labels) const {
  // FNV-1a over each name and value followed by its length, so that
  // moving characters between a name and its value changes the hash.
  std::uint64_t h = 14695981039346656037ull;
  auto mix = [&h](const std::string& s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    std::uint64_t n = s.size();
    for (int i = 0; i < 8; i++, n >>= 8) h = (h ^ (n & 0xff)) * 1099511628211ull;
  };
  for (auto& l : labels) {
    mix(l.first);
    mix(l.second);
  }
  return static_cast<std::size_t>(h);
}

template <typename T>
Family<T>& Builder<T>::Register(Registry& registry) {
  return registry.Add<T>(name_, help_, labels_);
}

template class Builder<Counter>;
template class Builder<Gauge>;
template class Builder<Histogram>;
template class Builder<Summary>;

}  // namespace detail

detail::Builder<Counter> BuildCounter() { return {}; }
detail::Builder<Gauge> BuildGauge() { return {}; }
detail::Builder<Histogram> BuildHistogram() { return {}; }
detail::Builder<Summary> BuildSummary() { return {}; }

Registry::Registry(InsertBehavior insert_behavior) : insert_behavior_(insert_behavior) {}

Registry::~Registry() = default;

template <typename T>
static void CollectAll(std::vector<MetricFamily>& out, const std::vector<std::unique_ptr<Family<T>>>& families) {
  for (auto& f : families) {
    auto c = f->Collect();
    std::move(c.begin(), c.end(), std::back_inserter(out));
  }
}

std::vector<MetricFamily> Registry::Collect() const {
  std::lock_guard<std::mutex> lock{mutex_};
  std::vector<MetricFamily> out;
  out.reserve(counters_.size() + gauges_.size() + histograms_.size() + summaries_.size());
  CollectAll(out, counters_);
  CollectAll(out, gauges_);
  CollectAll(out, histograms_);
  CollectAll(out, summaries_);
  return out;
}

template <>
std::vector<std::unique_ptr<Family<Counter>>>& Registry::GetFamilies() { return counters_; }
template <>
std::vector<std::unique_ptr<Family<Gauge>>>& Registry::GetFamilies() { return gauges_; }
template <>
std::vector<std::unique_ptr<Family<Histogram>>>& Registry::GetFamilies() { return histograms_; }
template <>
std::vector<std::unique_ptr<Family<Summary>>>& Registry::GetFamilies() { return summaries_; }

template <typename T>
static bool HasName(const std::vector<std::unique_ptr<Family<T>>>& families, const std::string& name) {
  return std::any_of(families.begin(), families.end(), [&](const std::unique_ptr<Family<T>>& f) { return f->GetName() == name; });
}

template <>
bool Registry::NameExistsInOtherType<Counter>(const std::string& name) const {
  return HasName(gauges_, name) || HasName(histograms_, name) || HasName(summaries_, name);
}
template <>
bool Registry::NameExistsInOtherType<Gauge>(const std::string& name) const {
  return HasName(counters_, name) || HasName(histograms_, name) || HasName(summaries_, name);
}
template <>
bool Registry::NameExistsInOtherType<Histogram>(const std::string& name) const {
  return HasName(counters_, name) || HasName(gauges_, name) || HasName(summaries_, name);
}
template <>
bool Registry::NameExistsInOtherType<Summary>(const std::string& name) const {
  return HasName(counters_, name) || HasName(gauges_, name) || HasName(histograms_, name);
}

template <typename T>
Family<T>& Registry::Add(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard<std::mutex> lock{mutex_};
  if (NameExistsInOtherType<T>(name)) throw std::invalid_argument("Family name already exists with different type");
  auto& families = GetFamilies<T>();
  for (auto& f : families) {
    if (f->GetName() != name) continue;
    if (insert_behavior_ == InsertBehavior::Merge && f->GetConstantLabels() == labels) return *f;
    throw std::invalid_argument("Family name already exists");
  }
  auto family = detail::make_unique<Family<T>>(name, help, labels);
  auto& ref = *family;
  families.push_back(std::move(family));
  return ref;
}

template <typename T>
bool Registry::Remove(const Family<T>& family) {
  std::lock_guard<std::mutex> lock{mutex_};
  auto& families = GetFamilies<T>();
  auto it = std::find_if(families.begin(), families.end(),
                         [&family](const std::unique_ptr<Family<T>>& f) { return &family == f.get(); });
  if (it == families.end()) return false;
  families.erase(it);
  return true;
}

template Family<Counter>& Registry::Add(const std::string&, const std::string&, const Labels&);
template Family<Gauge>& Registry::Add(const std::string&, const std::string&, const Labels&);
template Family<Histogram>& Registry::Add(const std::string&, const std::string&, const Labels&);
template Family<Summary>& Registry::Add(const std::string&, const std::string&, const Labels&);
template bool Registry::Remove(const Family<Counter>&);
template bool Registry::Remove(const Family<Gauge>&);
template bool Registry::Remove(const Family<Histogram>&);
template bool Registry::Remove(const Family<Summary>&);

}  // inline namespace pcpu_v0
}  // namespace prometheus
