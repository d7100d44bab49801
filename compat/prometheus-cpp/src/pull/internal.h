// SPDX-License-Identifier: MIT
// libpcpu-prometheus-pull's internals (src/pull): what the files of the
// Exposer share. Not installed.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/registry.h"
#include "prometheus/summary.h"

#include <pcpu/exporter.h>

namespace prometheus {
inline namespace pcpu_v0 {
namespace detail {

// ---- options.cc: the constructors' arguments --------------------------------
struct ServerOptions {
  std::string listening_ports = "8080";  // civetweb's default
  std::size_t num_threads = 2;
};
/// civetweb's option vector (name, value, ...) -> ServerOptions; throws
/// std::invalid_argument for what does not map.
ServerOptions ParseOptions(const std::vector<std::string>& options);
/// num_threads as civetweb's option string gives it; invalid_argument.
std::size_t ParseNumThreads(const std::string& value);

// ---- listen_address.cc: listening_ports -> bound sockets -----------------------
struct ListenAddress {
  sockaddr_storage addr{};
  socklen_t len = 0;
  bool dual_stack = false;  // "+PORT": [::] with IPv4 too
  std::string text;         // as given, for messages
};
/// civetweb's listening_ports syntax -> addresses; runtime_error for what
/// does not parse or resolve, invalid_argument for SSL/redirect ports.
std::vector<ListenAddress> ParseListeningPorts(const std::string& spec);
/// A listening, non-blocking, close-on-exec socket bound to `a`; its port
/// in *port. runtime_error (with errno's text) on failure.
int OpenListenSocket(const ListenAddress& a, int* port);

// ---- endpoint.cc: one URI, a source of libpcpu-exporter ---------------------------
class Endpoint {
 public:
  using AuthFunc = std::function<bool(const std::string&, const std::string&)>;
  /// Serves `uri` on `exporter` (a source of its own, text format only:
  /// TextSerializer writes nothing else); runtime_error if it cannot.
  Endpoint(pcpu_exporter_t* exporter, std::string uri);
  const std::string& uri() const { return uri_; }
  void RegisterCollectable(const std::weak_ptr<Collectable>& c);
  void RemoveCollectable(const std::weak_ptr<Collectable>& c);
  void RegisterAuth(AuthFunc f, const std::string& realm);
  /// pcpu::exposer's registries: written with pcpu_registry_write() after
  /// the collectables. RemoveRegistry() returns once no request uses it.
  void RegisterRegistry(pcpu_registry* reg);
  void RemoveRegistry(pcpu_registry* reg);

 private:
  static void Source(void* self, pcpu_exporter_scrape* s) noexcept;
  static int CheckAuth(void* self, const char* user, const char* password) noexcept;
  void Serve(pcpu_exporter_scrape* s);

  pcpu_exporter_t* const exporter_;
  const std::string uri_;
  std::shared_ptr<Registry> own_;  // the exposer_* metrics
  Counter& bytes_;
  Counter& scrapes_;
  Summary& latencies_;
  std::mutex mutex_;
  std::vector<std::weak_ptr<Collectable>> collectables_;
  std::vector<pcpu_registry*> registries_;
  std::shared_ptr<const AuthFunc> auth_;
  // Held shared by requests while they write registries, exclusively by
  // RemoveRegistry() so that a removed registry may be destroyed at once.
  std::shared_timed_mutex registries_in_use_;
};

// ---- server.cc: libpcpu-exporter and the endpoints ---------------------------------
/// The HTTP side is libpcpu-exporter's (pcpu/exporter.h), the one
/// `pcpustat serve` uses: connection and memory limits, shedding idle and
/// slow clients, no request bodies, negotiation, gzip.
class ExposerServer {
 public:
  explicit ExposerServer(const ServerOptions& options);
  ~ExposerServer();
  ExposerServer(const ExposerServer&) = delete;
  ExposerServer& operator=(const ExposerServer&) = delete;
  /// The endpoint at `uri`, created if absent. Thread-safe.
  Endpoint& GetEndpoint(const std::string& uri);
  /// The endpoint at `uri`, or null. Thread-safe.
  Endpoint* FindEndpoint(const char* uri);
  const std::vector<int>& ports() const { return ports_; }

 private:
  pcpu_exporter_t* exporter_ = nullptr;
  std::vector<int> ports_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
};

}  // namespace detail
}  // inline namespace pcpu_v0
}  // namespace prometheus
