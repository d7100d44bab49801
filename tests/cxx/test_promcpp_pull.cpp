// libpcpu-prometheus-pull beyond prometheus-cpp's own tests: the bind
// addresses and ports, the option vector and what it refuses, bind
// failures, exceptions of collectables and auth callbacks (500, the server
// stays up), HEAD, 405, several listening sockets, and scrapes from several
// threads while collectables come and go (exact exposer_scrapes_total).
// A raw-socket HTTP client: no timing is asserted.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <pcpu/exposer.hpp>

#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/family.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"

using namespace prometheus;

static int failures = 0;
#define CHECK(cond)                                                        \
  do {                                                                     \
    if (!(cond)) {                                                         \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, \
                   #cond);                                                 \
      ++failures;                                                          \
    }                                                                      \
  } while (0)

struct Reply {
  int status = 0;
  std::string headers;  // lower-cased
  std::string body;
};

// One request on a fresh connection (Connection: close): the reply, or
// status 0 when the connection failed.
static Reply Http(int family, int port, const std::string& method, const std::string& path,
                  const std::string& extra = "") {
  Reply r;
  int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return r;
  sockaddr_storage ss{};
  socklen_t len;
  if (family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(static_cast<uint16_t>(port));
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(static_cast<uint16_t>(port));
    a->sin6_addr = in6addr_loopback;
    len = sizeof *a;
  }
  if (connect(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    close(fd);
    return r;
  }
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n" +
                    extra + "\r\n";
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return r;
  }
  std::string all;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) all.append(buf, static_cast<size_t>(n));
  close(fd);
  std::size_t end = all.find("\r\n\r\n");
  if (all.compare(0, 9, "HTTP/1.1 ") != 0 || end == std::string::npos) return r;
  r.status = std::atoi(all.c_str() + 9);
  r.headers = all.substr(0, end);
  for (char& c : r.headers) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  r.body = all.substr(end + 4);
  return r;
}

static Reply Get(int port, const std::string& path, const std::string& extra = "") {
  return Http(AF_INET, port, "GET", path, extra);
}

static double Value(const std::string& body, const std::string& key) {
  std::size_t p = body.find("\n" + key + " ");
  if (p == std::string::npos) return -1;
  return std::strtod(body.c_str() + p + key.size() + 2, nullptr);
}

template <typename E, typename F>
static bool Throws(F f, const char* needle) {
  try {
    f();
  } catch (const E& e) {
    if (std::strstr(e.what(), needle) != nullptr) return true;
    std::fprintf(stderr, "  message without \"%s\": %s\n", needle, e.what());
    return false;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "  unexpected exception: %s\n", e.what());
    return false;
  }
  std::fprintf(stderr, "  no exception (wanted one with \"%s\")\n", needle);
  return false;
}

class Throwing : public Collectable {
 public:
  std::vector<MetricFamily> Collect() const override { throw std::runtime_error("collect"); }
};

static bool HaveIPv6() {
  int fd = socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(fd);
  return ok;
}

static void Addresses() {
  {
    Exposer e{"127.0.0.1:0"};
    auto ports = e.GetListeningPorts();
    CHECK(ports.size() == 1 && ports[0] > 0);
    CHECK(Get(ports[0], "/metrics").status == 404);  // nothing registered
    // The same port again: bind fails, the constructor throws.
    CHECK(Throws<std::runtime_error>([&] { Exposer again{"127.0.0.1:" + std::to_string(ports[0])}; },
                                     "cannot listen"));
  }
  {
    Exposer e{"0"};  // civetweb's bare port: every IPv4 address
    CHECK(e.GetListeningPorts().size() == 1 && e.GetListeningPorts()[0] > 0);
  }
  if (HaveIPv6()) {
    Exposer e{"[::1]:0, 127.0.0.1:0"};
    auto ports = e.GetListeningPorts();
    CHECK(ports.size() == 2 && ports[0] > 0 && ports[1] > 0 && ports[0] != ports[1]);
    auto reg = std::make_shared<Registry>();
    BuildCounter().Name("v6_total").Register(*reg).Add({}).Increment(3);
    e.RegisterCollectable(reg);
    Reply r6 = Http(AF_INET6, ports[0], "GET", "/metrics");
    Reply r4 = Http(AF_INET, ports[1], "GET", "/metrics");
    CHECK(r6.status == 200 && Value(r6.body, "v6_total") == 3);
    CHECK(r4.status == 200 && Value(r4.body, "v6_total") == 3);
    Exposer dual{"+0"};  // [::] with IPv4 too
    CHECK(Http(AF_INET, dual.GetListeningPorts().at(0), "GET", "/metrics").status == 404);
    CHECK(Http(AF_INET6, dual.GetListeningPorts().at(0), "GET", "/metrics").status == 404);
  } else {
    std::printf("note: no IPv6 loopback here, [::1] not tested\n");
  }
  CHECK(Throws<std::runtime_error>([] { Exposer e{"127.0.0.1:99999"}; }, "port"));
  CHECK(Throws<std::runtime_error>([] { Exposer e{"::1:0"}; }, "brackets"));
  CHECK(Throws<std::runtime_error>([] { Exposer e{"[::1]0"}; }, "[IPV6]:PORT"));
  CHECK(Throws<std::runtime_error>([] { Exposer e{"127.0.0.1:"}; }, "port"));
  CHECK(Throws<std::runtime_error>([] { Exposer e{":0"}; }, "no host"));
  CHECK(Throws<std::invalid_argument>([] { Exposer e{"127.0.0.1:0s"}; }, "SSL"));
  CHECK(Throws<std::invalid_argument>([] { Exposer e{"127.0.0.1:0r"}; }, "redirect"));
  CHECK(Throws<std::invalid_argument>([] { Exposer e("127.0.0.1:0", 0); }, "num_threads"));
  static int dummy;
  const auto* callbacks = reinterpret_cast<const CivetCallbacks*>(&dummy);
  CHECK(Throws<std::invalid_argument>([&] { Exposer e("127.0.0.1:0", 2, callbacks); }, "CivetCallbacks"));
}

