// SPDX-License-Identifier: MIT
// A unit that sees prometheus-cpp's classes only through metrics.hpp's
// forward declarations. Exit 0: every wrapper reached the layer and the
// exposition shows what was recorded.
#include <cstdio>
#include <string>

#include "metrics.hpp"

int main() {
  app::Registry reg;
  app::Counter c = reg.counter("fwd_requests", {{"method", "GET"}});
  c.increment();
  c.increment(2);
  reg.gauge("fwd_in_flight", {}).set(7);
  reg.histogram("fwd_latency_seconds", {}).observe(0.5);
  reg.info("fwd_build", {{"version", "1.2"}});
  reg.summary("fwd_size_bytes", 42);
  (void)reg.type_of("fwd_requests");  // an opaque enum, complete by its declaration
  const std::string text = reg.collect();
  const char* want[] = {"fwd_requests{method=\"GET\"} 3", "fwd_in_flight 7", "fwd_latency_seconds_bucket{le=\"1\"} 1",
                        "fwd_build_info{version=\"1.2\"} 1", "fwd_size_bytes_count 1"};
  int bad = 0;
  for (const char* w : want)
    if (text.find(w) == std::string::npos) {
      std::fprintf(stderr, "missing: %s\n", w);
      bad = 1;
    }
  auto exposer = app::serve(reg);
  if (app::port_of(*exposer) <= 0) {
    std::fprintf(stderr, "the exposer has no port\n");
    bad = 1;
  }
  if (!app::gateway_made(reg)) bad = 1;
  if (bad) std::fprintf(stderr, "%s", text.c_str());
  return bad;
}
