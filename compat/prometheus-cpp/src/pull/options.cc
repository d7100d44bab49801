// SPDX-License-Identifier: MIT
// The Exposer's constructor arguments: civetweb's option vector, of which
// listening_ports and num_threads map onto the layer's server; every other
// option is refused by name (nothing is silently ignored).
#include <stdexcept>
#include <string>
#include <vector>

#include "internal.h"

namespace prometheus {
namespace detail {

namespace {
const char kPrefix[] = "prometheus::Exposer (pcpu layer): ";
}  // namespace

std::size_t ParseNumThreads(const std::string& value) {
  std::size_t n = 0;
  if (value.empty() || value.size() > 6) {
    throw std::invalid_argument(std::string(kPrefix) + "num_threads \"" + value +
                                "\" is not a number from 1 to 999999");
  }
  for (char c : value) {
    if (c < '0' || c > '9') {
      throw std::invalid_argument(std::string(kPrefix) + "num_threads \"" + value +
                                  "\" is not a number from 1 to 999999");
    }
    n = n * 10 + static_cast<std::size_t>(c - '0');
  }
  if (n == 0) {
    throw std::invalid_argument(std::string(kPrefix) + "num_threads must be at least 1");
  }
  return n;
}

ServerOptions ParseOptions(const std::vector<std::string>& options) {
  if (options.size() % 2 != 0) {
    throw std::invalid_argument(std::string(kPrefix) +
                                "the option vector must hold name, value pairs (odd length " +
                                std::to_string(options.size()) + ")");
  }
  ServerOptions out;
  bool have_ports = false, have_threads = false;
  for (std::size_t i = 0; i < options.size(); i += 2) {
    const std::string& name = options[i];
    const std::string& value = options[i + 1];
    bool* seen = nullptr;
    if (name == "listening_ports") {
      seen = &have_ports;
      out.listening_ports = value;
    } else if (name == "num_threads") {
      seen = &have_threads;
      out.num_threads = ParseNumThreads(value);
    } else {
      throw std::invalid_argument(std::string(kPrefix) + "civetweb option \"" + name +
                                  "\" has no equivalent on libmicrohttpd; the layer "
                                  "accepts listening_ports and num_threads only");
    }
    if (*seen) {
      throw std::invalid_argument(std::string(kPrefix) + "option \"" + name + "\" given twice");
    }
    *seen = true;
  }
  return out;
}

}  // namespace detail
}  // namespace prometheus
