// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer: the registry, the
// builders, name checks and the label hash.
#include <algorithm>
#include <cstring>
#include <cmath>
#include <cstdint>
#include <new>
#include <functional>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>

#include "prometheus/check_names.h"
#include "prometheus/counter.h"
#include "prometheus/detail/builder.h"
#include "prometheus/detail/label_set.h"
#include "prometheus/detail/utils.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/pcpu.h"
#include "prometheus/registry.h"
#include "prometheus/summary.h"

// The symbol every unit built against the layer refers to
// (prometheus/detail/core_export.h): defined here alone.
extern "C" {
extern const char pcpu_prometheus_layer_headers_need_lpcpu_prometheus;
const char pcpu_prometheus_layer_headers_need_lpcpu_prometheus = 0;
}

namespace prometheus {

// The name rules are pcpu's (pcpu_stats_check_metric_name() and
// pcpu_stats_check_label_name(), pcpu's lengths limits included), plus
// prometheus-cpp's reservation of metric names starting with "__".
bool CheckMetricName(const std::string& name) {
  if (name.compare(0, 2, "__") == 0) return false;
  return name.find('\0') == std::string::npos && pcpu_stats_check_metric_name(name.c_str()) == 0;
}

bool CheckLabelName(const std::string& name) {
  return name.find('\0') == std::string::npos && pcpu_stats_check_label_name(name.c_str()) == 0;
}

bool CheckLabelName(const std::string& name, MetricType type) {
  if (!CheckLabelName(name)) return false;
  // A histogram's series carry `le`, a summary's `quantile`.
  if (type == MetricType::Histogram && name == "le") return false;
  if (type == MetricType::Summary && name == "quantile") return false;
  return true;
}

namespace detail {

void ThrowInvalidArgument(const char* what) { throw std::invalid_argument(what); }

void CheckFamilyNames(const std::string& name, const Labels& constant_labels) {
  if (!CheckMetricName(name)) ThrowInvalidArgument("Invalid metric name");
  for (auto& l : constant_labels)
    if (!CheckLabelName(l.first)) ThrowInvalidArgument("Invalid label name");
}

void CheckSeriesLabels(const Labels& labels, const Labels& constant_labels) {
  for (auto& l : labels) {
    if (!CheckLabelName(l.first)) ThrowInvalidArgument("Invalid label name");
    if (constant_labels.count(l.first)) ThrowInvalidArgument("Duplicate label name");
  }
}

int SumScaleExp10(const std::vector<double>& bounds) {
  double top = 0.0;
  for (double b : bounds)
    if (std::isfinite(b)) top = std::fmax(top, std::fabs(b));
  int e = -9;
  while (e < 0 && top * std::pow(10.0, -e) > 1e10) e++;
  return e;
}

bool PcpuBoundsScale(const std::vector<double>& bounds, int* scale_exp10) {
  if (bounds.empty() || bounds.size() > PCPU_HISTOGRAM_MAX_BOUNDS) return false;
  for (std::size_t i = 1; i < bounds.size(); i++)
    if (!(bounds[i - 1] < bounds[i])) return false;
  int e = SumScaleExp10(bounds);
  double mult = std::pow(10.0, -e);
  for (double b : bounds) {
    double x = b * mult;
    // An integer to within the rounding of the multiplication.
    if (!(std::fabs(x) < 9007199254740992.0) || std::fabs(x - std::nearbyint(x)) > 1e-6 * std::fmax(1.0, std::fabs(x)))
      return false;
  }
  *scale_exp10 = e;
  return true;
}

static enum pcpu_metric_type PcpuType(MetricType t) {
  switch (t) {
    case MetricType::Counter:
      return PCPU_METRIC_COUNTER;
    case MetricType::Gauge:
      return PCPU_METRIC_GAUGE;
    case MetricType::Histogram:
      return PCPU_METRIC_HISTOGRAM;
    default:
      return static_cast<enum pcpu_metric_type>(0);
  }
}

bool PcpuFamily::Matches(const Labels& labels, const std::vector<double>* bounds) const {
  if (labels.size() != label_names_.size()) return false;
  std::size_t i = 0;
  for (auto& l : labels)
    if (l.first != label_names_[i++]) return false;
  return !bounds || *bounds == bounds_;
}

// An info family: pcpu's info metric `<name>_info`, the constant labels
// first; its series made with it (pcpu_registry_info()).
static void* PublishInfo(pcpu_registry_t* reg, pcpu_family_t** fam, const std::string& name, const std::string& help,
                         const Labels& constant_labels, const Labels& labels) {
  std::vector<const char*> names, values;
  for (auto* l : {&constant_labels, &labels})
    for (auto& kv : *l) {
      if (kv.second.find('\0') != std::string::npos) return nullptr;
      names.push_back(kv.first.c_str());
      values.push_back(kv.second.c_str());
    }
  std::string info = name + "_info";
  if (pcpu_registry_info(reg, info.c_str(), help.empty() ? nullptr : help.c_str(), static_cast<unsigned>(names.size()),
                         names.empty() ? nullptr : names.data(), values.empty() ? nullptr : values.data()) != 0)
    return nullptr;
  if (!*fam) *fam = pcpu_registry_find(reg, info.c_str());
  return *fam ? pcpu_family_lookup(*fam, values.empty() ? nullptr : values.data()) : nullptr;
}

pcpu_family_t* PcpuFamily::Register(const std::string& name, const std::string& help, const Labels& constant_labels,
                                    const Labels& labels, MetricType type, const std::vector<double>* bounds,
                                    unsigned flags) {
  if (type != MetricType::Counter && type != MetricType::Gauge && type != MetricType::Histogram) return nullptr;
  std::vector<const char*> names;
  for (auto& l : labels) names.push_back(l.first.c_str());
  struct pcpu_family_desc d = {};
  d.name = name.c_str();
  d.help = help.empty() ? nullptr : help.c_str();
  d.type = PcpuType(type);
  d.nlabels = static_cast<unsigned>(names.size());
  d.label_names = names.empty() ? nullptr : names.data();
  std::vector<std::int64_t> ibounds;
  struct pcpu_histogram_layout layout = {};
  double mult = 1.0;
  if (type == MetricType::Histogram) {
    int e = 0;
    if (!bounds || !PcpuBoundsScale(*bounds, &e)) return nullptr;
    mult = std::pow(10.0, -e);
    for (double b : *bounds) ibounds.push_back(static_cast<std::int64_t>(std::nearbyint(b * mult)));
    layout.scheme = PCPU_HISTOGRAM_EXPLICIT;
    layout.bounds = ibounds.data();
    layout.nbounds = ibounds.size();
    d.histogram = &layout;
    d.scale_exp10 = e;
  }
  std::vector<const char*> cn, cv;
  for (auto& l : constant_labels) {
    cn.push_back(l.first.c_str());
    cv.push_back(l.second.c_str());
  }
  const auto nconst = static_cast<unsigned>(cn.size());
  // Counters and gauges hold doubles: whole units, billionths and a
  // residue (detail::PcpuValue); histograms a double sum beside their
  // integer sums (Histogram::AddOtherSum()): every value whole in the
  // registry's expositions and segments.
  pcpu_family_t* f = pcpu_registry_family_ex(reg_, &d, PCPU_FAMILY_FRACTIONS | flags, nconst,
                                             nconst ? cn.data() : nullptr, nconst ? cv.data() : nullptr);
  if (f && type == MetricType::Histogram) mult_ = mult;
  return f;
}

bool PcpuFamily::Create(const std::string& name, const std::string& help, const Labels& constant_labels,
                        const Labels& labels, MetricType type, const std::vector<double>* bounds) {
  pcpu_family_t* f = Register(name, help, constant_labels, labels, type, bounds, 0);
  if (!f) return false;
  fam_ = f;
  for (auto& l : labels) label_names_.push_back(l.first);
  if (bounds) bounds_ = *bounds;
  return true;
}

// The family of another label set of the name (once per set: a refused
// one stays refused).
pcpu_family_t* PcpuFamily::LabelSet(const std::string& name, const std::string& help, const Labels& constant_labels,
                                    const Labels& labels, MetricType type, const std::vector<double>* bounds) {
  std::vector<std::string> names;
  for (auto& l : labels) names.push_back(l.first);
  for (auto& s : sets_)
    if (s.first == names) return s.second;
  pcpu_family_t* f = Register(name, help, constant_labels, labels, type, bounds, PCPU_FAMILY_LABELSET);
  sets_.emplace_back(std::move(names), f);
  return f;
}

SeriesTag PcpuFamily::Publish(const std::string& name, const std::string& help, const Labels& constant_labels,
                              const Labels& labels, MetricType type, const std::vector<double>* bounds) {
  SeriesTag t = PublishSeries(name, help, constant_labels, labels, type, bounds);
  if (bounds) {
    if (!shared_bounds_) shared_bounds_ = std::make_shared<const std::vector<double>>(*bounds);
    if (*shared_bounds_ == *bounds) t.bounds = shared_bounds_;
  }
  return t;
}

SeriesTag PcpuFamily::PublishSeries(const std::string& name, const std::string& help, const Labels& constant_labels,
                                    const Labels& labels, MetricType type, const std::vector<double>* bounds) {
  if (!reg_ || refused_) return {};
  if (type == MetricType::Info) {
    if (fam_ && !Matches(labels, nullptr)) return {};
    const bool first = fam_ == nullptr;
    SeriesTag t;
    t.series = PublishInfo(reg_, &fam_, name, help, constant_labels, labels);
    if (!fam_) {
      refused_ = true;
      return {};
    }
    if (first) {
      for (auto& l : labels) label_names_.push_back(l.first);
      for (auto& l : constant_labels) prefix_values_.push_back(l.second);
    }
    return t;
  }
  pcpu_family_t* fam = fam_;
  if (!fam_) {
    if (!Create(name, help, constant_labels, labels, type, bounds)) {
      refused_ = true;  // the first Add decides, once (no retry per Add)
      return {};
    }
    fam = fam_;
  } else if (bounds && *bounds != bounds_) {
    return {};  // other bounds: one layout per pcpu family and name
  } else if (!Matches(labels, bounds)) {
    fam = LabelSet(name, help, constant_labels, labels, type, bounds);  // other label names
    if (!fam) return {};
  }
  std::vector<const char*> values;
  values.reserve(labels.size());
  for (auto& l : labels) {
    if (l.second.find('\0') != std::string::npos) return {};
    values.push_back(l.second.c_str());
  }
  const char* const* v = values.empty() ? nullptr : values.data();
  SeriesTag t;
  switch (type) {
    case MetricType::Counter:
      t.series = pcpu_family_counter(fam, v);
      break;
    case MetricType::Gauge:
      t.series = pcpu_family_gauge(fam, v);
      break;
    case MetricType::Histogram:
      t.series = pcpu_family_histogram(fam, v);
      t.mult = mult_;
      break;
    default:
      break;
  }
  return t;
}

void PcpuFamily::Unpublish(const Labels& labels) {
  pcpu_family_t* fam = fam_;
  if (!fam_) return;
  if (!Matches(labels, nullptr)) {  // another label set's series
    std::vector<std::string> names;
    for (auto& l : labels) names.push_back(l.first);
    fam = nullptr;
    for (auto& s : sets_)
      if (s.first == names) fam = s.second;
    if (!fam) return;
  }
  std::vector<const char*> values;
  for (auto& v : prefix_values_) values.push_back(v.c_str());
  for (auto& l : labels) values.push_back(l.second.c_str());
  (void)pcpu_family_remove(fam, values.empty() ? nullptr : values.data());
}

LabelSet::LabelSet(const Labels& labels) {
  if (labels.empty()) return;
  std::size_t bytes = 4;
  for (auto& l : labels) bytes += 8 + l.first.size() + l.second.size();
  data_.reset(new unsigned char[bytes]);
  unsigned char* p = data_.get();
  auto put32 = [&p](std::size_t v) {
    for (int i = 0; i < 4; i++) *p++ = static_cast<unsigned char>(v >> (8 * i));
  };
  put32(labels.size());
  for (auto& l : labels) {
    put32(l.first.size());
    std::memcpy(p, l.first.data(), l.first.size());
    p += l.first.size();
    put32(l.second.size());
    std::memcpy(p, l.second.data(), l.second.size());
    p += l.second.size();
  }
}

bool LabelSet::Equals(const Labels& labels) const {
  if (labels.size() != size()) return false;
  if (labels.empty()) return true;
  // Stops at the first difference: a Family's index probes compare every
  // key on the way (linear probing), mostly others' labels.
  const unsigned char* p = data_.get() + 4;
  for (auto& l : labels) {
    std::uint32_t nl = Read32(p);
    if (l.first.size() != nl || std::memcmp(l.first.data(), p + 4, nl) != 0) return false;
    p += 4 + nl;
    std::uint32_t vl = Read32(p);
    if (l.second.size() != vl || std::memcmp(l.second.data(), p + 4, vl) != 0) return false;
    p += 4 + vl;
  }
  return true;
}

Labels LabelSet::ToLabels() const {
  Labels out;
  ForEach([&out](const char* n, std::size_t nl, const char* v, std::size_t vl) {
    out.emplace(std::string(n, nl), std::string(v, vl));
  });
  return out;
}

std::size_t LabelSet::Hash() const {
  // As LabelHasher: std::hash of a string_view equals that of the string.
  std::size_t h = 0;
  std::hash<std::string_view> hs;
  ForEach([&](const char* n, std::size_t nl, const char* v, std::size_t vl) {
    h ^= hs(std::string_view(n, nl)) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h ^= hs(std::string_view(v, vl)) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  });
  return h;
}

SeriesKey* SeriesIndex::Find(std::size_t hash, const Labels& labels) const {
  if (slots_.empty()) return nullptr;
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = hash & mask;; i = (i + 1) & mask) {
    SeriesKey* k = slots_[i];
    if (!k) return nullptr;
    if (k != Tombstone() && k->hash32 == static_cast<std::uint32_t>(hash) && k->labels.Equals(labels)) return k;
  }
}

void SeriesIndex::Grow() {
  std::size_t live = 0;
  for (auto* k : slots_)
    if (k && k != Tombstone()) live++;
  std::size_t cap = 8;
  while (3 * cap < 4 * 2 * (live + 1)) cap *= 2;  // at most 1/2 full after growing
  std::vector<SeriesKey*> old(cap, nullptr);
  old.swap(slots_);
  used_ = 0;
  for (auto* k : old)
    if (k && k != Tombstone()) Place(cap - 1 <= 0xffffffffu ? k->hash32 : k->labels.Hash(), k);
}

void SeriesIndex::Place(std::size_t hash, SeriesKey* key) {
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = hash & mask;
  while (slots_[i] && slots_[i] != Tombstone()) i = (i + 1) & mask;
  if (!slots_[i]) used_++;
  slots_[i] = key;
}

void SeriesIndex::Insert(std::size_t hash, SeriesKey* key) {
  key->hash32 = static_cast<std::uint32_t>(hash);
  if (4 * (used_ + 1) > 3 * slots_.size()) Grow();
  Place(hash, key);
}

void SeriesIndex::Erase(std::size_t hash, const SeriesKey* key) {
  if (slots_.empty()) return;
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = hash & mask; slots_[i]; i = (i + 1) & mask)
    if (slots_[i] == key) {
      slots_[i] = Tombstone();
      return;
    }
}

