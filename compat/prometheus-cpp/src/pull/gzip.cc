// SPDX-License-Identifier: MIT
// gzip for scrapes that accept it (Accept-Encoding), with zlib.
#include <strings.h>
#include <zlib.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "internal.h"

namespace prometheus {
inline namespace pcpu_v0 {
namespace detail {

bool AcceptsGzip(const char* accept_encoding) {
  if (accept_encoding == nullptr) return false;
  // coding *( OWS ";" OWS param ), comma-separated; q=0 refuses a coding.
  std::string s(accept_encoding);
  std::size_t start = 0;
  while (start <= s.size()) {
    std::size_t comma = s.find(',', start);
    std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    std::size_t semi = item.find(';');
    std::string coding = item.substr(0, semi);
    std::size_t b = coding.find_first_not_of(" \t");
    std::size_t e = coding.find_last_not_of(" \t");
    coding = b == std::string::npos ? std::string() : coding.substr(b, e - b + 1);
    if (strcasecmp(coding.c_str(), "gzip") == 0 || strcasecmp(coding.c_str(), "x-gzip") == 0 ||
        coding == "*") {
      bool refused = false;
      if (semi != std::string::npos) {
        std::size_t q = item.find("q=", semi);
        if (q == std::string::npos) q = item.find("Q=", semi);
        if (q != std::string::npos) refused = std::strtod(item.c_str() + q + 2, nullptr) <= 0.0;
      }
      if (!refused) return true;
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return false;
}

bool GzipCompress(const std::string& in, std::string* out) {
  if (in.size() > 0x7fffffffu) return false;  // zlib counts in uInt
  z_stream zs{};
  // 15 window bits + 16: a gzip header and trailer instead of zlib's.
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return false;
  }
  out->resize(deflateBound(&zs, static_cast<uLong>(in.size())) + 32);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(&(*out)[0]);
  zs.avail_out = static_cast<uInt>(out->size());
  int rc = deflate(&zs, Z_FINISH);
  out->resize(zs.total_out);
  deflateEnd(&zs);
  return rc == Z_STREAM_END;
}

}  // namespace detail
}  // inline namespace pcpu_v0
}  // namespace prometheus
