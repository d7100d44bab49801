// Code written for prometheus-cpp's pull library, built against the
// installed libpcpu-prometheus-pull: an Exposer on an ephemeral port,
// scraped once over a socket.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/registry.h>

int main() {
  prometheus::Exposer exposer{"127.0.0.1:0"};
  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::BuildCounter().Name("consumer_pull_total").Help("Scrapes.").Register(*registry).Add({}).Increment(5);
  exposer.RegisterCollectable(registry);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(exposer.GetListeningPorts().at(0)));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return 1;
  const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  if (write(fd, req, sizeof req - 1) != static_cast<ssize_t>(sizeof req - 1)) return 1;
  std::string all;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) all.append(buf, static_cast<size_t>(n));
  close(fd);
  if (all.compare(0, 12, "HTTP/1.1 200") != 0 || all.find("\nconsumer_pull_total 5\n") == std::string::npos) {
    std::fprintf(stderr, "consumer_promcpp_pull: unexpected answer:\n%s\n", all.c_str());
    return 1;
  }
  std::puts("consumer_promcpp_pull: scraped consumer_pull_total 5");
  return 0;
}