std::size_t LabelHasher::operator()(const Labels& labels) const {
  // Each name and value hashed on its own (std::hash: whole words at a
  // time) and combined in order, so that moving characters between a name
  // and its value changes the hash.
  std::size_t h = 0;
  std::hash<std::string> hs;
  for (auto& l : labels) {
    h ^= hs(l.first) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h ^= hs(l.second) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  }
  return h;
}

template <typename T>
Family<T>& Builder<T>::Register(Registry& registry) {
  return registry.Add<T>(name_, help_, labels_);
}

template class Builder<Counter>;
template class Builder<Gauge>;
template class Builder<Histogram>;
template class Builder<Summary>;
template class Builder<Info>;

}  // namespace detail

detail::Builder<Counter> BuildCounter() { return {}; }
detail::Builder<Gauge> BuildGauge() { return {}; }
detail::Builder<Histogram> BuildHistogram() { return {}; }
detail::Builder<Summary> BuildSummary() { return {}; }
detail::Builder<Info> BuildInfo() { return {}; }

static pcpu_registry_t* NewPcpuRegistry() {
  pcpu_registry_t* r = pcpu_registry_create();
  if (!r) throw std::bad_alloc();
  return r;
}

Registry::Registry(InsertBehavior insert_behavior) : reg_(NewPcpuRegistry()), insert_behavior_(insert_behavior) {}