static void Options() {
  {
    Exposer e{std::vector<std::string>{"listening_ports", "127.0.0.1:0", "num_threads", "3"}};
    CHECK(e.GetListeningPorts().size() == 1 && e.GetListeningPorts()[0] > 0);
  }
  using V = std::vector<std::string>;
  CHECK(Throws<std::invalid_argument>([] { Exposer e{V{"listening_ports", "127.0.0.1:0", "document_root", "/"}}; },
                                      "\"document_root\""));
  CHECK(Throws<std::invalid_argument>([] { Exposer e{V{"listening_ports"}}; }, "pairs"));
  CHECK(Throws<std::invalid_argument>(
      [] { Exposer e{V{"num_threads", "1", "num_threads", "2", "listening_ports", "127.0.0.1:0"}}; }, "twice"));
  CHECK(Throws<std::invalid_argument>([] { Exposer e{V{"listening_ports", "127.0.0.1:0", "num_threads", "x"}}; },
                                      "num_threads"));
}

static void Serving() {
  Exposer e{"127.0.0.1:0", 1};
  int port = e.GetListeningPorts().at(0);
  auto reg = std::make_shared<Registry>();
  auto& c = BuildCounter().Name("served_total").Register(*reg).Add({{"k", "v"}});
  c.Increment(41);
  e.RegisterCollectable(reg, "/a");
  Reply r = Get(port, "/a");
  CHECK(r.status == 200);
  CHECK(Value(r.body, "served_total{k=\"v\"}") == 41);
  CHECK(r.headers.find("content-type: text/plain; version=0.0.4; charset=utf-8") != std::string::npos);
  CHECK(Get(port, "/a/").status == 404);  // exact paths
  CHECK(Get(port, "/a?x=1").status == 200);  // the query string is not the path
  Reply head = Http(AF_INET, port, "HEAD", "/a");
  CHECK(head.status == 200 && head.body.empty());
  Reply post = Http(AF_INET, port, "POST", "/a", "Content-Length: 0\r\n");
  CHECK(post.status == 405 && post.headers.find("allow: get, head") != std::string::npos);
  // A collectable that throws: 500, and the server goes on.
  auto bad = std::make_shared<Throwing>();
  e.RegisterCollectable(bad, "/a");
  CHECK(Get(port, "/a").status == 500);
  e.RemoveCollectable(bad, "/a");
  CHECK(Get(port, "/a").status == 200);
  // Auth: a throwing callback answers 500; a refusing one 401.
  CHECK(Throws<std::invalid_argument>([&] { e.RegisterAuth([](const std::string&, const std::string&) { return true; }, "a\"b", "/a"); },
                                      "realm"));
  e.RegisterAuth([](const std::string& u, const std::string&) -> bool {
    if (u == "boom") throw std::runtime_error("auth");
    return u == "u";
  }, "R", "/a");
  CHECK(Get(port, "/a").status == 401);
  CHECK(Get(port, "/a", "Authorization: Basic Ym9vbTpw\r\n").status == 500);   // boom:p
  CHECK(Get(port, "/a", "Authorization: Basic dTpw\r\n").status == 200);       // u:p
  CHECK(Get(port, "/a", "Authorization: basic dTpw\r\n").status == 200);       // scheme case
  CHECK(Get(port, "/a", "Authorization: Basic dTpw=\r\n").status == 401);      // bad padding
  CHECK(Get(port, "/a", "Authorization: Bearer dTpw\r\n").status == 401);
  Reply denied = Get(port, "/a", "Authorization: Basic eDpw\r\n");            // x:p
  CHECK(denied.status == 401 && denied.headers.find("www-authenticate: basic realm=\"r\"") != std::string::npos);
  // gzip only where accepted.
  Reply gz = Get(port, "/a", "Authorization: Basic dTpw\r\nAccept-Encoding: br, gzip\r\n");
  CHECK(gz.status == 200 && gz.headers.find("content-encoding: gzip") != std::string::npos &&
        gz.body.size() > 2 && gz.body[0] == '\x1f' && gz.body[1] == '\x8b');
  Reply nogz = Get(port, "/a", "Authorization: Basic dTpw\r\nAccept-Encoding: gzip;q=0, identity\r\n");
  CHECK(nogz.status == 200 && nogz.headers.find("content-encoding") == std::string::npos);
}

