// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer: the text format 0.0.4
// as prometheus-cpp writes it, built in one std::string with std::to_chars.
#include <charconv>
#include <cstdint>
#include <cstring>
#include <cmath>
#include <limits>
#include <ostream>
#include <sstream>
#include <string>

#include "prometheus/text_serializer.h"

namespace prometheus {

std::string Serializer::Serialize(const std::vector<MetricFamily>& metrics) const {
  std::ostringstream os;
  Serialize(os, metrics);
  return os.str();
}

namespace {

// printf's %.16g in the C locale (what prometheus-cpp's stream writes at
// precision max_digits10 - 1 in the classic locale), "Nan", "+Inf", "-Inf".
void AppendDouble(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "Nan";
  } else if (std::isinf(v)) {
    out += v < 0 ? "-Inf" : "+Inf";
  } else if (v == std::trunc(v) && std::fabs(v) < 1e15 && !(v == 0 && std::signbit(v))) {
    // A whole number below 10^15: %.16g writes its digits, no exponent.
    char buf[24];
    auto r = std::to_chars(buf, buf + sizeof buf, static_cast<long long>(v));
    out.append(buf, r.ptr);
  } else {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general,
                           std::numeric_limits<double>::max_digits10 - 1);
    out.append(buf, r.ptr);
  }
}

template <typename I>
void AppendInt(std::string& out, I v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void AppendEscaped(std::string& out, const std::string& s) {
  if (s.find_first_of("\n\\\"") == std::string::npos) {
    out.append(s);
    return;
  }
  for (char c : s) {
    switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      default:
        out += c;
    }
  }
}

// The `le` and `quantile` values, formatted once per exposition: every series
// of a histogram family repeats the same bounds, and a double's %.16g is
// the costly part of a line. Direct-mapped on the double's bits.
class BoundCache {
 public:
  void Append(std::string& out, double v) {
    std::uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    Entry& e = entries_[(bits * 0x9E3779B97F4A7C15ull) >> 58];
    if (!e.valid || e.bits != bits) {
      std::string tmp;
      AppendDouble(tmp, v);
      if (tmp.size() > sizeof e.text) {
        out += tmp;
        return;
      }
      std::memcpy(e.text, tmp.data(), tmp.size());
      e.len = static_cast<unsigned char>(tmp.size());
      e.bits = bits;
      e.valid = true;
    }
    out.append(e.text, e.len);
  }

 private:
  struct Entry {
    std::uint64_t bits = 0;
    bool valid = false;
    unsigned char len = 0;
    char text[30];
  };
  Entry entries_[64];
};

// The labels of a metric, escaped and joined: `k="v",k2="v2"` (written once
// per metric, used by each of its lines).
void AppendLabels(std::string& out, const ClientMetric& m) {
  const char* sep = "";
  for (auto& l : m.label) {
    out += sep;
    out += l.name;
    out += "=\"";
    AppendEscaped(out, l.value);
    out += '"';
    sep = ",";
  }
}

// name<suffix>{labels[,extra="..."]}<space>, `labels` from AppendLabels().
void AppendHead(std::string& out, const MetricFamily& f, const std::string& labels, const char* suffix = "",
                const char* extra_name = nullptr, const double* extra_double = nullptr,
                const char* extra_text = nullptr, BoundCache* cache = nullptr) {
  out += f.name;
  out += suffix;
  if (!labels.empty() || extra_name) {
    out += '{';
    out += labels;
    if (extra_name) {
      if (!labels.empty()) out += ',';
      out += extra_name;
      out += "=\"";
      if (extra_double && cache)
        cache->Append(out, *extra_double);
      else if (extra_text)
        out += extra_text;
      out += '"';
    }
    out += '}';
  }
  out += ' ';
}

void AppendTail(std::string& out, const ClientMetric& m) {
  if (m.timestamp_ms != 0) {
    out += ' ';
    AppendInt(out, m.timestamp_ms);
  }
  out += '\n';
}

void AppendValueLine(std::string& out, const MetricFamily& f, const ClientMetric& m, const std::string& labels,
                     double v) {
  AppendHead(out, f, labels);
  AppendDouble(out, v);
  AppendTail(out, m);
}

