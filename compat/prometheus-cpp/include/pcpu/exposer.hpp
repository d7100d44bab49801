// SPDX-License-Identifier: MIT
/**
 * @file pcpu/exposer.hpp
 * Serving pcpu registries over HTTP from inside the process, for programs
 * written with pcpu.hpp: the prometheus-cpp layer's pull server
 * (libpcpu-prometheus-pull, libmicrohttpd), whose endpoints write each
 * registry with pcpu_registry_write() -- pcpu's own exposition, nothing
 * converted. Build with `pkg-config --cflags --libs pcpu-prometheus-pull`
 * (CMake: pcpu::prometheus-pull).
 *
 *     pcpu::registry reg;
 *     auto hits = reg.counter_family("hits").make().series();
 *     pcpu::exposer http("127.0.0.1:9100");   // or ":0", then http.ports()
 *     http.serve(reg);                       // GET /metrics
 *
 * Reading a registry from another process instead: registry::publish()
 * and `pcpustat serve`, which needs no HTTP server in the program.
 */
#ifndef PCPU_EXPOSER_HPP
#define PCPU_EXPOSER_HPP

#include <pcpu/pcpu.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace prometheus {
namespace detail {
class ExposerServer;
} // namespace detail
} // namespace prometheus

namespace pcpu {

/**
 * An HTTP server answering GET and HEAD at each URI given to serve() with
 * the Prometheus text format (0.0.4) of the registries served there, in
 * the order given, gzipped when the client accepts it; other paths answer
 * 404, other methods 405. Requests are served by the server's own threads,
 * each calling pcpu_registry_write() (thread-safe). Not copyable or
 * movable; the destructor stops the server and waits for requests in
 * progress.
 */
class __attribute__((visibility("default"))) exposer {
public:
	/**
	 * Listens on `bind_address`: "HOST:PORT", "[IPV6]:PORT", "PORT" (all
	 * IPv4 addresses) or a comma-separated list of them; port 0 takes a
	 * free port (ports() says which). `num_threads` (>= 1) threads serve
	 * each address. Throws pcpu::error (EINVAL: an address that does not
	 * parse or num_threads 0; EADDRINUSE, EACCES...: binding failed, with
	 * the system's message). Without exceptions: see create().
	 */
	explicit exposer(const std::string &bind_address, std::size_t num_threads = 2);
	/** create() for -fno-exceptions programs: the server, or null with
	 * the failure in pcpu::last_error() and errno. */
	static std::unique_ptr<exposer> create(const std::string &bind_address, std::size_t num_threads = 2) noexcept;
	~exposer();
	exposer(const exposer &) = delete;
	exposer &operator=(const exposer &) = delete;

	/** Serves `reg` at `uri` from the next request on; the registry must
	 * stay alive until remove() or the exposer's end. Serving one twice
	 * writes it twice. Thread-safe. */
	void serve(const registry &reg, const std::string &uri = "/metrics") { serve(reg.get(), uri); }
	void serve(pcpu_registry_t *reg, const std::string &uri = "/metrics");
	/** Stops serving `reg` at `uri` (when a request in progress has
	 * finished with it: the registry may be destroyed after). */
	void remove(const registry &reg, const std::string &uri = "/metrics") { remove(reg.get(), uri); }
	void remove(pcpu_registry_t *reg, const std::string &uri = "/metrics");
	/** The ports listened on, in the order of the addresses. */
	std::vector<int> ports() const;

private:
	exposer() = default;
	std::unique_ptr<prometheus::detail::ExposerServer> server_;
};

} // namespace pcpu

#endif // PCPU_EXPOSER_HPP
