#!/usr/bin/env bash
# prometheus-cpp 1.0.1's own pull tests, built against pcpu's pull layer
# (libpcpu-prometheus-pull) instead of prometheus-cpp's civetweb Exposer,
# and run: pull/tests/unit/exposer_test.cc and
# pull/tests/integration/integration_test.cc (libcurl), GoogleTest.
# pull/tests/internal/base64_test.cc is left out: it tests prometheus-cpp's
# private detail/base64.h, which the layer does not have.
# Besides, the integration test once more with its one disabled test
# (shouldRejectRequestWithoutAuthorization, "#if 0" for civetweb issue 954)
# enabled in a copy: the layer answers 401 there.
# The peer's source comes from promcpp_peer.sh --fetch-only (Debian's source
# package in the build tree, or $PCPU_PROMCPP_SRC).
# Usage: promcpp_pull_peer.sh SRC_DIR BUILD_DIR CXX
set -euo pipefail
src=$1 bin=$2 cxx=$3
peer=$("$src/tests/cxx/promcpp_peer.sh" --fetch-only "$src" "$bin" | tail -n 1)
work=$bin/promcpp-pull-peer
mkdir -p "$work"
flags=(-std=c++17 -O1 -g -pthread)
inc=(-I"$src/compat/prometheus-cpp/include" -I"$src/include" -I"$bin/include")
libs=(-L"$bin/compat/prometheus-cpp" -L"$bin" -Wl,-rpath,"$bin/compat/prometheus-cpp:$bin"
      -lpcpu-prometheus-pull -lpcpu-prometheus -lpcpu-stats -lpcpu -lcurl -lgmock_main -lgmock -lgtest)
sed 's|^#if 0  // https://github.com/civetweb/civetweb/issues/954|#if 1|' \
  "$peer"/pull/tests/integration/integration_test.cc > "$work/integration_test_954.cc"
grep -q '^#if 1$' "$work/integration_test_954.cc"
objs=()
for t in "$peer"/pull/tests/unit/exposer_test.cc "$peer"/pull/tests/integration/integration_test.cc \
         "$work/integration_test_954.cc"; do
  o=$work/$(basename "$t" .cc).o
  "$cxx" "${flags[@]}" "${inc[@]}" -c "$t" -o "$o"
  objs+=("$o")
done
run() {  # name, objects...
  local exe=$work/$1 log=$work/$1.log
  shift
  "$cxx" "${flags[@]}" "$@" "${libs[@]}" -o "$exe"
  echo "== $(basename "$exe")"
  "$exe" --gtest_brief=0 > "$log" 2>&1 || true
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]" "$log" || true
  grep -q "^\[  PASSED  \]" "$log" && ! grep -q "^\[  FAILED  \]" "$log"
}
run prometheus_pull_test "${objs[0]}" "${objs[1]}"
run prometheus_pull_test_954 "${objs[0]}" "${objs[2]}"
