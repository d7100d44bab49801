// SPDX-License-Identifier: MIT
// The Exposer's HTTP server: one libmicrohttpd daemon per listening socket
// (the exporter's HTTP stack, as tools/serve.c uses it), each with its own
// threads, dispatching GET and HEAD by exact path to the endpoints.
#include <microhttpd.h>
#include <string.h>

#include <exception>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "internal.h"

namespace prometheus {
inline namespace pcpu_v0 {
namespace detail {

namespace {
// Seconds an idle connection is kept (civetweb's request_timeout_ms is 30 s).
const unsigned kConnectionTimeout = 30;

MHD_Result Queue(MHD_Connection* conn, const HttpResponse& r) {
  MHD_Response* resp = MHD_create_response_from_buffer(
      r.body.size(), const_cast<char*>(r.body.data()), MHD_RESPMEM_MUST_COPY);
  if (resp == nullptr) return MHD_NO;
  for (const auto& h : r.headers) {
    if (MHD_add_response_header(resp, h.first.c_str(), h.second.c_str()) != MHD_YES) {
      MHD_destroy_response(resp);
      return MHD_NO;
    }
  }
  MHD_Result rc = MHD_queue_response(conn, r.status, resp);
  MHD_destroy_response(resp);
  return rc;
}

HttpResponse Plain(unsigned status, const char* text) {
  HttpResponse r;
  r.status = status;
  r.body = text;
  r.headers.emplace_back("Content-Type", "text/plain; charset=utf-8");
  return r;
}

// libmicrohttpd's request callback: C, so nothing may escape it.
MHD_Result OnRequest(void* cls, MHD_Connection* conn, const char* url, const char* method,
                     const char*, const char*, size_t* upload_size, void** state) {
  // The first call comes with the headers alone: answering then would make
  // libmicrohttpd close the connection (a body may follow), so the answer
  // waits for the request's end. A body (none expected) is skipped.
  static int request_seen;
  if (*state == nullptr) {
    *state = &request_seen;
    return MHD_YES;
  }
  if (*upload_size != 0) {
    *upload_size = 0;
    return MHD_YES;
  }
  try {
    auto* server = static_cast<ExposerServer*>(cls);
    Endpoint* ep = server->FindEndpoint(url);
    if (ep == nullptr) return Queue(conn, Plain(MHD_HTTP_NOT_FOUND, "Not Found\n"));
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
      HttpResponse r = Plain(MHD_HTTP_METHOD_NOT_ALLOWED, "Method Not Allowed\n");
      r.headers.emplace_back(MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
      return Queue(conn, r);
    }
    return Queue(conn, ep->Serve(
                           MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                       MHD_HTTP_HEADER_AUTHORIZATION),
                           MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                       MHD_HTTP_HEADER_ACCEPT_ENCODING)));
  } catch (...) {
    try {
      return Queue(conn, Plain(MHD_HTTP_INTERNAL_SERVER_ERROR, "Internal Server Error\n"));
    } catch (...) {
      return MHD_NO;  // libmicrohttpd closes the connection
    }
  }
}
}  // namespace

ExposerServer::ExposerServer(const ServerOptions& options) {
  std::vector<ListenAddress> addresses = ParseListeningPorts(options.listening_ports);
  try {
    for (const ListenAddress& a : addresses) {
      int port = 0;
      int fd = OpenListenSocket(a, &port);
      std::vector<MHD_OptionItem> opts{
          {MHD_OPTION_LISTEN_SOCKET, fd, nullptr},
          {MHD_OPTION_CONNECTION_TIMEOUT, static_cast<intptr_t>(kConnectionTimeout), nullptr},
      };
      if (options.num_threads > 1) {  // 1: the daemon's own thread alone
        opts.push_back({MHD_OPTION_THREAD_POOL_SIZE, static_cast<intptr_t>(options.num_threads), nullptr});
      }
      opts.push_back({MHD_OPTION_END, 0, nullptr});
      // No MHD_USE_ERROR_LOG: the library never prints.
      MHD_Daemon* d = MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD, 0, nullptr, nullptr, &OnRequest,
                                       this, MHD_OPTION_ARRAY, opts.data(), MHD_OPTION_END);
      if (d == nullptr) {
        // libmicrohttpd may have closed fd already: it is not closed twice
        // here (a leaked descriptor on this rare path, never a wrong close).
        throw std::runtime_error("prometheus::Exposer (pcpu layer): cannot start the HTTP server on \"" +
                                 a.text + "\" (libmicrohttpd, " + std::to_string(options.num_threads) +
                                 " threads)");
      }
      daemons_.push_back(d);
      ports_.push_back(port);
    }
  } catch (...) {
    Stop();
    throw;
  }
}

ExposerServer::~ExposerServer() { Stop(); }

void ExposerServer::Stop() {
  // Closes each listening socket and joins the daemon's threads: no
  // request callback runs once this returns.
  for (MHD_Daemon* d : daemons_) MHD_stop_daemon(d);
  daemons_.clear();
}

Endpoint& ExposerServer::GetEndpoint(const std::string& uri) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& e : endpoints_) {
    if (e->uri() == uri) return *e;
  }
  endpoints_.push_back(std::unique_ptr<Endpoint>(new Endpoint(uri)));
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
