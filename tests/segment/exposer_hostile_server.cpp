// prometheus::Exposer (the prometheus-cpp layer's, on libpcpu-exporter)
// as a server for exporter_hostile_test.py: serves one counter,
// hostile_marker_total 5150, at /metrics, with basic authentication when a
// user and password are given (RegisterAuth: the layer's per-endpoint
// check), until SIGINT or SIGTERM.
//   exposer_hostile_server ADDRESS [USER PASSWORD]
// Prints "listening on http://127.0.0.1:PORT/metrics" once serving.
#include <signal.h>

#include <cstdio>
#include <memory>
#include <string>

#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/family.h"
#include "prometheus/registry.h"

int main(int argc, char** argv) {
  if (argc != 2 && argc != 4) {
    std::fprintf(stderr, "usage: exposer_hostile_server ADDRESS [USER PASSWORD]\n");
    return 2;
  }
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // before the server's threads start

  prometheus::Exposer exposer{argv[1]};  // prometheus-cpp's default: 2 threads
  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::BuildCounter().Name("hostile_marker_total").Help("A known value.").Register(*registry)
      .Add({}).Increment(5150);
  exposer.RegisterCollectable(registry);
  if (argc == 4) {
    std::string user = argv[2], password = argv[3];
    exposer.RegisterAuth([user, password](const std::string& u, const std::string& p) {
      return u == user && p == password;
    }, "hostile");
  }
  std::printf("listening on http://127.0.0.1:%d/metrics\n", exposer.GetListeningPorts().at(0));
  std::fflush(stdout);
  int sig = 0;
  while (sigwait(&stop, &sig) != 0) {
  }
  return 0;
}
