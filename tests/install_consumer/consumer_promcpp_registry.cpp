// prometheus-cpp code that uses only the out-of-line API (a registry and
// its exposition, no inline Increment()): linked with --as-needed it does
// not list libpcpu.so.0 itself, so that library is found through
// libpcpu-prometheus's own run path or not at all (issue 37).
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <cstdio>

int main() {
  prometheus::Registry registry;
  std::string text = prometheus::TextSerializer().Serialize(registry.Collect());
  std::printf("installed libpcpu-prometheus (registry only): %s\n", text.empty() ? "ok" : "WRONG");
  return text.empty() ? 0 : 1;
}
