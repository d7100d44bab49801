// SPDX-License-Identifier: MIT
// The Exposer and the Gateway behind metrics.hpp's forward declarations
// (the pull and push libraries).
#include "metrics.hpp"

#include <prometheus/exposer.h>
#include <prometheus/gateway.h>
#include <prometheus/registry.h>

namespace app {

static void destroy(prometheus::Exposer* e) { delete e; }

std::unique_ptr<prometheus::Exposer, void (*)(prometheus::Exposer*)> serve(const Registry& reg) {
  std::unique_ptr<prometheus::Exposer, void (*)(prometheus::Exposer*)> e(new prometheus::Exposer("127.0.0.1:0"),
                                                                         destroy);
  e->RegisterCollectable(reg.shared());
  return e;
}

int port_of(const prometheus::Exposer& exposer) {
  std::vector<int> ports = exposer.GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

bool gateway_made(const Registry& reg) {
  prometheus::Gateway gw("127.0.0.1", "1", "forward_decl", prometheus::Labels{{"instance", "a"}});
  gw.RegisterCollectable(reg.shared());
  return true;
}

}  // namespace app
