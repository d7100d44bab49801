// A program of the prometheus-cpp layer for cxx_minor_test.sh: says it
// reached main, counts through libpcpu-prometheus, and prints the file the
// loader took for libpcpu-prometheus (so that the test sees which minor's
// library a program was paired with).
#include <link.h>

#include <prometheus/counter.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <cstdio>
#include <cstring>
#include <string>

static int find_layer(struct dl_phdr_info *info, size_t, void *data) {
  if (std::strstr(info->dlpi_name, "/libpcpu-prometheus.so.") != nullptr) {
    *static_cast<std::string *>(data) = info->dlpi_name;
    return 1;
  }
  return 0;
}

int main() {
  std::printf("cxx_minor_probe: main reached\n");
  std::fflush(stdout);
  prometheus::Registry registry;
  auto &family = prometheus::BuildCounter().Name("probe_runs_total").Help("Runs.").Register(registry);
  family.Add({}).Increment();
  std::string text = prometheus::TextSerializer().Serialize(registry.Collect());
  if (text.find("probe_runs_total 1\n") == std::string::npos) {
    std::printf("cxx_minor_probe: wrong exposition:\n%s", text.c_str());
    return 1;
  }
  std::string layer = "(not found)";
  dl_iterate_phdr(find_layer, &layer);
  std::printf("cxx_minor_probe: ok %s\n", layer.c_str());
  return 0;
}
