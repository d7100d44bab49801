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

struct MHD_Daemon;
struct pcpu_registry;

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

// ---- basic_auth.cc ---------------------------------------------------------------
/// The user and password of an "Authorization: Basic ..." value, or false
/// when it is absent (null), not Basic, or malformed.
bool ParseBasicAuth(const char* header, std::string* user, std::string* password);

// ---- gzip.cc -------------------------------------------------------------------------
/// Whether an Accept-Encoding value (or null) accepts gzip (q > 0).
bool AcceptsGzip(const char* accept_encoding);
/// `in` as a gzip member, or false (out unspecified) if zlib fails.
bool GzipCompress(const std::string& in, std::string* out);

// ---- endpoint.cc: one URI -------------------------------------------------------
struct HttpResponse {
  unsigned status = 200;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

class Endpoint {
 public:
  using AuthFunc = std::function<bool(const std::string&, const std::string&)>;
  explicit Endpoint(std::string uri);
  const std::string& uri() const { return uri_; }
  void RegisterCollectable(const std::weak_ptr<Collectable>& c);
  void RemoveCollectable(const std::weak_ptr<Collectable>& c);
  void RegisterAuth(AuthFunc f, const std::string& realm);
  /// pcpu::exposer's registries: written with pcpu_registry_write() after
  /// the collectables. RemoveRegistry() returns once no request uses it.
  void RegisterRegistry(pcpu_registry* reg);
  void RemoveRegistry(pcpu_registry* reg);
  /// Answers one GET/HEAD: the two header values may be null.
  HttpResponse Serve(const char* authorization, const char* accept_encoding);

 private:
  struct Auth {
    AuthFunc check;
    std::string realm;
  };
  const std::string uri_;
  std::shared_ptr<Registry> own_;  // the exposer_* metrics
  Counter& bytes_;
  Counter& scrapes_;
  Summary& latencies_;
  std::mutex mutex_;
  std::vector<std::weak_ptr<Collectable>> collectables_;
  std::vector<pcpu_registry*> registries_;
  std::shared_ptr<const Auth> auth_;
  // Held shared by requests while they write registries, exclusively by
  // RemoveRegistry() so that a removed registry may be destroyed at once.
  std::shared_timed_mutex registries_in_use_;
};

// ---- server.cc: the libmicrohttpd daemons and the endpoints ----------------------
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
  void Stop();
  std::vector<MHD_Daemon*> daemons_;
  std::vector<int> ports_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
};

}  // namespace detail
}  // inline namespace pcpu_v0
}  // namespace prometheus