Registry::~Registry() {
  // The metrics first (they never free a pcpu series' words), then the
  // pcpu registry with every family and series.
  counters_.clear();
  gauges_.clear();
  histograms_.clear();
  summaries_.clear();
  infos_.clear();
  pcpu_registry_destroy(reg_);
}

pcpu_registry_t* PcpuRegistry(const Registry& registry) { return registry.reg_; }

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
  out.reserve(counters_.size() + gauges_.size() + histograms_.size() + infos_.size() + summaries_.size());
  CollectAll(out, counters_);
  CollectAll(out, gauges_);
  CollectAll(out, histograms_);
  CollectAll(out, infos_);
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
template <>
std::vector<std::unique_ptr<Family<Info>>>& Registry::GetFamilies() { return infos_; }

template <typename T>
static bool HasName(const std::vector<std::unique_ptr<Family<T>>>& families, const std::string& name) {
  return std::any_of(families.begin(), families.end(), [&](const std::unique_ptr<Family<T>>& f) { return f->GetName() == name; });
}

template <>
bool Registry::NameExistsInOtherType<Counter>(const std::string& name) const {
  return HasName(gauges_, name) || HasName(histograms_, name) || HasName(summaries_, name) || HasName(infos_, name);
}
template <>
bool Registry::NameExistsInOtherType<Gauge>(const std::string& name) const {
  return HasName(counters_, name) || HasName(histograms_, name) || HasName(summaries_, name) || HasName(infos_, name);
}
template <>
bool Registry::NameExistsInOtherType<Histogram>(const std::string& name) const {
  return HasName(counters_, name) || HasName(gauges_, name) || HasName(summaries_, name) || HasName(infos_, name);
}
template <>
bool Registry::NameExistsInOtherType<Summary>(const std::string& name) const {
  return HasName(counters_, name) || HasName(gauges_, name) || HasName(histograms_, name) || HasName(infos_, name);
}
template <>
bool Registry::NameExistsInOtherType<Info>(const std::string& name) const {
  return HasName(counters_, name) || HasName(gauges_, name) || HasName(histograms_, name) || HasName(summaries_, name);
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
  family->pcpu_.reg_ = reg_;
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
  std::vector<pcpu_family_t*> pf = (*it)->pcpu_.families();
  families.erase(it);  // the metrics, then their pcpu families (every label set)
  for (pcpu_family_t* f : pf) (void)pcpu_registry_remove_family(reg_, f);
  return true;
}

template Family<Counter>& Registry::Add(const std::string&, const std::string&, const Labels&);
template Family<Gauge>& Registry::Add(const std::string&, const std::string&, const Labels&);
template Family<Histogram>& Registry::Add(const std::string&, const std::string&, const Labels&);
template Family<Summary>& Registry::Add(const std::string&, const std::string&, const Labels&);
template Family<Info>& Registry::Add(const std::string&, const std::string&, const Labels&);
template bool Registry::Remove(const Family<Counter>&);
template bool Registry::Remove(const Family<Gauge>&);
template bool Registry::Remove(const Family<Histogram>&);
template bool Registry::Remove(const Family<Summary>&);
template bool Registry::Remove(const Family<Info>&);

}  // namespace prometheus
