// SPDX-License-Identifier: MIT
// The shape of OpenVINO Model Server's metrics code (src/metrics/*.hpp):
// a program's own header forward-declares prometheus-cpp's classes and
// keeps references to them, so that only the units that use them include
// prometheus-cpp's headers. Written for this test, after that pattern:
// every public class of prometheus-cpp 1.0.1 (and Info, from 1.1),
// declared as prometheus-cpp declares it (class or struct, namespace), then
// the layer's headers included after it (core.cpp, net.cpp); main.cpp sees
// only this header. Issue 50: the layer's inline namespace made every such
// use "reference to 'Counter' is ambiguous".
#pragma once

#include <map>
#include <memory>
#include <string>

struct CivetCallbacks;

namespace prometheus {
class Collectable;
class Counter;
class Gauge;
class Histogram;
class Summary;
class Info;
class Registry;
template <typename T>
class Family;
class Serializer;
class TextSerializer;
struct ClientMetric;
struct MetricFamily;
enum class MetricType;
class Exposer;
class Gateway;
namespace detail {
template <typename T>
class Builder;
}  // namespace detail
}  // namespace prometheus

namespace app {

using Labels = std::map<std::string, std::string>;

// Wrappers holding the layer's objects by reference or pointer, as OVMS's
// MetricCounter, MetricGauge, MetricHistogram and MetricRegistry do.
class Counter {
 public:
  explicit Counter(prometheus::Counter& impl) : impl_(impl) {}
  void increment(double v = 1.0);

 private:
  prometheus::Counter& impl_;
};

class Gauge {
 public:
  explicit Gauge(prometheus::Gauge* impl) : impl_(impl) {}
  void set(double v);

 private:
  prometheus::Gauge* impl_;
};

class Histogram {
 public:
  explicit Histogram(prometheus::Histogram& impl) : impl_(impl) {}
  void observe(double v);

 private:
  prometheus::Histogram& impl_;
};

class Registry {
 public:
  Registry();
  ~Registry();
  Counter counter(const std::string& name, const Labels& labels);
  Gauge gauge(const std::string& name, const Labels& labels);
  Histogram histogram(const std::string& name, const Labels& labels);
  void info(const std::string& name, const Labels& labels);
  void summary(const std::string& name, double value);
  std::string collect() const;
  std::shared_ptr<prometheus::Registry> shared() const { return impl_; }
  prometheus::MetricType type_of(const std::string& name) const;

 private:
  std::shared_ptr<prometheus::Registry> impl_;
  prometheus::Family<prometheus::Counter>* counters_ = nullptr;
};

// net.cpp: an Exposer serving the registry on a free port, and a Gateway
// made (never pushed), both behind forward declarations.
std::unique_ptr<prometheus::Exposer, void (*)(prometheus::Exposer*)> serve(const Registry& reg);
int port_of(const prometheus::Exposer& exposer);
bool gateway_made(const Registry& reg);

}  // namespace app
