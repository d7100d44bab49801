// SPDX-License-Identifier: MIT
// prometheus::Gateway: what is pushed where (grouping keys, collectables,
// the synchronous and asynchronous forms); the requests are http_client.cc's.
#include "prometheus/gateway.h"

#include <algorithm>
#include <exception>
#include <functional>
#include <system_error>

#include "grouping_key.h"
#include "http_client.h"
#include "prometheus/metric_family.h"
#include "prometheus/text_serializer.h"

namespace prometheus {
namespace {

// What a grouping key the path cannot carry answers (gateway.h).
constexpr int kBadGroupingKey = -CURLE_URL_MALFORMAT;

bool Failed(int code) { return code < 100 || code >= 400; }

// One request of a push: its URL and body; not valid: kBadGroupingKey.
struct Request {
  std::string url;
  std::string body;
  bool valid;
};

int SendAll(detail::PushClient& client, detail::HttpMethod method, const std::vector<Request>& requests) {
  int result = 200;
  for (const auto& r : requests) {
    const int code = r.valid ? client.Perform(method, r.url, r.body) : kBadGroupingKey;
    if (Failed(code)) result = code;
  }
  return result;
}

// `task` on a thread of its own; where none can start, run now and return
// a ready future (the library never lets std::system_error escape here).
std::future<int> Launch(std::function<int()> task) {
  try {
    return std::async(std::launch::async, task);
  } catch (const std::system_error&) {
    std::promise<int> done;
    done.set_value(task());
    return done.get_future();
  }
}

}  // namespace

Gateway::Gateway(const std::string& host, const std::string& port, const std::string& jobname,
                 const Labels& labels, const std::string& username, const std::string& password)
    : jobUri_(host + ":" + port + "/metrics"),
      labelsValid_(detail::AppendGroupingLabels(labels_, labels)),
      client_(std::make_shared<detail::PushClient>(username, password)) {
  detail::AppendGroupingLabel(jobUri_, "job", jobname);  // "job" is a valid name
}

Gateway::~Gateway() = default;

Labels Gateway::GetInstanceLabel(std::string hostname) {
  if (hostname.empty()) return Labels{};
  return Labels{{"instance", std::move(hostname)}};
}

void Gateway::RegisterCollectable(const std::weak_ptr<Collectable>& collectable, const Labels* labels) {
  CollectableEntry entry{collectable, std::string(), true};
  if (labels) entry.valid = detail::AppendGroupingLabels(entry.labels, *labels);

  std::lock_guard<std::mutex> lock{mutex_};
  collectables_.erase(std::remove_if(collectables_.begin(), collectables_.end(),
                                     [](const CollectableEntry& e) { return e.collectable.expired(); }),
                      collectables_.end());
  collectables_.push_back(std::move(entry));
}

int Gateway::Push() { return push(detail::HttpMethod::Post); }

int Gateway::PushAdd() { return push(detail::HttpMethod::Put); }

std::future<int> Gateway::AsyncPush() { return async_push(detail::HttpMethod::Post); }

std::future<int> Gateway::AsyncPushAdd() { return async_push(detail::HttpMethod::Put); }

int Gateway::push(detail::HttpMethod method) {
  std::lock_guard<std::mutex> lock{mutex_};
  for (const auto& entry : collectables_) {
    const auto collectable = entry.collectable.lock();
    if (!collectable) continue;
    if (!labelsValid_ || !entry.valid) return kBadGroupingKey;
    const std::string body = TextSerializer().Serialize(collectable->Collect());
    const int code = client_->Perform(method, jobUri_ + labels_ + entry.labels, body);
    if (Failed(code)) return code;
  }
  return 200;
}

std::future<int> Gateway::async_push(detail::HttpMethod method) {
  auto requests = std::make_shared<std::vector<Request>>();
  {
    std::lock_guard<std::mutex> lock{mutex_};
    for (const auto& entry : collectables_) {
      const auto collectable = entry.collectable.lock();
      if (!collectable) continue;
      const bool valid = labelsValid_ && entry.valid;
      requests->push_back(Request{jobUri_ + labels_ + entry.labels,
                                  valid ? TextSerializer().Serialize(collectable->Collect()) : std::string(),
                                  valid});
    }
  }
  auto client = client_;
  return Launch([client, method, requests] { return SendAll(*client, method, *requests); });
}

int Gateway::Delete() { return client_->Perform(detail::HttpMethod::Delete, jobUri_, std::string()); }

int Gateway::DeleteForInstance() {
  if (!labelsValid_) return kBadGroupingKey;
  return client_->Perform(detail::HttpMethod::Delete, jobUri_ + labels_, std::string());
}

std::future<int> Gateway::AsyncDelete() { return async_delete(jobUri_, true); }

std::future<int> Gateway::AsyncDeleteForInstance() { return async_delete(jobUri_ + labels_, labelsValid_); }

std::future<int> Gateway::async_delete(const std::string& uri, bool valid) {
  auto client = client_;
  return Launch([client, uri, valid] {
    return valid ? client->Perform(detail::HttpMethod::Delete, uri, std::string()) : kBadGroupingKey;
  });
}

}  // namespace prometheus
