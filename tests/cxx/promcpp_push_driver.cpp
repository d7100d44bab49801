// SPDX-License-Identifier: MIT
// prometheus::Gateway (libpcpu-prometheus-push) driven line by line from
// stdin by promcpp_push_test.py, which checks after each step what a real
// Pushgateway (and a recording receiver) got. Fields are tab-separated, so
// that label values may hold spaces, slashes or nothing at all:
//   gw ID HOST PORT JOB USER PASS [NAME VALUE]...   a Gateway
//   reg GW REG HASLABELS [NAME VALUE]...            a Registry, registered
//   counter REG NAME AMOUNT [NAME VALUE]...         Increment(AMOUNT)
//   gauge REG NAME VALUE [NAME VALUE]...            Set(VALUE)
//   drop REG                                        the registry released
//   push|pushadd|delete|deleteinst GW               the call's code
//   apush|apushadd|adelete|adeleteinst GW           the future's code
//   apushgone GW                                    AsyncPush(), then the
//                                                   Gateway destroyed before
//                                                   the future is read
//   concurrent GW THREADS N                         THREADS threads, each N
//                                                   times Push() or
//                                                   AsyncPushAdd().get(),
//                                                   beside one registering
//                                                   expired collectables:
//                                                   the calls not 200
//   instance HOSTNAME                               GetInstanceLabel()
// Each command answers one line ("ok", a code, or "error: ...").
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gateway.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <atomic>
#include <future>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace prometheus;

namespace {

std::vector<std::string> Split(const std::string& line) {
  std::vector<std::string> out;
  std::string field;
  std::istringstream in(line);
  while (std::getline(in, field, '\t')) out.push_back(field);
  if (!line.empty() && line.back() == '\t') out.push_back(std::string());
  return out;
}

Labels Pairs(const std::vector<std::string>& f, std::size_t from) {
  Labels labels;
  for (std::size_t i = from; i + 1 < f.size(); i += 2) labels[f[i]] = f[i + 1];
  return labels;
}

}  // namespace

int main() {
  std::map<std::string, std::unique_ptr<Gateway>> gateways;
  std::map<std::string, std::shared_ptr<Registry>> registries;
  std::string line;
  while (std::getline(std::cin, line)) {
    const auto f = Split(line);
    if (f.empty()) continue;
    const std::string& cmd = f[0];
    std::string answer = "ok";
    if (cmd == "gw" && f.size() >= 7) {
      gateways[f[1]].reset(new Gateway(f[2], f[3], f[4], Pairs(f, 7), f[5], f[6]));
    } else if (cmd == "reg" && f.size() >= 4 && gateways.count(f[1])) {
      auto& reg = registries[f[2]];
      if (!reg) reg = std::make_shared<Registry>();
      const Labels labels = Pairs(f, 4);
      gateways[f[1]]->RegisterCollectable(reg, f[3] == "1" ? &labels : nullptr);
    } else if ((cmd == "counter" || cmd == "gauge") && f.size() >= 4 && registries.count(f[1])) {
      auto& reg = *registries[f[1]];
      const double v = std::stod(f[3]);
      if (cmd == "counter")
        BuildCounter().Name(f[2]).Help("counter " + f[2]).Register(reg).Add(Pairs(f, 4)).Increment(v);
      else
        BuildGauge().Name(f[2]).Help("gauge " + f[2]).Register(reg).Add(Pairs(f, 4)).Set(v);
    } else if (cmd == "drop" && f.size() == 2) {
      registries.erase(f[1]);
    } else if (cmd == "instance") {
      const Labels l = Gateway::GetInstanceLabel(f.size() > 1 ? f[1] : std::string());
      answer = l.empty() ? "empty" : "";
      for (const auto& p : l) answer += p.first + "=" + p.second + ";";
    } else if (cmd == "concurrent" && f.size() == 4 && gateways.count(f[1])) {
      Gateway& g = *gateways[f[1]];
      const int threads = std::stoi(f[2]), n = std::stoi(f[3]);
      std::atomic<int> failed{0};
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t)
        pool.emplace_back([&g, &failed, n, t] {
          for (int i = 0; i < n; ++i)
            if (((i + t) % 2 ? g.Push() : g.AsyncPushAdd().get()) != 200) ++failed;
        });
      pool.emplace_back([&g, n] {
        for (int i = 0; i < n; ++i) {
          auto gone = std::make_shared<Registry>();
          std::weak_ptr<Collectable> weak = gone;
          gone.reset();
          g.RegisterCollectable(weak);
        }
      });
      for (auto& th : pool) th.join();
      answer = std::to_string(failed.load());
    } else if (cmd == "apushgone" && f.size() == 2 && gateways.count(f[1])) {
      std::future<int> pending = gateways[f[1]]->AsyncPush();
      gateways.erase(f[1]);
      answer = std::to_string(pending.get());
    } else if (f.size() == 2 && gateways.count(f[1])) {
      Gateway& g = *gateways[f[1]];
      int code = 0;
      if (cmd == "push") code = g.Push();
      else if (cmd == "pushadd") code = g.PushAdd();
      else if (cmd == "delete") code = g.Delete();
      else if (cmd == "deleteinst") code = g.DeleteForInstance();
      else if (cmd == "apush") code = g.AsyncPush().get();
      else if (cmd == "apushadd") code = g.AsyncPushAdd().get();
      else if (cmd == "adelete") code = g.AsyncDelete().get();
      else if (cmd == "adeleteinst") code = g.AsyncDeleteForInstance().get();
      else answer = "error: unknown command " + cmd;
      if (answer == "ok") answer = std::to_string(code);
    } else {
      answer = "error: bad command: " + line;
    }
    std::cout << answer << std::endl;
  }
  return 0;
}
