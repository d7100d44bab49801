// SPDX-License-Identifier: MIT
// The HTTP requests of libpcpu-prometheus-push, over libcurl's easy API as
// tools/push_http.c uses it (internal).
#pragma once

#include <curl/curl.h>

#include <mutex>
#include <string>
#include <vector>

#include "prometheus/detail/http_method.h"

namespace prometheus {
namespace detail {

/// Sends requests to a Pushgateway. Thread-safe: concurrent requests use
/// easy handles of their own; idle handles are kept (a few) so that
/// successive pushes reuse their connection.
class PushClient {
 public:
  /// Basic authentication with `password` when `username` is not empty.
  PushClient(std::string username, std::string password);
  ~PushClient();
  PushClient(const PushClient&) = delete;
  PushClient& operator=(const PushClient&) = delete;

  /// One request with `body` (text format 0.0.4; none for Delete). Returns
  /// the HTTP status, or the negated CURLcode when no answer came. Never
  /// throws, never prints (the answer's body is discarded).
  int Perform(HttpMethod method, const std::string& url, const std::string& body) noexcept;

 private:
  CURL* Acquire() noexcept;
  void Release(CURL* handle) noexcept;

  std::string username_;
  std::string password_;
  std::mutex mutex_;
  std::vector<CURL*> idle_;
};

}  // namespace detail
}  // namespace prometheus
