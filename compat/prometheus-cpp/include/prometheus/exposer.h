// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 compatibility layer, pull side
// (compat/prometheus-cpp, libpcpu-prometheus-pull): prometheus::Exposer, an
// HTTP server that answers scrapes of registries, on libmicrohttpd instead
// of civetweb.
#pragma once

#include <cstddef>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "prometheus/collectable.h"
#include "prometheus/detail/pull_export.h"

// civetweb's types appear in prometheus-cpp's constructor signatures only;
// the layer has no civetweb (see the constructors for what it accepts).
class CivetServer;
struct CivetCallbacks;

namespace prometheus {

namespace detail {
class ExposerServer;
}  // namespace detail

/// An HTTP server serving the text exposition of registered collectables.
///
/// Each endpoint (a URI, "/metrics" by default) answers GET and HEAD with
/// 200, `Content-Type: text/plain; charset=utf-8` and every family of its
/// collectables (the endpoint's own exposer_transferred_bytes_total,
/// exposer_scrapes_total and exposer_request_latencies first), gzipped when
/// the request accepts gzip. Other paths answer 404, other methods 405, an
/// endpoint with RegisterAuth() 401 with `WWW-Authenticate: Basic` until the
/// credentials pass. An endpoint answers its exact path, a query string
/// ignored (civetweb also hands it "<uri>/sub/paths"; here they are 404).
/// Requests are served by the server's
/// threads (num_threads, per listening socket); each calls the collectables'
/// Collect(), which must therefore be thread-safe (the layer's Registry and
/// Family are).
///
/// The library never prints and never aborts: errors are exceptions thrown
/// to the caller (constructors, registration), and failures while serving a
/// request (a Collect() or auth callback that throws) answer it with 500.
class PROMETHEUS_CPP_PULL_EXPORT Exposer {
 public:
  /// Listens on `bind_address`, civetweb's listening_ports syntax: a
  /// comma-separated list of "PORT" (0.0.0.0), "+PORT" ([::], IPv4 too),
  /// "HOST:PORT" and "[IPV6]:PORT"; port 0 picks a free port
  /// (GetListeningPorts() says which). `num_threads` (>= 1) threads serve
  /// each listening socket. `callbacks` must be null: civetweb's callbacks
  /// have no equivalent here.
  /// Throws std::runtime_error when an address does not parse or cannot be
  /// bound, or the server does not start; std::invalid_argument for SSL
  /// ("PORTs") or redirect ("PORTr") ports, num_threads 0 or non-null
  /// callbacks. Cost: one socket per address, num_threads threads each.
  explicit Exposer(const std::string& bind_address,
                   const std::size_t num_threads = 2,
                   const CivetCallbacks* callbacks = nullptr);

  /// Civetweb's option vector: name, value, name, value... The names that
  /// map are "listening_ports" (as bind_address above; "8080" when absent,
  /// civetweb's default) and "num_threads" (a positive decimal; 2 when
  /// absent). Any other name (civetweb's document_root, ssl_certificate,
  /// access_control_list...), an odd number of strings or a name given
  /// twice throws std::invalid_argument naming it: nothing is ignored.
  /// Otherwise as the constructor above.
  explicit Exposer(std::vector<std::string> options,
                   const CivetCallbacks* callbacks = nullptr);

  /// Name/value pairs, Exposer({{"listening_ports", "8080"}}), do not
  /// compile: the option vector is flat ({"listening_ports", "8080"}), and
  /// without this overload each braced pair would become one std::string
  /// made of the bytes between its two string literals (std::string's
  /// iterator-pair constructor: undefined behaviour; issue 50).
  template <typename P = void>
  explicit Exposer(std::initializer_list<std::pair<std::string, std::string>>,
                   const CivetCallbacks* = nullptr)
      : Exposer(std::vector<std::string>{}) {
    static_assert(!std::is_same<P, P>::value,
                  "prometheus::Exposer takes civetweb's options as a flat list: "
                  "{\"listening_ports\", \"8080\"}, not name/value pairs");
  }

  /// Stops the server: closes the listening sockets and waits for requests
  /// in progress to finish (no Collect() or auth callback runs after it
  /// returns). Not concurrently with the other members.
  ~Exposer();

  Exposer(const Exposer&) = delete;
  Exposer(Exposer&&) = delete;
  Exposer& operator=(const Exposer&) = delete;
  Exposer& operator=(Exposer&&) = delete;

  /// Serves `collectable` at `uri` (created on first use, with its own
  /// exposer_* metrics) from the next request on. Only a weak reference is
  /// kept: a collectable destroyed by its owner just disappears from the
  /// output. Registering one twice serves it twice. Thread-safe, also
  /// while requests are served. Throws std::bad_alloc only. Cost: a lock,
  /// linear in the endpoints and in the endpoint's collectables.
  void RegisterCollectable(const std::weak_ptr<Collectable>& collectable,
                           const std::string& uri = std::string("/metrics"));

  /// Requires HTTP basic authentication at `uri` (created on first use):
  /// `authCB(user, password)` is called, on a server thread, for each
  /// request that carries Basic credentials; a request without them, with
  /// malformed ones, or refused by authCB answers 401 with
  /// `WWW-Authenticate: Basic realm="<realm>"`. A second call replaces the
  /// first. The callback must be thread-safe when num_threads > 1; if it
  /// throws the request answers 500. Thread-safe. Throws
  /// std::invalid_argument if `realm` contains '"', a backslash, CR or LF (it
  /// would break the header), or authCB is empty. Cost: a lock.
  void RegisterAuth(
      std::function<bool(const std::string&, const std::string&)> authCB,
      const std::string& realm = "Prometheus-cpp Exporter",
      const std::string& uri = std::string("/metrics"));

  /// Stops serving `collectable` at `uri` (every registration of it; an
  /// expired `collectable` removes every expired one). The endpoint itself
  /// stays (it then serves its exposer_* metrics). Thread-safe; a request
  /// in progress may still include it. Cost: a lock, linear in the
  /// endpoint's collectables. Throws std::bad_alloc only.
  void RemoveCollectable(const std::weak_ptr<Collectable>& collectable,
                         const std::string& uri = std::string("/metrics"));

  /// The ports actually listened on, in the order of the bind addresses
  /// (so port 0 shows the one the system picked). Thread-safe, no system
  /// call.
  std::vector<int> GetListeningPorts() const;

 private:
  std::unique_ptr<detail::ExposerServer> server_;
};

}  // namespace prometheus