void AppendSummary(std::string& out, const MetricFamily& f, const ClientMetric& m, const std::string& labels,
                   BoundCache* cache) {
  AppendHead(out, f, labels, "_count");
  AppendInt(out, m.summary.sample_count);
  AppendTail(out, m);
  AppendHead(out, f, labels, "_sum");
  AppendDouble(out, m.summary.sample_sum);
  AppendTail(out, m);
  for (auto& q : m.summary.quantile) {
    AppendHead(out, f, labels, "", "quantile", &q.quantile, nullptr, cache);
    AppendDouble(out, q.value);
    AppendTail(out, m);
  }
}

void AppendHistogram(std::string& out, const MetricFamily& f, const ClientMetric& m, const std::string& labels,
                     BoundCache* cache) {
  auto& h = m.histogram;
  AppendHead(out, f, labels, "_count");
  AppendInt(out, h.sample_count);
  AppendTail(out, m);
  AppendHead(out, f, labels, "_sum");
  AppendDouble(out, h.sample_sum);
  AppendTail(out, m);
  double last = -std::numeric_limits<double>::infinity();
  for (auto& b : h.bucket) {
    AppendHead(out, f, labels, "_bucket", "le", &b.upper_bound, nullptr, cache);
    last = b.upper_bound;
    AppendInt(out, b.cumulative_count);
    AppendTail(out, m);
  }
  if (last != std::numeric_limits<double>::infinity()) {
    AppendHead(out, f, labels, "_bucket", "le", nullptr, "+Inf");
    AppendInt(out, h.sample_count);
    AppendTail(out, m);
  }
}

const char* TypeName(MetricType t) {
  switch (t) {
    case MetricType::Counter:
      return "counter";
    case MetricType::Gauge:
      return "gauge";
    case MetricType::Summary:
      return "summary";
    case MetricType::Histogram:
      return "histogram";
    case MetricType::Info:
      return "gauge";  // the text format has no info type: prometheus-cpp writes a gauge
    case MetricType::Untyped:
      break;
  }
  return "untyped";
}

}  // namespace

// An upper estimate of the exposition's size, so that appending never
// reallocates (and copies) the string as it grows.
static std::size_t EstimateSize(const std::vector<MetricFamily>& metrics) {
  std::size_t n = 0;
  for (auto& f : metrics) {
    n += 2 * f.name.size() + f.help.size() + 32;
    for (auto& m : f.metric) {
      std::size_t line = f.name.size() + 64;
      for (auto& l : m.label) line += l.name.size() + 2 * l.value.size() + 4;
      std::size_t lines = 1;
      if (f.type == MetricType::Histogram) lines = m.histogram.bucket.size() + 3;
      if (f.type == MetricType::Summary) lines = m.summary.quantile.size() + 2;
      n += line * lines;
    }
  }
  return n;
}

void TextSerializer::Append(std::string& out, const std::vector<MetricFamily>& metrics) {
  out.reserve(out.size() + EstimateSize(metrics));
  BoundCache cache;
  for (auto& f : metrics) {
    if (!f.help.empty()) {
      out += "# HELP ";
      out += f.name;
      out += ' ';
      out += f.help;
      out += '\n';
    }
    out += "# TYPE ";
    out += f.name;
    out += ' ';
    out += TypeName(f.type);
    out += '\n';
    std::string labels;
    for (auto& m : f.metric) {
      labels.clear();
      AppendLabels(labels, m);
      switch (f.type) {
        case MetricType::Counter:
          AppendValueLine(out, f, m, labels, m.counter.value);
          break;
        case MetricType::Gauge:
          AppendValueLine(out, f, m, labels, m.gauge.value);
          break;
        case MetricType::Untyped:
          AppendValueLine(out, f, m, labels, m.untyped.value);
          break;
        case MetricType::Info:
          AppendHead(out, f, labels, "_info");
          AppendDouble(out, m.info.value);
          AppendTail(out, m);
          break;
        case MetricType::Summary:
          AppendSummary(out, f, m, labels, &cache);
          break;
        case MetricType::Histogram:
          AppendHistogram(out, f, m, labels, &cache);
          break;
      }
    }
  }
}

std::string TextSerializer::Serialize(const std::vector<MetricFamily>& metrics) const {
  std::string s;
  Append(s, metrics);
  return s;
}

void TextSerializer::Serialize(std::ostream& out, const std::vector<MetricFamily>& metrics) const {
  std::string s;
  Append(s, metrics);
  out.write(s.data(), static_cast<std::streamsize>(s.size()));
}

}  // namespace prometheus
