// SPDX-License-Identifier: MIT
// One endpoint of an Exposer: a source of libpcpu-exporter at its path, with
// its collectables, its authentication (the exporter's per-source password
// check) and its own exposer_* metrics, and the answer to one scrape. Works
// only through the core API's Collectable::Collect() and TextSerializer.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <pcpu/stats.h>
#include <pcpu/expose.h>

#include "internal.h"
#include "prometheus/metric_family.h"
#include "prometheus/text_serializer.h"

namespace prometheus {
inline namespace pcpu_v0 {
namespace detail {

namespace {
Family<Counter>& BytesFamily(Registry& r) {
  return BuildCounter()
      .Name("exposer_transferred_bytes_total")
      .Help("Transferred bytes to metrics services")
      .Register(r);
}
Family<Counter>& ScrapesFamily(Registry& r) {
  return BuildCounter()
      .Name("exposer_scrapes_total")
      .Help("Number of times metrics were scraped")
      .Register(r);
}
Family<Summary>& LatencyFamily(Registry& r) {
  return BuildSummary()
      .Name("exposer_request_latencies")
      .Help("Latencies of serving scrape requests, in microseconds")
      .Register(r);
}
}  // namespace

Endpoint::Endpoint(pcpu_exporter_t* exporter, std::string uri)
    : exporter_(exporter),
      uri_(std::move(uri)),
      own_(std::make_shared<Registry>()),
      bytes_(BytesFamily(*own_).Add({})),
      scrapes_(ScrapesFamily(*own_).Add({})),
      latencies_(LatencyFamily(*own_).Add(
          {}, Summary::Quantiles{{0.5, 0.05}, {0.9, 0.01}, {0.99, 0.001}})) {
  collectables_.push_back(own_);
  // The text format only: what TextSerializer writes (and registries
  // written after it must match).
  if (pcpu_exporter_add_source(exporter_, uri_.c_str(), 0, PCPU_EXPORTER_FORMAT(PCPU_FORMAT_PROMETHEUS),
                               &Endpoint::Source, this) != 0) {
    if (errno == ENOMEM) throw std::bad_alloc();
    throw std::invalid_argument(std::string("prometheus::Exposer (pcpu layer): cannot serve \"") + uri_ +
                                "\": " + pcpu_exporter_error());
  }
}

void Endpoint::RegisterCollectable(const std::weak_ptr<Collectable>& c) {
  std::lock_guard<std::mutex> lock(mutex_);
  collectables_.erase(std::remove_if(collectables_.begin(), collectables_.end(),
                                     [](const std::weak_ptr<Collectable>& w) { return w.expired(); }),
                      collectables_.end());
  collectables_.push_back(c);
}

void Endpoint::RemoveCollectable(const std::weak_ptr<Collectable>& c) {
  std::shared_ptr<Collectable> target = c.lock();
  std::lock_guard<std::mutex> lock(mutex_);
  collectables_.erase(std::remove_if(collectables_.begin(), collectables_.end(),
                                     [&target](const std::weak_ptr<Collectable>& w) {
                                       return w.lock() == target;
                                     }),
                      collectables_.end());
}

void Endpoint::RegisterAuth(AuthFunc f, const std::string& realm) {
  if (!f) throw std::invalid_argument("prometheus::Exposer::RegisterAuth: empty callback");
  if (realm.find_first_of("\"\r\n\\") != std::string::npos) {
    throw std::invalid_argument(
        "prometheus::Exposer::RegisterAuth: the realm may not contain '\"', '\\', CR or LF");
  }
  auto auth = std::make_shared<const AuthFunc>(std::move(f));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auth_ = std::move(auth);
  }
  if (pcpu_exporter_set_source_auth(exporter_, uri_.c_str(), &Endpoint::CheckAuth, this, realm.c_str()) != 0) {
    if (errno == ENOMEM) throw std::bad_alloc();
    throw std::invalid_argument(std::string("prometheus::Exposer::RegisterAuth: ") + pcpu_exporter_error());
  }
}

int Endpoint::CheckAuth(void* self, const char* user, const char* password) noexcept {
  auto* ep = static_cast<Endpoint*>(self);
  try {
    std::shared_ptr<const AuthFunc> auth;
    {
      std::lock_guard<std::mutex> lock(ep->mutex_);
      auth = ep->auth_;
    }
    return auth && (*auth)(user, password) ? 1 : 0;
  } catch (...) {
    return -1;  // 500: the callback failed, not the client
  }
}

void Endpoint::Source(void* self, pcpu_exporter_scrape* s) noexcept {
  try {
    static_cast<Endpoint*>(self)->Serve(s);
  } catch (...) {
    std::free(s->body);
    s->body = nullptr;
    s->len = 0;
    s->status = 500;
    std::snprintf(s->message, sizeof s->message, "Internal Server Error");
  }
}

void Endpoint::RegisterRegistry(pcpu_registry* reg) {
  std::lock_guard<std::mutex> lock(mutex_);
  registries_.push_back(reg);
}

void Endpoint::RemoveRegistry(pcpu_registry* reg) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    registries_.erase(std::remove(registries_.begin(), registries_.end(), reg), registries_.end());
  }
  // Wait for the requests that may still be writing it.
  std::unique_lock<std::shared_timed_mutex> wait(registries_in_use_);
}

void Endpoint::Serve(pcpu_exporter_scrape* s) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::weak_ptr<Collectable>> collectables;
  std::vector<pcpu_registry*> registries;
  std::shared_lock<std::shared_timed_mutex> in_use(registries_in_use_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    collectables = collectables_;
    registries = registries_;
  }
  std::vector<MetricFamily> families;
  for (const auto& w : collectables) {
    std::shared_ptr<Collectable> c = w.lock();
    if (!c) continue;
    std::vector<MetricFamily> some = c->Collect();
    families.insert(families.end(), std::make_move_iterator(some.begin()),
                    std::make_move_iterator(some.end()));
  }
  std::string body = TextSerializer().Serialize(families);
  for (pcpu_registry* reg : registries) {
    char* text = nullptr;
    std::size_t len = 0;
    if (pcpu_registry_write(reg, PCPU_FORMAT_PROMETHEUS, &text, &len) != 0) {
      // The body would miss a registry's series: say so rather than
      // answer an incomplete scrape as if it were whole.
      s->status = 500;
      std::snprintf(s->message, sizeof s->message, "pcpu_registry_write: %s", pcpu_stats_error());
      return;
    }
    body.append(text, len);
    std::free(text);
  }
  in_use.unlock();
  s->body = static_cast<char*>(std::malloc(body.size() ? body.size() : 1));
  if (s->body == nullptr) throw std::bad_alloc();
  std::memcpy(s->body, body.data(), body.size());
  s->len = body.size();
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  latencies_.Observe(static_cast<double>(us));
  // The exposition's bytes, before the exporter compresses them.
  bytes_.Increment(static_cast<double>(body.size()));
  scrapes_.Increment();
}

}  // namespace detail
}  // inline namespace pcpu_v0
}  // namespace prometheus
