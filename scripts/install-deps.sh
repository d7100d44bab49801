#!/usr/bin/env bash
# Installs what pcpu's build, tests and benchmark plots need on a Debian machine.
# The library itself needs only libc; everything here is for tools and tests:
#   cmake, ninja, gcc: build         clang + compiler-rt: libFuzzer fuzz tests
#   valgrind: exactness under valgrind (rseq-less fallback)
#   prometheus (promtool, server): exposition checks and the scrape test
#   python: prometheus_client (strict OpenMetrics parser), matplotlib (plots)
# Idempotent and quiet when everything is present. Needs root for apt-get.
set -euo pipefail

need_apt=()
have() { command -v "$1" >/dev/null 2>&1; }
have cmake     || need_apt+=(cmake)
have ninja     || need_apt+=(ninja-build)
have cc        || need_apt+=(gcc g++)
have pkg-config || need_apt+=(pkg-config)
have valgrind  || need_apt+=(valgrind)
have clang     || need_apt+=(clang)
[ -n "$(ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a 2>/dev/null)" ] || need_apt+=(libclang-rt-14-dev)
have promtool  || need_apt+=(prometheus)
have python3   || need_apt+=(python3 python3-pip)

if [ ${#need_apt[@]} -gt 0 ]; then
  echo "install-deps: apt-get install ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

py_need=()
python3 -c 'import prometheus_client' 2>/dev/null || py_need+=(prometheus_client)
python3 -c 'import matplotlib' 2>/dev/null || py_need+=(matplotlib)
if [ ${#py_need[@]} -gt 0 ]; then
  echo "install-deps: pip install ${py_need[*]}"
  python3 -m pip install --quiet --disable-pip-version-check "${py_need[@]}" \
    || python3 -m pip install --quiet --disable-pip-version-check --break-system-packages "${py_need[@]}"
fi
exit 0
