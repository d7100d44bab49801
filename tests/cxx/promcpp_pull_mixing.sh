#!/usr/bin/env bash
# The pull layer and the real prometheus-cpp (Debian's prometheus-cpp-dev)
# do not mix: each way fails at build or link time, with the message that
# says why. Each case asserts the failure AND its message.
#  a: the layer's exposer.h, linked with libprometheus-cpp-pull/-core:
#     the link guards' undefined references (pull_export.h, core_export.h);
#  b: prometheus-cpp's own headers, linked with the layer's libraries by
#     their link names: the mark of the layer's headers missing
#     (-lpcpu-prometheus is a linker script that brings
#     libpcpu-prometheus-headers.o: src/headers_check.c), as a program, with
#     --gc-sections, with gold, and as a shared library;
#  c: a real prometheus-cpp export header in a unit with the layer's
#     headers: the #error (core_export.h's when it comes first, pull_export.h's
#     when a layer core header came before it); one that comes after the
#     layer's: its classes are redefinitions (the same names: issue 50);
#  d: the layer's exposer.h linked without -lpcpu-prometheus-pull: its guard;
#  e: a program with no unit of the layer linked with -lpcpu-prometheus: the
#     check refuses it too (link the layer into what includes its headers).
# Usage: promcpp_pull_mixing.sh SRC_DIR BUILD_DIR CXX
set -uo pipefail
src=$1 bin=$2 cxx=$3
work=$bin/promcpp-pull-mixing
mkdir -p "$work"
layer_inc=(-I"$src/compat/prometheus-cpp/include" -I"$src/include" -I"$bin/include")
layer_libs=(-L"$bin/compat/prometheus-cpp" -L"$bin" -Wl,-rpath,"$bin/compat/prometheus-cpp:$bin")
fails=0
# expect NAME PATTERN COMMAND...: COMMAND must fail and print PATTERN.
expect() {
  local name=$1 pattern=$2; shift 2
  if "$@" > "$work/$name.log" 2>&1; then
    echo "FAIL $name: built, but must not"; fails=$((fails + 1))
  elif ! grep -qF -- "$pattern" "$work/$name.log"; then
    echo "FAIL $name: failed without \"$pattern\":"; sed 's/^/  /' "$work/$name.log" | head -20
    fails=$((fails + 1))
  else
    echo "ok   $name: fails with \"$pattern\""
  fi
}
[ -f /usr/include/prometheus/exposer.h ] && [ -f /usr/include/prometheus/detail/pull_export.h ] ||
  { echo "prometheus-cpp's headers are needed (Debian: prometheus-cpp-dev)"; exit 1; }

cat > "$work/prog.cc" <<'CC'
#include <memory>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/registry.h>
int main() {
  prometheus::Exposer exposer{"127.0.0.1:0"};
  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::BuildCounter().Name("x_total").Register(*registry).Add({}).Increment();
  exposer.RegisterCollectable(registry);
  return exposer.GetListeningPorts().empty();
}
CC
# The program itself builds and runs with the layer (the cases below are
# then failures of the mix alone).
if "$cxx" -std=c++17 "${layer_inc[@]}" "$work/prog.cc" "${layer_libs[@]}" \
     -lpcpu-prometheus-pull -lpcpu-prometheus -lpcpu-stats -lpcpu -o "$work/prog" > "$work/prog.log" 2>&1 &&
   "$work/prog"; then
  echo "ok   the program builds and runs with the layer"
else
  echo "FAIL the program does not build or run with the layer"; cat "$work/prog.log"; fails=$((fails + 1))
fi
expect a_layer_headers_real_libs "undefined reference to \`pcpu_prometheus_pull_layer_headers_need_lpcpu_prometheus_pull'" \
  "$cxx" -std=c++17 "${layer_inc[@]}" "$work/prog.cc" -lprometheus-cpp-pull -lprometheus-cpp-core -o "$work/a"
if grep -qF "undefined reference to \`pcpu_prometheus_layer_headers_need_lpcpu_prometheus'" "$work/a_layer_headers_real_libs.log"; then
  echo "ok   a: the core layer's guard is reported too"
