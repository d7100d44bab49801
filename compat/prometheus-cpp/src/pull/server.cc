// SPDX-License-Identifier: MIT
// The Exposer's HTTP server: libpcpu-exporter (pcpu/exporter.h), the one
// `pcpustat serve` and programs serving their own registry use -- its
// connection and memory limits, idle and slow clients shed, request bodies
// refused, negotiation and gzip -- on the sockets civetweb's
// listening_ports syntax names (listen_address.cc), each endpoint a source
// at its exact path (endpoint.cc).
#include <cerrno>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include "internal.h"

namespace prometheus {
inline namespace pcpu_v0 {
namespace detail {

namespace {
// Seconds an idle connection is kept (civetweb's request_timeout_ms is
// 30 s; the exporter's default is 10, and idle ones go sooner near the
// connection limit).
const unsigned kConnectionTimeout = 30;

[[noreturn]] void Fail(const std::string& what) {
  int err = errno;
  std::string msg = "prometheus::Exposer (pcpu layer): " + what + ": " + pcpu_exporter_error();
  if (err == ENOMEM) throw std::bad_alloc();
  errno = err;
  throw std::runtime_error(msg);
}
}  // namespace

ExposerServer::ExposerServer(const ServerOptions& options) {
  std::vector<ListenAddress> addresses = ParseListeningPorts(options.listening_ports);
  exporter_ = pcpu_exporter_new();
  if (exporter_ == nullptr) throw std::bad_alloc();
  try {
    if (options.num_threads > 1024) {
      throw std::invalid_argument("prometheus::Exposer (pcpu layer): num_threads " +
                                  std::to_string(options.num_threads) + " is over 1024");
    }
    if (pcpu_exporter_set_threads(exporter_, static_cast<unsigned>(options.num_threads)) != 0 ||
        pcpu_exporter_set_timeout(exporter_, kConnectionTimeout) != 0) {
      Fail("settings");
    }
    for (const ListenAddress& a : addresses) {
      int port = 0;
      int fd = OpenListenSocket(a, &port);
      if (pcpu_exporter_listen_fd(exporter_, fd) != 0) Fail("\"" + a.text + "\"");  // fd closed
      ports_.push_back(port);
    }
    // No log: the library never prints.
    if (pcpu_exporter_start(exporter_) != 0) {
      Fail("cannot start the HTTP server on \"" + options.listening_ports + "\" (" +
           std::to_string(options.num_threads) + " threads)");
    }
  } catch (...) {
    pcpu_exporter_free(exporter_);
    throw;
  }
}

ExposerServer::~ExposerServer() {
  // Closes the listening sockets and every connection, joins the threads:
  // no Collect() or auth callback runs once this returns; the endpoints go
  // after (members).
  pcpu_exporter_free(exporter_);
}

Endpoint& ExposerServer::GetEndpoint(const std::string& uri) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& e : endpoints_) {
    if (e->uri() == uri) return *e;
  }
  endpoints_.push_back(std::unique_ptr<Endpoint>(new Endpoint(exporter_, uri)));
  return *endpoints_.back();
}

Endpoint* ExposerServer::FindEndpoint(const char* uri) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& e : endpoints_) {
    if (e->uri() == uri) return e.get();
  }
  return nullptr;
}

}  // namespace detail
}  // inline namespace pcpu_v0
}  // namespace prometheus
