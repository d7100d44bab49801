// SPDX-License-Identifier: MIT
// The HTTP requests of libpcpu-prometheus-push on libcurl's easy API.
#include "http_client.h"

#include <mutex>
#include <new>
#include <utility>

namespace prometheus {
namespace detail {
namespace {

// Idle handles kept for reuse (their connections stay open).
constexpr std::size_t kIdleHandles = 4;

// curl_global_init() once per process and never cleaned up: a library
// cannot know when the program's other libcurl users are done with it.
bool CurlReady() noexcept {
  static std::once_flag once;
  static bool ready = false;
  try {
    std::call_once(once, [] { ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK; });
  } catch (...) {
    return false;
  }
  return ready;
}

// The answer's body, read and forgotten: a library does not print.
size_t Discard(char*, size_t size, size_t n, void*) { return size * n; }

}  // namespace

PushClient::PushClient(std::string username, std::string password)
    : username_(std::move(username)), password_(std::move(password)) {}

PushClient::~PushClient() {
  for (CURL* handle : idle_) curl_easy_cleanup(handle);
}

CURL* PushClient::Acquire() noexcept {
  {
    std::lock_guard<std::mutex> lock{mutex_};
    if (!idle_.empty()) {
      CURL* handle = idle_.back();
      idle_.pop_back();
      curl_easy_reset(handle);  // keeps its connection and caches
      return handle;
    }
  }
  return CurlReady() ? curl_easy_init() : nullptr;
}

void PushClient::Release(CURL* handle) noexcept {
  {
    std::lock_guard<std::mutex> lock{mutex_};
    if (idle_.size() < kIdleHandles) {
      try {
        idle_.push_back(handle);
        return;
      } catch (...) {
      }
    }
  }
  curl_easy_cleanup(handle);
}

int PushClient::Perform(HttpMethod method, const std::string& url, const std::string& body) noexcept {
  CURL* c = Acquire();
  if (!c) return -CURLE_FAILED_INIT;
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: text/plain; version=0.0.4; charset=utf-8");
  curl_slist* more = headers ? curl_slist_append(headers, "Expect:") : nullptr;  // no 100-continue wait
  if (!more) {
    curl_slist_free_all(headers);
    Release(c);
    return -CURLE_OUT_OF_MEMORY;
  }
  headers = more;
  CURLcode rc = curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  if (rc == CURLE_OK) rc = curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  if (rc == CURLE_OK) {
    curl_easy_setopt(c, CURLOPT_DEFAULT_PROTOCOL, "http");
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, Discard);
    if (!username_.empty()) {
      curl_easy_setopt(c, CURLOPT_HTTPAUTH, static_cast<long>(CURLAUTH_BASIC));
      curl_easy_setopt(c, CURLOPT_USERNAME, username_.c_str());
      curl_easy_setopt(c, CURLOPT_PASSWORD, password_.c_str());
    }
    switch (method) {
      case HttpMethod::Put:
      case HttpMethod::Post:
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
        if (method == HttpMethod::Put) curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "PUT");
        break;
      case HttpMethod::Delete:
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "DELETE");
        break;
    }
    rc = curl_easy_perform(c);
  }
  long status = 0;
  if (rc == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, static_cast<curl_slist*>(nullptr));
  curl_slist_free_all(headers);
  Release(c);
  return rc == CURLE_OK ? static_cast<int>(status) : -static_cast<int>(rc);
}

}  // namespace detail
}  // namespace prometheus
