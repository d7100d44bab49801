#!/usr/bin/env bash
# Builds tests/cxx/promcpp_golden.cpp against the real prometheus-cpp 1.0.1
# (Debian prometheus-cpp-dev) and against libpcpu-prometheus, runs both and
# requires the same bytes out.
# Usage: promcpp_golden.sh SRC_DIR BUILD_DIR CXX
set -euo pipefail
src=$1 bin=$2 cxx=$3
work=$bin/promcpp-golden
mkdir -p "$work"
[ -e /usr/include/prometheus/registry.h ] || { echo "prometheus-cpp-dev missing: scripts/install-deps.sh"; exit 1; }
"$cxx" -std=c++17 -O1 "$src/tests/cxx/promcpp_golden.cpp" -o "$work/real" -lprometheus-cpp-core -pthread
"$cxx" -std=c++17 -O1 -I"$src/compat/prometheus-cpp/include" -I"$src/include" -I"$bin/include" \
  "$src/tests/cxx/promcpp_golden.cpp" -o "$work/pcpu" \
  -L"$bin/compat/prometheus-cpp" -L"$bin" -Wl,-rpath,"$bin/compat/prometheus-cpp:$bin" -lpcpu-prometheus -lpcpu-stats -lpcpu -pthread
"$work/real" > "$work/real.out"
"$work/pcpu" > "$work/pcpu.out"
if ! diff -u "$work/real.out" "$work/pcpu.out"; then
  echo "libpcpu-prometheus differs from prometheus-cpp (- real, + pcpu)"
  exit 1
fi
echo "same output: $(wc -l < "$work/real.out") lines, $(wc -c < "$work/real.out") bytes"
