// Code written for prometheus-cpp, built against the installed
// libpcpu-prometheus (its headers, its library): unchanged source.
#include <prometheus/counter.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <cstdio>

int main() {
  prometheus::Registry registry;
  auto& family = prometheus::BuildCounter().Name("consumer_requests_total").Help("Requests.").Register(registry);
  auto& c = family.Add({{"method", "GET"}});
  c.Increment();
  c.Increment(0.5);
  std::string text = prometheus::TextSerializer().Serialize(registry.Collect());
  bool ok = text.find("consumer_requests_total{method=\"GET\"} 1.5\n") != std::string::npos;
  std::printf("installed libpcpu-prometheus: %s\n", ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
