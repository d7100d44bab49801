// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer: the text format 0.0.4
// as prometheus-cpp writes it, built in one std::string with std::to_chars.
#include <charconv>
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

// name<suffix>{labels[,extra="..."]}<space>
void AppendHead(std::string& out, const MetricFamily& f, const ClientMetric& m, const char* suffix = "",
                const char* extra_name = nullptr, const double* extra_double = nullptr,
                const char* extra_text = nullptr) {
  out += f.name;
  out += suffix;
  if (!m.label.empty() || extra_name) {
    out += '{';
    const char* sep = "";
    for (auto& l : m.label) {
      out += sep;
      out += l.name;
      out += "=\"";
      AppendEscaped(out, l.value);
      out += '"';
      sep = ",";
    }
    if (extra_name) {
      out += sep;
      out += extra_name;
      out += "=\"";
      if (extra_double)
        AppendDouble(out, *extra_double);
      else
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

void AppendValueLine(std::string& out, const MetricFamily& f, const ClientMetric& m, double v) {
  AppendHead(out, f, m);
  AppendDouble(out, v);
  AppendTail(out, m);
}

void AppendSummary(std::string& out, const MetricFamily& f, const ClientMetric& m) {
  AppendHead(out, f, m, "_count");
  AppendInt(out, m.summary.sample_count);
  AppendTail(out, m);
  AppendHead(out, f, m, "_sum");
  AppendDouble(out, m.summary.sample_sum);
  AppendTail(out, m);
  for (auto& q : m.summary.quantile) {
    AppendHead(out, f, m, "", "quantile", &q.quantile);
    AppendDouble(out, q.value);
    AppendTail(out, m);
  }
}

void AppendHistogram(std::string& out, const MetricFamily& f, const ClientMetric& m) {
  auto& h = m.histogram;
  AppendHead(out, f, m, "_count");
  AppendInt(out, h.sample_count);
  AppendTail(out, m);
  AppendHead(out, f, m, "_sum");
  AppendDouble(out, h.sample_sum);
  AppendTail(out, m);
  double last = -std::numeric_limits<double>::infinity();
  for (auto& b : h.bucket) {
    AppendHead(out, f, m, "_bucket", "le", &b.upper_bound);
    last = b.upper_bound;
    AppendInt(out, b.cumulative_count);
    AppendTail(out, m);
  }
  if (last != std::numeric_limits<double>::infinity()) {
    AppendHead(out, f, m, "_bucket", "le", nullptr, "+Inf");
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
    case MetricType::Untyped:
      break;
  }
  return "untyped";
}

}  // namespace

void TextSerializer::Append(std::string& out, const std::vector<MetricFamily>& metrics) {
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
    for (auto& m : f.metric) {
      switch (f.type) {
        case MetricType::Counter:
          AppendValueLine(out, f, m, m.counter.value);
          break;
        case MetricType::Gauge:
          AppendValueLine(out, f, m, m.gauge.value);
          break;
        case MetricType::Untyped:
          AppendValueLine(out, f, m, m.untyped.value);
          break;
        case MetricType::Summary:
          AppendSummary(out, f, m);
          break;
        case MetricType::Histogram:
          AppendHistogram(out, f, m);
          break;
      }
    }
  }
}

void TextSerializer::Serialize(std::ostream& out, const std::vector<MetricFamily>& metrics) const {
  std::string s;
  Append(s, metrics);
  out.write(s.data(), static_cast<std::streamsize>(s.size()));
}

}  // namespace prometheus
