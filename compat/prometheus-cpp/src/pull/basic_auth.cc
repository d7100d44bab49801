// SPDX-License-Identifier: MIT
// HTTP basic authentication (RFC 7617): the user and password of an
// Authorization header, strict base64 (RFC 4648, padding optional).
#include <cstring>
#include <string>

#include "internal.h"

namespace prometheus {
inline namespace pcpu_v0 {
namespace detail {

namespace {
int Sextet(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

bool Base64Decode(const std::string& in, std::string* out) {
  std::size_t n = in.size();
  while (n > 0 && in[n - 1] == '=' && in.size() - n < 2) --n;  // up to 2 '='
  if (n % 4 == 1) return false;
  if (n != in.size() && in.size() % 4 != 0) return false;  // padding only to a quad
  out->clear();
  unsigned acc = 0;
  int bits = 0;
  for (std::size_t i = 0; i < n; ++i) {
    int v = Sextet(in[i]);
    if (v < 0) return false;
    acc = (acc << 6) | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return (acc & ((1u << bits) - 1)) == 0;  // no stray bits in the last sextet
}
}  // namespace

bool ParseBasicAuth(const char* header, std::string* user, std::string* password) {
  if (header == nullptr) return false;
  while (*header == ' ' || *header == '\t') ++header;
  if (strncasecmp(header, "Basic", 5) != 0 || (header[5] != ' ' && header[5] != '\t')) {
    return false;
  }
  header += 6;
  while (*header == ' ' || *header == '\t') ++header;
  std::string token(header);
  std::size_t end = token.find_last_not_of(" \t");
  token.erase(end == std::string::npos ? 0 : end + 1);
  std::string decoded;
  if (token.empty() || !Base64Decode(token, &decoded)) return false;
  std::size_t colon = decoded.find(':');
  if (colon == std::string::npos) return false;
  *user = decoded.substr(0, colon);
  *password = decoded.substr(colon + 1);
  return true;
}

}  // namespace detail
}  // inline namespace pcpu_v0
}  // namespace prometheus
