// SPDX-License-Identifier: MIT
// prometheus::Exposer (prometheus-cpp 1.0.1's pull API) on the layer's
// server (server.cc), and the pull library's link guard.
#include "prometheus/exposer.h"

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "internal.h"

// The symbol every unit including a layer pull header refers to
// (prometheus/detail/pull_export.h); only this library defines it.
extern "C" {
extern __attribute__((visibility("default"))) const char
    pcpu_prometheus_pull_layer_headers_need_lpcpu_prometheus_pull;
const char pcpu_prometheus_pull_layer_headers_need_lpcpu_prometheus_pull = 0;
}

namespace prometheus {

namespace {
detail::ServerOptions Options(const std::string& bind_address, std::size_t num_threads) {
  if (num_threads == 0) {
    throw std::invalid_argument("prometheus::Exposer (pcpu layer): num_threads must be at least 1");
  }
  detail::ServerOptions o;
  o.listening_ports = bind_address;
  o.num_threads = num_threads;
  return o;
}

void NoCallbacks(const CivetCallbacks* callbacks) {
  if (callbacks != nullptr) {
    throw std::invalid_argument(
        "prometheus::Exposer (pcpu layer): CivetCallbacks are civetweb's and have no "
        "equivalent on libmicrohttpd; pass nullptr");
  }
}
}  // namespace

Exposer::Exposer(const std::string& bind_address, const std::size_t num_threads,
                 const CivetCallbacks* callbacks) {
  NoCallbacks(callbacks);
  server_.reset(new detail::ExposerServer(Options(bind_address, num_threads)));
}

Exposer::Exposer(std::vector<std::string> options, const CivetCallbacks* callbacks) {
  NoCallbacks(callbacks);
  server_.reset(new detail::ExposerServer(detail::ParseOptions(options)));
}

Exposer::~Exposer() = default;

void Exposer::RegisterCollectable(const std::weak_ptr<Collectable>& collectable,
                                  const std::string& uri) {
  server_->GetEndpoint(uri).RegisterCollectable(collectable);
}

void Exposer::RegisterAuth(std::function<bool(const std::string&, const std::string&)> authCB,
                           const std::string& realm, const std::string& uri) {
  server_->GetEndpoint(uri).RegisterAuth(std::move(authCB), realm);
}

void Exposer::RemoveCollectable(const std::weak_ptr<Collectable>& collectable,
                                const std::string& uri) {
  server_->GetEndpoint(uri).RemoveCollectable(collectable);
}

std::vector<int> Exposer::GetListeningPorts() const { return server_->ports(); }

}  // namespace prometheus
