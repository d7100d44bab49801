// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 push compatibility layer (compat/prometheus-cpp).
//
// prometheus::Gateway pushes collectables to a Prometheus Pushgateway in the
// text format 0.0.4, over libcurl, as prometheus-cpp 1.0.1's push library
// does; link libpcpu-prometheus-push (pkg-config pcpu-prometheus-push, CMake
// pcpu::prometheus-push).
//
// Every request goes to <host>:<port>/metrics/job/<job>[/<name>/<value>...]
// (the grouping key): the constructor's labels, then the collectable's own.
// A job or label value that is empty or holds a '/' travels base64url
// encoded (<name>@base64/<value>, the Pushgateway's encoding; "=" for an
// empty value), any other byte outside [A-Za-z0-9._~-] percent-encoded, so
// that the Pushgateway always sees exactly the grouping key given
// (prometheus-cpp 1.0.1 pastes the strings into the path as they are). A
// label name that is not a valid Prometheus label name cannot travel in the
// path: every request that would carry it fails with -3 (-CURLE_URL_MALFORMAT)
// without contacting the Pushgateway.
//
// Return codes, as prometheus-cpp 1.0.1 reports them: the HTTP status of
// the Pushgateway's answer, or a negated CURLcode (curl/curl.h) when no
// answer came (-7 CURLE_COULDNT_CONNECT, -6 CURLE_COULDNT_RESOLVE_HOST,
// -28 CURLE_OPERATION_TIMEDOUT, ...). Nothing is printed (the answer's
// body is discarded), nothing throws on a network failure, nothing aborts.
//
// Push() uses POST and PushAdd() PUT, as prometheus-cpp does (1.0.1 and
// every later release), so that a program moved to the layer keeps what its
// groups hold: a POST replaces only the metric names it sends, so the
// collectables a Gateway pushes to one group, one request each, all stay
// there; a PUT replaces the whole group, so PushAdd() leaves the group with
// the last collectable's metrics. The Pushgateway's own naming (and the Go,
// Java and Python clients') is the other way round: PUT for "push".
#pragma once

#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "prometheus/collectable.h"
#include "prometheus/detail/http_method.h"
#include "prometheus/detail/push_export.h"
#include "prometheus/labels.h"

namespace prometheus {

namespace detail {
class PushClient;
}

/// A Pushgateway and the collectables pushed to it. Thread-safe: every
/// member may be called from any thread; the synchronous pushes of one
/// Gateway are serialized (they hold its lock through their requests).
class PROMETHEUS_CPP_PUSH_EXPORT Gateway {
 public:
  /// The Pushgateway at `host`:`port` ("127.0.0.1" and "9091"; `host` may
  /// carry a scheme, "https://pgw.example"; without one, http), the job
  /// name and the grouping labels of every request (`labels`; the instance
  /// label of GetInstanceLabel(), for instance). With a non-empty
  /// `username`, every request carries HTTP basic authentication with
  /// `password`. Contacts nothing; a libcurl that cannot start makes every
  /// request fail with -2 (-CURLE_FAILED_INIT) instead of throwing.
  /// Cost: a few strings.
  Gateway(const std::string& host, const std::string& port,
          const std::string& jobname, const Labels& labels = {},
          const std::string& username = {}, const std::string& password = {});

  Gateway(const Gateway&) = delete;
  Gateway(Gateway&&) = delete;
  Gateway& operator=(const Gateway&) = delete;
  Gateway& operator=(Gateway&&) = delete;

  /// Requests of an AsyncPush()/AsyncPushAdd()/AsyncDelete*() still under
  /// way complete safely (their futures own what they use).
  ~Gateway();

  /// Adds a collectable (a Registry, a Family) to push. `labels`, when
  /// given, are grouping labels of its own after the Gateway's: each
  /// collectable with distinct labels is a group of its own at the
  /// Pushgateway. Only a weak reference is kept: an expired collectable is
  /// skipped and dropped. Thread-safe; cost: a string, and a sweep of the
  /// expired entries.
  void RegisterCollectable(const std::weak_ptr<Collectable>& collectable,
                           const Labels* labels = nullptr);

  /// {{"instance", hostname}}, or no label for an empty `hostname`. Pure,
  /// thread-safe; cost: a map of one entry.
  static Labels GetInstanceLabel(std::string hostname);

  /// Collects each live collectable and POSTs it to its group, replacing
  /// the metric names it sends (see the file comment). One request per collectable, in the order
  /// registered; stops at the first failure. Returns 200 when every request
  /// succeeded (or there was none), else the failing request's code: an
  /// HTTP status of 400 and above, or a negated CURLcode. Thread-safe,
  /// serialized with the Gateway's other synchronous pushes. Cost: a
  /// Collect() and a serialization per collectable, and a blocking request
  /// each (the connection kept from one push to the next).
  int Push();

  /// Push() started now, completed on a thread of its own: the collectables
  /// are collected before it returns, the requests are sent by that thread
  /// (all of them, failing or not). The future holds 200, or the code of
  /// the last failing request. If no thread can be started, the requests
  /// are sent before it returns, and the future is ready. Thread-safe;
  /// cost: the collection and serialization now, a thread for the requests.
  std::future<int> AsyncPush();

  /// As Push(), with PUT: each request replaces everything its group held.
  int PushAdd();

  /// As AsyncPush(), with PUT.
  std::future<int> AsyncPushAdd();

  /// DELETEs the job's group without labels (/metrics/job/<job>), as
  /// prometheus-cpp 1.0.1 does: a group pushed with the Gateway's labels
  /// or a collectable's is left alone (DeleteForInstance()). Returns the
  /// HTTP status (the Pushgateway answers 202) or a negated CURLcode.
  /// Thread-safe; cost: one blocking request.
  int Delete();

  /// Delete() on a thread of its own (run now where none can start); the
  /// future holds its code. Thread-safe; cost: a thread and a request.
  std::future<int> AsyncDelete();

  /// DELETEs the group of the Gateway's own labels (the constructor's,
  /// without any collectable's). Returns as Delete(), or -3 when a label
  /// name is invalid (nothing sent). Thread-safe; cost: one request.
  int DeleteForInstance();

  /// DeleteForInstance() on a thread of its own, as AsyncDelete().
  std::future<int> AsyncDeleteForInstance();

 private:
  struct CollectableEntry {
    std::weak_ptr<Collectable> collectable;
    std::string labels;  // "/<name>/<value>..." encoded
    bool valid;          // false: a label name the path cannot carry
  };

  std::string jobUri_;  // "<host>:<port>/metrics/job/<job>", encoded
  std::string labels_;  // the constructor's labels, encoded
  bool labelsValid_;
  std::shared_ptr<detail::PushClient> client_;  // shared with async requests
  std::mutex mutex_;
  std::vector<CollectableEntry> collectables_;

  int push(detail::HttpMethod method);
  std::future<int> async_push(detail::HttpMethod method);
  std::future<int> async_delete(const std::string& uri, bool valid);
};

}  // namespace prometheus