// Scrapes from 4 threads while another registers and removes a collectable:
// every answer is 200 and the endpoint's own scrape counter counts them all.
static void Concurrent() {
  Exposer e{"127.0.0.1:0", 4};
  int port = e.GetListeningPorts().at(0);
  auto reg = std::make_shared<Registry>();
  BuildCounter().Name("steady_total").Register(*reg).Add({}).Increment(7);
  e.RegisterCollectable(reg);
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::thread churn([&] {
    while (!stop.load()) {
      auto extra = std::make_shared<Registry>();
      BuildCounter().Name("churn_total").Register(*extra).Add({}).Increment();
      e.RegisterCollectable(extra);
      e.RemoveCollectable(extra);
    }
  });
  const int threads = 4, each = 50;
  std::vector<std::thread> scrapers;
  for (int t = 0; t < threads; ++t) {
    scrapers.emplace_back([&] {
      for (int i = 0; i < each; ++i) {
        Reply r = Get(port, "/metrics");
        if (r.status != 200 || Value(r.body, "steady_total") != 7) ++bad;
      }
    });
  }
  for (auto& t : scrapers) t.join();
  stop = true;
  churn.join();
  CHECK(bad.load() == 0);
  Reply r = Get(port, "/metrics");
  CHECK(Value(r.body, "exposer_scrapes_total") == threads * each);
}

// pcpu::exposer (pcpu/exposer.hpp): pcpu.hpp registries served in process,
// exact while threads count and scrapers read; a registry removed while
// scrapes run may be destroyed at once; set-up failures as pcpu.hpp reports
// them.
static void PcpuExposer() {
  pcpu::exposer http("127.0.0.1:0", 2);
  int port = http.ports().at(0);
  auto reg = std::make_unique<pcpu::registry>();
  auto hits = reg->counter_family("pcpu_hits").labels({"kind"}).make();
  pcpu::registry other;
  other.gauge("pcpu_depth").set(-3);
  http.serve(*reg);
  http.serve(other, "/other");
  const int threads = 4, each = 100000;
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&] {
      pcpu::counter_ref c = hits.series({"get"});
      for (int i = 0; i < each; ++i) c.inc();
    });
  std::atomic<int> bad{0};
  std::thread scraper([&] {
    double last = 0;
    for (int i = 0; i < 50; ++i) {
      Reply r = Get(port, "/metrics");
      double v = Value(r.body, "pcpu_hits_total{kind=\"get\"}");
      if (r.status != 200 || (v < last && v != -1)) ++bad;  // never goes back
      if (v > last) last = v;
    }
  });
  for (auto& t : ts) t.join();
  scraper.join();
  CHECK(bad.load() == 0);
  Reply r = Get(port, "/metrics");
  CHECK(r.status == 200);
  CHECK(Value(r.body, "pcpu_hits_total{kind=\"get\"}") == threads * each);
  CHECK(r.body.find("pcpu_depth") == std::string::npos);
  Reply o = Get(port, "/other");
  CHECK(o.status == 200 && Value(o.body, "pcpu_depth") == -3);
  CHECK(Get(port, "/nothing").status == 404);
  CHECK(Get(port, "/metrics", "Accept-Encoding: gzip\r\n").headers.find("content-encoding: gzip") !=
        std::string::npos);

  // Removed while scrapes go on, then destroyed at once.
  std::atomic<bool> stop{false};
  std::thread scraping([&] {
    while (!stop.load())
      if (Get(port, "/metrics").status != 200) ++bad;
  });
  http.remove(*reg);
  reg.reset();
  stop = true;
  scraping.join();
  CHECK(bad.load() == 0);
  CHECK(Get(port, "/metrics").body.find("pcpu_hits") == std::string::npos);

  // Set-up failures: pcpu::error with the errno, as pcpu.hpp's.
  bool einval = false, inuse = false;
  try {
    pcpu::exposer bad_address("127.0.0.1:notaport");
  } catch (const pcpu::error& e) {
    einval = e.code().value() == EINVAL;
  }
  try {
    pcpu::exposer taken("127.0.0.1:" + std::to_string(port));
  } catch (const pcpu::error& e) {
    inuse = e.code().value() == EADDRINUSE && std::strstr(e.what(), "127.0.0.1:") != nullptr;
  }
  CHECK(einval);
  CHECK(inuse);
  CHECK(pcpu::exposer::create("127.0.0.1:" + std::to_string(port)) == nullptr);
  CHECK(errno == EADDRINUSE && pcpu::last_error().code == EADDRINUSE);
}

int main() {
  PcpuExposer();
  Addresses();
  Options();
  Serving();
  Concurrent();
  if (failures != 0) {
    std::fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  std::printf("test_promcpp_pull: all checks passed\n");
  return 0;
}
