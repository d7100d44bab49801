// SPDX-License-Identifier: MIT
// pcpu::exposer (pcpu/exposer.hpp): the pull library's server serving pcpu
// registries, each written with pcpu_registry_write() (endpoint.cc), for
// programs written with pcpu.hpp.
#include "pcpu/exposer.hpp"

#include <cerrno>
#include <new>
#include <stdexcept>
#include <string>

#include "internal.h"

namespace pcpu {

namespace {
prometheus::detail::ServerOptions Options(const std::string& bind_address, std::size_t num_threads) {
  prometheus::detail::ServerOptions o;
  o.listening_ports = bind_address;
  o.num_threads = num_threads;
  return o;
}

// The server, or null with the failure recorded as pcpu.hpp reports set-up
// failures (pcpu::last_error(), errno): the system's errno for what the
// system refused, else EINVAL (what does not parse or resolve).
prometheus::detail::ExposerServer* Start(const std::string& bind_address, std::size_t num_threads,
                                         int* err, std::string* what) noexcept {
  if (num_threads == 0) {
    *err = EINVAL;
    *what = "pcpu::exposer: num_threads must be at least 1";
    return nullptr;
  }
  try {
    errno = 0;
    return new prometheus::detail::ExposerServer(Options(bind_address, num_threads));
  } catch (const std::invalid_argument& e) {
    *err = EINVAL;
    *what = e.what();
  } catch (const std::bad_alloc&) {
    *err = ENOMEM;
    *what = "pcpu::exposer: out of memory";
  } catch (const std::exception& e) {
    *err = errno ? errno : EINVAL;  // no system error: the address itself
    *what = e.what();
  }
  return nullptr;
}
}  // namespace

exposer::exposer(const std::string& bind_address, std::size_t num_threads) {
  int err = 0;
  std::string what;
  server_.reset(Start(bind_address, num_threads, &err, &what));
  if (!server_) detail::fail(err, what);
}

std::unique_ptr<exposer> exposer::create(const std::string& bind_address, std::size_t num_threads) noexcept {
  int err = 0;
  std::string what;
  std::unique_ptr<exposer> e(new (std::nothrow) exposer());
  if (!e) {
    err = ENOMEM;
    what = "pcpu::exposer: out of memory";
  } else {
    e->server_.reset(Start(bind_address, num_threads, &err, &what));
    if (e->server_) return e;
    e.reset();
  }
  failure& f = detail::last_failure_slot();
  f.code = err;
  try {
    f.what = what;
  } catch (...) {
  }
  errno = err;
  return nullptr;
}

exposer::~exposer() = default;

void exposer::serve(pcpu_registry_t* reg, const std::string& uri) {
  if (!reg) {
    detail::fail(EINVAL, "pcpu::exposer::serve: no registry");
    return;
  }
  server_->GetEndpoint(uri).RegisterRegistry(reg);
}

void exposer::remove(pcpu_registry_t* reg, const std::string& uri) {
  if (prometheus::detail::Endpoint* e = server_->FindEndpoint(uri.c_str())) e->RemoveRegistry(reg);
}

std::vector<int> exposer::ports() const { return server_->ports(); }

}  // namespace pcpu
