#!/usr/bin/env bash
# prometheus-cpp 1.0.1's own core unit tests (core/tests/*.cc, GoogleTest),
# built against pcpu's compatibility layer instead of prometheus-cpp, and run.
# The peer's source is Debian's source package, fetched here at test time
# into the build tree (never into the repository): `apt-get source` with a
# deb-src list of its own (the system's apt configuration is not touched),
# or taken from $PCPU_PROMCPP_SRC (an unpacked prometheus-cpp-1.0.1 tree)
# for offline runs.
# Usage: promcpp_peer.sh SRC_DIR BUILD_DIR SANITIZE('' or thread or address) CXX
#        promcpp_peer.sh --fetch-only SRC_DIR BUILD_DIR   (prints the peer's tree)
set -euo pipefail
fetch_only=0
if [ "$1" = --fetch-only ]; then fetch_only=1; shift; fi
src=$1 bin=$2 sanitize=${3:-} cxx=${4:-}
work=$bin/promcpp-peer
mkdir -p "$work"
peer=${PCPU_PROMCPP_SRC:-}
if [ -z "$peer" ]; then
  peer=$work/prometheus-cpp-1.0.1
  if [ ! -f "$peer/core/tests/counter_test.cc" ]; then
    apt=$work/apt
    mkdir -p "$apt/lists/partial" "$apt/dl"
    echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main" > "$apt/sources.list"
    opts=(-o Dir::Etc::SourceList="$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o Dir::State::Lists="$apt/lists" -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
    apt-get "${opts[@]}" -qq update
    (cd "$apt/dl" && apt-get "${opts[@]}" -qq source --download-only prometheus-cpp=1.0.1-1)
    tar -xzf "$apt/dl/prometheus-cpp_1.0.1.orig.tar.gz" -C "$work"
  fi
fi
if [ $fetch_only = 1 ]; then echo "$peer"; exit 0; fi
flags=(-std=c++17 -O1 -g -pthread)
case "$sanitize" in
  thread) flags+=(-fsanitize=thread) ;;
  address) flags+=(-fsanitize=address,undefined) ;;
esac
inc=(-I"$src/compat/prometheus-cpp/include" -I"$src/include" -I"$bin/include")
libs=(-L"$bin/compat/prometheus-cpp" -L"$bin" -Wl,-rpath,"$bin/compat/prometheus-cpp:$bin"
      -lpcpu-prometheus -lpcpu-stats -lpcpu -lgmock_main -lgmock -lgtest)
objs=()
for t in "$peer"/core/tests/*_test.cc; do
  o=$work/$(basename "$t" .cc)${sanitize:+-$sanitize}.o
  if [ ! -f "$o" ] || [ "$t" -nt "$o" ] || [ -n "$(find "$src/compat/prometheus-cpp/include" -newer "$o" -name '*.h')" ]; then
    "$cxx" "${flags[@]}" "${inc[@]}" -c "$t" -o "$o"
  fi
  objs+=("$o")
done
exe=$work/prometheus_core_test${sanitize:+-$sanitize}
"$cxx" "${flags[@]}" "${objs[@]}" "${libs[@]}" -o "$exe"
# The locale test runs where de_DE.UTF-8 exists and skips itself elsewhere.
"$exe" --gtest_brief=0 2>&1 | tee "$work/last-run${sanitize:+-$sanitize}.log" | grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]" || true
grep -q "^\[  PASSED  \]" "$work/last-run${sanitize:+-$sanitize}.log"
! grep -q "^\[  FAILED  \]" "$work/last-run${sanitize:+-$sanitize}.log"
