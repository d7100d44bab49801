// SPDX-License-Identifier: MIT
// The Pushgateway's grouping key in a URL path: percent-encoding, and the
// base64url form of values the path cannot carry otherwise.
#include "grouping_key.h"

namespace prometheus {
namespace detail {
namespace {

bool ValidLabelName(const std::string& name) {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    const bool digit = c >= '0' && c <= '9';
    if (!(alpha || (digit && i > 0))) return false;
  }
  return true;
}

bool Unreserved(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

void AppendPercentEncoded(std::string& out, const std::string& s) {
  static const char hex[] = "0123456789ABCDEF";
  for (unsigned char c : s) {
    if (Unreserved(c)) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
}

// RFC 4648 section 5 (URL- and filename-safe alphabet), with padding; the
// empty string as "=", the Pushgateway's spelling of an empty value.
void AppendBase64Url(std::string& out, const std::string& s) {
  static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  if (s.empty()) {
    out += '=';
    return;
  }
  std::size_t i = 0;
  for (; i + 3 <= s.size(); i += 3) {
    const unsigned v = static_cast<unsigned char>(s[i]) << 16 | static_cast<unsigned char>(s[i + 1]) << 8 |
                       static_cast<unsigned char>(s[i + 2]);
    out += alphabet[v >> 18 & 63];
    out += alphabet[v >> 12 & 63];
    out += alphabet[v >> 6 & 63];
    out += alphabet[v & 63];
  }
  const std::size_t rest = s.size() - i;
  if (rest > 0) {
    unsigned v = static_cast<unsigned char>(s[i]) << 16;
    if (rest == 2) v |= static_cast<unsigned char>(s[i + 1]) << 8;
    out += alphabet[v >> 18 & 63];
    out += alphabet[v >> 12 & 63];
    out += rest == 2 ? alphabet[v >> 6 & 63] : '=';
    out += '=';
  }
}

}  // namespace

bool AppendGroupingLabel(std::string& path, const std::string& name, const std::string& value) {
  if (!ValidLabelName(name)) return false;
  path += '/';
  path += name;
  // "." and ".." would be dot segments, which URL parsers remove.
  if (value.empty() || value == "." || value == ".." || value.find('/') != std::string::npos) {
    path += "@base64/";
    AppendBase64Url(path, value);
  } else {
    path += '/';
    AppendPercentEncoded(path, value);
  }
  return true;
}

bool AppendGroupingLabels(std::string& path, const Labels& labels) {
  for (const auto& label : labels) {
    if (!AppendGroupingLabel(path, label.first, label.second)) return false;
  }
  return true;
}

}  // namespace detail
}  // namespace prometheus