else
  echo "FAIL a: without the core layer's guard"; fails=$((fails + 1))
fi
# The symbol's name is the fix; the real headers' other references (the
# layer's Counter::Increment() is inline, prometheus-cpp's is not) come
# with it, and never a program that runs on the wrong objects.
mark="pcpu_prometheus_library_needs_its_headers_pkg_config_cflags_pcpu_prometheus"
all_layer_libs=(-lpcpu-prometheus-pull -lpcpu-prometheus -lpcpu-stats -lpcpu)
expect b_real_headers_layer_libs "undefined reference to \`$mark'" \
  "$cxx" -std=c++17 "$work/prog.cc" "${layer_libs[@]}" "${all_layer_libs[@]}" -o "$work/b"
expect b_gc_sections "undefined reference to \`$mark'" \
  "$cxx" -std=c++17 -O2 -ffunction-sections -fdata-sections -Wl,--gc-sections "$work/prog.cc" \
    "${layer_libs[@]}" "${all_layer_libs[@]}" -o "$work/b_gc"
if "$cxx" -fuse-ld=gold -x c++ - -o "$work/gold_probe" <<< 'int main() {}' > /dev/null 2>&1; then
  expect b_gold "undefined reference to '$mark'" \
    "$cxx" -std=c++17 -fuse-ld=gold "$work/prog.cc" "${layer_libs[@]}" "${all_layer_libs[@]}" -o "$work/b_gold"
fi
expect b_shared_library "$mark" \
  "$cxx" -std=c++17 -fPIC -shared "$work/prog.cc" "${layer_libs[@]}" "${all_layer_libs[@]}" -o "$work/b.so"
cat > "$work/c1.cc" <<'CC'
#include "/usr/include/prometheus/detail/pull_export.h"  // prometheus-cpp's, by another path
#include <prometheus/exposer.h>                           // the layer's
int main() {}
CC
expect c1_real_first "prometheus-cpp's own headers and pcpu's prometheus-cpp layer are mixed in one unit" \
  "$cxx" -std=c++17 "${layer_inc[@]}" -c "$work/c1.cc" -o "$work/c1.o"
cat > "$work/c2.cc" <<'CC'
#include <prometheus/registry.h>                          // the layer's core
#include "/usr/include/prometheus/detail/pull_export.h"  // prometheus-cpp's pull
#include <prometheus/exposer.h>                           // the layer's pull
int main() {}
CC
expect c2_real_between "(pkg-config --cflags pcpu-prometheus-pull)" \
  "$cxx" -std=c++17 "${layer_inc[@]}" -c "$work/c2.cc" -o "$work/c2.o"
cat > "$work/c3.cc" <<'CC'
#include <prometheus/exposer.h>                 // the layer's
#include "/usr/include/prometheus/exposer.h"    // prometheus-cpp's, after it
int main() { prometheus::Exposer e{"127.0.0.1:0"}; }
CC
# No #error can see a header that comes later: its Exposer is then a
# second definition of the layer's.
expect c3_real_after "redefinition of" \
  "$cxx" -std=c++17 "${layer_inc[@]}" -c "$work/c3.cc" -o "$work/c3.o"
expect d_without_pull_lib "undefined reference to \`pcpu_prometheus_pull_layer_headers_need_lpcpu_prometheus_pull'" \
  "$cxx" -std=c++17 "${layer_inc[@]}" "$work/prog.cc" "${layer_libs[@]}" -lpcpu-prometheus -lpcpu-stats -lpcpu -o "$work/d"
echo 'int main() { return 0; }' > "$work/e.cc"
expect e_no_layer_unit "undefined reference to \`$mark'" \
  "$cxx" -std=c++17 "$work/e.cc" "${layer_libs[@]}" -lpcpu-prometheus -o "$work/e"
[ $fails = 0 ] && echo "ok: every mix fails as it must" || { echo "$fails case(s) failed"; exit 1; }
