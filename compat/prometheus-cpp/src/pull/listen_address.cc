// SPDX-License-Identifier: MIT
// civetweb's listening_ports syntax ("8080", "+8080", "127.0.0.1:8080",
// "[::1]:0", "localhost:9100", comma-separated) parsed into addresses, and
// the listening sockets bound to them.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "internal.h"

namespace prometheus {
namespace detail {

namespace {
const char kPrefix[] = "prometheus::Exposer (pcpu layer): ";

[[noreturn]] void Bad(const std::string& item, const char* why) {
  throw std::runtime_error(std::string(kPrefix) + "listening port \"" + item + "\": " + why);
}

int ParsePort(const std::string& item, const std::string& s) {
  if (s.empty() || s.size() > 5) Bad(item, "the port is not a number from 0 to 65535");
  int port = 0;
  for (char c : s) {
    if (c < '0' || c > '9') Bad(item, "the port is not a number from 0 to 65535");
    port = port * 10 + (c - '0');
  }
  if (port > 65535) Bad(item, "the port is not a number from 0 to 65535");
  return port;
}

std::string Trim(const std::string& s) {
  std::size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return std::string();
  std::size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

ListenAddress Resolve(const std::string& item, const std::string& host, int port,
                      bool ipv6_only) {
  ListenAddress a;
  a.text = item;
  addrinfo hints{};
  hints.ai_family = ipv6_only ? AF_INET6 : AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    Bad(item, rc == EAI_SYSTEM ? std::strerror(errno) : gai_strerror(rc));
  }
  std::memcpy(&a.addr, res->ai_addr, res->ai_addrlen);
  a.len = res->ai_addrlen;
  freeaddrinfo(res);
  if (a.addr.ss_family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(&a.addr)->sin_port = htons(static_cast<uint16_t>(port));
  } else if (a.addr.ss_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(&a.addr)->sin6_port = htons(static_cast<uint16_t>(port));
  } else {
    Bad(item, "not an IPv4 or IPv6 address");
  }
  return a;
}

ListenAddress ParseOne(const std::string& item) {
  std::string s = item;
  if (s.empty()) Bad(item, "empty");
  char last = s.back();
  if (last == 's' || last == 'S') {
    throw std::invalid_argument(std::string(kPrefix) + "listening port \"" + item +
                                "\": SSL ports (civetweb's \"s\" suffix) are not supported");
  }
  if (last == 'r' || last == 'R') {
    throw std::invalid_argument(std::string(kPrefix) + "listening port \"" + item +
                                "\": redirect ports (civetweb's \"r\" suffix) are not supported");
  }
  if (s[0] == '[') {  // [IPV6]:PORT
    std::size_t close = s.find(']');
    if (close == std::string::npos || close + 1 >= s.size() || s[close + 1] != ':') {
      Bad(item, "expected [IPV6]:PORT");
    }
    std::string host = s.substr(1, close - 1);
    in6_addr probe;
    if (inet_pton(AF_INET6, host.c_str(), &probe) != 1) Bad(item, "not an IPv6 address");
    return Resolve(item, host, ParsePort(item, s.substr(close + 2)), true);
  }
  if (s[0] == '+') {  // +PORT: every address, IPv6 and IPv4
    ListenAddress a = Resolve(item, "::", ParsePort(item, s.substr(1)), true);
    a.dual_stack = true;
    return a;
  }
  std::size_t colon = s.rfind(':');
  if (colon == std::string::npos) {  // PORT: every IPv4 address (civetweb's)
    return Resolve(item, "0.0.0.0", ParsePort(item, s), false);
  }
  std::string host = s.substr(0, colon);
  if (host.empty()) Bad(item, "no host before the port");
  if (host.find(':') != std::string::npos) Bad(item, "an IPv6 address needs brackets: [IPV6]:PORT");
  return Resolve(item, host, ParsePort(item, s.substr(colon + 1)), false);
}
}  // namespace

std::vector<ListenAddress> ParseListeningPorts(const std::string& spec) {
  std::vector<ListenAddress> out;
  std::size_t start = 0;
  for (;;) {
    std::size_t comma = spec.find(',', start);
    std::string item =
        Trim(spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    out.push_back(ParseOne(item));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

int OpenListenSocket(const ListenAddress& a, int* port) {
  int fd = socket(a.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    int e = errno;
    throw std::runtime_error(std::string(kPrefix) + "cannot create a socket for \"" + a.text +
                             "\": " + std::strerror(e));
  }
  int one = 1, zero = 0;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (a.addr.ss_family == AF_INET6) {
    const int* v6only = a.dual_stack ? &zero : &one;
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, v6only, sizeof one);
  }
  sockaddr_storage bound{};
  socklen_t blen = sizeof bound;
  if (bind(fd, reinterpret_cast<const sockaddr*>(&a.addr), a.len) != 0 ||
      listen(fd, SOMAXCONN) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &blen) != 0) {
    int e = errno;
    close(fd);
    errno = e;  // for pcpu::exposer, which reports the errno value
    throw std::runtime_error(std::string(kPrefix) + "cannot listen on \"" + a.text + "\": " +
                             std::strerror(e));
  }
  *port = ntohs(bound.ss_family == AF_INET
                    ? reinterpret_cast<const sockaddr_in*>(&bound)->sin_port
                    : reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port);
  return fd;
}

}  // namespace detail
}  // namespace prometheus
