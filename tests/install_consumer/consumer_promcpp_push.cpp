// Code written for prometheus-cpp's push library, built against the
// installed libpcpu-prometheus-push: a Gateway with a registry, a Push to a
// port where nothing listens (-7, CURLE_COULDNT_CONNECT; no hang, no throw).
#include <prometheus/counter.h>
#include <prometheus/gateway.h>
#include <prometheus/registry.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

int main() {
  // A bound socket that does not listen: connections to it are refused.
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (s < 0 || bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    return 2;
  const auto labels = prometheus::Gateway::GetInstanceLabel("consumer");
  prometheus::Gateway gateway{"127.0.0.1", std::to_string(ntohs(a.sin_port)), "consumer", labels};
  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::BuildCounter().Name("consumer_pushes_total").Help("Pushes.").Register(*registry).Add({}).Increment();
  gateway.RegisterCollectable(registry);
  const int code = gateway.Push();
  close(s);
  const bool ok = labels.at("instance") == "consumer" && code == -7;
  std::printf("installed libpcpu-prometheus-push: %s (Push to a closed port: %d)\n", ok ? "ok" : "WRONG", code);
  return ok ? 0 : 1;
}
