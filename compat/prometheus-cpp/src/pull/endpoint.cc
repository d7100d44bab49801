// SPDX-License-Identifier: MIT
// One endpoint of an Exposer: its collectables, its authentication and its
// own exposer_* metrics, and the answer to one scrape. Works only through
// the core API's Collectable::Collect() and TextSerializer.
#include <algorithm>
#include <chrono>
#include <cstdlib>
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

Endpoint::Endpoint(std::string uri)
    : uri_(std::move(uri)),
      own_(std::make_shared<Registry>()),
      bytes_(BytesFamily(*own_).Add({})),
      scrapes_(ScrapesFamily(*own_).Add({})),
      latencies_(LatencyFamily(*own_).Add(
          {}, Summary::Quantiles{{0.5, 0.05}, {0.9, 0.01}, {0.99, 0.001}})) {
  collectables_.push_back(own_);
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
  auto auth = std::make_shared<const Auth>(Auth{std::move(f), realm});
  std::lock_guard<std::mutex> lock(mutex_);
  auth_ = std::move(auth);
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

HttpResponse Endpoint::Serve(const char* authorization, const char* accept_encoding) {
  const auto start = std::chrono::steady_clock::now();
  HttpResponse r;
  std::shared_ptr<const Auth> auth;
  std::vector<std::weak_ptr<Collectable>> collectables;
  std::vector<pcpu_registry*> registries;
  std::shared_lock<std::shared_timed_mutex> in_use(registries_in_use_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auth = auth_;
    collectables = collectables_;
    registries = registries_;
  }
  if (auth) {
    std::string user, password;
    if (!ParseBasicAuth(authorization, &user, &password) || !auth->check(user, password)) {
      r.status = 401;
      r.headers.emplace_back("WWW-Authenticate", "Basic realm=\"" + auth->realm + "\"");
      return r;
    }
  }
  std::vector<MetricFamily> families;
  for (const auto& w : collectables) {
    std::shared_ptr<Collectable> c = w.lock();
    if (!c) continue;
    std::vector<MetricFamily> some = c->Collect();
    families.insert(families.end(), std::make_move_iterator(some.begin()),
                    std::make_move_iterator(some.end()));
  }
  r.body = TextSerializer().Serialize(families);
  for (pcpu_registry* reg : registries) {
    char* text = nullptr;
    std::size_t len = 0;
    if (pcpu_registry_write(reg, PCPU_FORMAT_PROMETHEUS, &text, &len) != 0) {
      // The body would miss a registry's series: say so rather than
      // answer an incomplete scrape as if it were whole.
      r.status = 500;
      r.body = std::string("pcpu_registry_write: ") + pcpu_stats_error() + "\n";
      r.headers.clear();
      return r;
    }
    r.body.append(text, len);
    std::free(text);
  }
  in_use.unlock();
  r.headers.emplace_back("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
  r.headers.emplace_back("Vary", "Accept-Encoding");
  if (AcceptsGzip(accept_encoding)) {
    std::string gz;
    if (GzipCompress(r.body, &gz)) {
      r.body.swap(gz);
      r.headers.emplace_back("Content-Encoding", "gzip");
    }
  }
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  latencies_.Observe(static_cast<double>(us));
  bytes_.Increment(static_cast<double>(r.body.size()));
  scrapes_.Increment();
  return r;
}

}  // namespace detail
}  // inline namespace pcpu_v0
}  // namespace prometheus
