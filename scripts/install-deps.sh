#!/usr/bin/env bash
# Installs what pcpu's build, tests and benchmark plots need on a Debian machine.
#
#   scripts/install-deps.sh --demo   what scripts/demo.sh builds and shows: a C
#                                    compiler, CMake, Ninja, pkg-config, the
#                                    libraries of pcpustat, man (for `man pcpu`)
#   scripts/install-deps.sh --nginx  the above, nginx and nginx-dev: what the
#                                    README's nginx commands build the module
#                                    with (its tests need more: see below)
#   scripts/install-deps.sh --quick  what the quick tier uses (scripts/test.sh
#                                    --quick): the above, and what the plain
#                                    build with its tests, benchmarks and
#                                    examples and the unit tests (ctest -L unit)
#                                    need -- g++, valgrind, liburcu-dev,
#                                    Prometheus (promtool), protoc, openssl,
#                                    apache2-utils, binutils, a de_DE locale,
#                                    and the Python venv's prometheus_client,
#                                    protobuf, opentelemetry-proto, grpcio;
#                                    none of the emulators, cross compilers,
#                                    clang, Chromium, nginx, Debian packaging
#                                    tools, Rust targets or Miri
#   scripts/install-deps.sh          everything the test suite needs (scripts/test.sh):
#                                    the above and the rest below
#
# The library itself needs only libc; everything here is for tools and tests:
#   cmake, ninja, gcc: build         clang + compiler-rt: libFuzzer fuzz tests
#   valgrind: exactness under valgrind (rseq-less fallback)
#   liburcu-dev: bench/ref_bench.c compares pcpu_rwlock with liburcu's read side
#   prometheus (promtool, server): exposition checks and the scrape test
#   python: the tests' Python packages -- prometheus_client (strict OpenMetrics
#           parser), matplotlib (plots), pytest (the Python binding's
#           tests), protobuf, opentelemetry-proto, grpcio (the push
#           tests) -- go into a virtual environment of their own,
#           ~/.cache/pcpu-venv ($XDG_CACHE_HOME/pcpu-venv), never into the
#           system Python (Debian's refuses a pip install outside a venv:
#           PEP 668); the tests run its python3 (CMake's PCPU_PYTHON3, and
#           first on PATH in scripts/test.sh and under ctest). python3-venv
#           makes it. Beside it, in its wheels/ folder, the wheels that
#           python/pyproject.toml's [build-system] requires (setuptools,
#           bounded there): the tests that `pip install ./python` build
#           from them offline, in bare virtual environments, whatever
#           python3 comes first on PATH and whatever it has installed.
#   debhelper, dpkg-dev, build-essential, lintian: the Debian packages test
#   man-db, groff: the manual pages test (man --warnings, groff -ww)
#   libmicrohttpd-dev, libgnutls28-dev, zlib1g-dev, libyaml-dev, libcrypt-dev:
#           pcpustat serve (HTTP/TLS server, gzip, web config file, bcrypt)
#   openssl, apache2-utils (htpasswd): the exporter's TLS and auth tests
#   gcc-aarch64-linux-gnu, libc6-dev-arm64-cross, binutils-aarch64-linux-gnu:
#           the aarch64 cross build and its section checks
#   gcc-arm-linux-gnueabihf, libc6-dev-armhf-cross, binutils-arm-linux-gnueabihf,
#   gcc-riscv64-linux-gnu, libc6-dev-riscv64-cross, binutils-riscv64-linux-gnu:
#           the ARMv7 and riscv64 cross builds (their emulated machines)
#   qemu-system-arm, qemu-system-x86, qemu-system-misc (riscv64), cpio:
#           the emulated machines
#           (scripts/vm/: aarch64, ARMv7, riscv64 and many-CPU x86-64 under TCG; the Debian
#           kernels they boot are downloaded at test time, into a cache, by
#           scripts/vm/fetch-kernels.sh)
#   postgresql-15, postgresql-server-dev-15: PostgreSQL's pcpu_stat_statements
#           extension (integrations/postgresql): its PGXS build and the
#           server and pgbench its tests run; postgresql-server-dev-all:
#           the Debian packages test, whose postgresql-15-pcpu is built
#           with pg_buildext for the versions it supports (debian/control)
#   rustup target aarch64-unknown-linux-gnu: the Rust crate's inline add on
#           the emulated aarch64 machine (scripts/vm/run.sh --rust)
# Idempotent and quiet when everything is present. Needs root for apt-get
# (sudo otherwise); the Python packages and the Rust toolchains go to the
# user's own directories.
set -euo pipefail
mode=all
case "${1:-}" in
  --demo) mode=demo ;;
  --quick) mode=quick ;;
  --nginx) mode=nginx ;;
  "") ;;
  *) echo "usage: scripts/install-deps.sh [--demo | --quick | --nginx]" >&2; exit 2 ;;
esac

need_apt=()
have() { command -v "$1" >/dev/null 2>&1; }
install_apt() {
  [ ${#need_apt[@]} -gt 0 ] || return 0
  echo "install-deps: apt-get install ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
}

# ---- the demonstration: the library, pcpustat, the examples, the benchmark ----
have cmake     || need_apt+=(cmake)
have ninja     || need_apt+=(ninja-build)
have cc        || need_apt+=(gcc)
[ -e /usr/include/stdio.h ] || need_apt+=(libc6-dev)
have pkg-config || need_apt+=(pkg-config)
# pcpustat (the README's next commands): serve's HTTP/TLS server, gzip, web
# configuration file and bcrypt; push's HTTP client, snappy and protobuf-c.
pkg-config --exists libmicrohttpd 2>/dev/null || need_apt+=(libmicrohttpd-dev)
pkg-config --exists gnutls 2>/dev/null || need_apt+=(libgnutls28-dev)
pkg-config --exists zlib 2>/dev/null || need_apt+=(zlib1g-dev)
pkg-config --exists yaml-0.1 2>/dev/null || need_apt+=(libyaml-dev)
pkg-config --exists libcrypt 2>/dev/null || need_apt+=(libcrypt-dev)
pkg-config --exists libcurl 2>/dev/null || need_apt+=(libcurl4-openssl-dev)
[ -e /usr/include/snappy-c.h ] || need_apt+=(libsnappy-dev)
have protoc-c  || need_apt+=(protobuf-c-compiler)
[ -e /usr/include/protobuf-c/protobuf-c.h ] || need_apt+=(libprotobuf-c-dev)
# protoc-c's protobuf-c.proto imports descriptor.proto, from libprotobuf-dev.
[ -e /usr/include/google/protobuf/descriptor.proto ] || need_apt+=(libprotobuf-dev)
# `man pcpu` (the README's first program's next step).
have man       || need_apt+=(man-db)
if [ $mode = nginx ]; then
  # The README's nginx commands: nginx, and nginx-dev, its module build
  # system (/usr/share/nginx/src), where CMake finds it at its next run.
  have nginx || [ -x /usr/sbin/nginx ] || need_apt+=(nginx)
  [ -e /usr/share/nginx/src/configure ] || need_apt+=(nginx-dev)
  install_apt
  exit 0
fi
if [ $mode = demo ]; then
  install_apt
  exit 0
fi

# ---- the quick tier: the plain build with its tests, benchmarks and examples
# (CMake stops without valgrind, a C++ compiler, python3 or liburcu), and
# the unit tests (ctest -L unit): promtool (stats_expose_promtool, the
# exporter's), protoc (stats_protobuf), openssl and htpasswd (the
# exporter's TLS and auth), readelf/objdump/nm/c++filt (the section, layer
# and ABI checks), the de_DE locale and the Python packages below.
have valgrind  || need_apt+=(valgrind)
have g++       || need_apt+=(g++)
pkg-config --exists liburcu-memb 2>/dev/null || need_apt+=(liburcu-dev)
have promtool  || need_apt+=(prometheus)
have python3   || need_apt+=(python3)
python3 -c 'import ensurepip, venv' 2>/dev/null || need_apt+=(python3-venv)
have readelf   || need_apt+=(binutils)
have openssl   || need_apt+=(openssl)
have htpasswd  || need_apt+=(apache2-utils)
# protoc: the protobuf exposition test's independent decoder (Python
# protobuf).
have protoc    || need_apt+=(protobuf-compiler)

# ---- the test suite: everything else ---------------------------------------------
if [ $mode = all ]; then
  have clang     || need_apt+=(clang)
  [ -n "$(ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a 2>/dev/null)" ] || need_apt+=(libclang-rt-14-dev)
  have dpkg-buildpackage || need_apt+=(dpkg-dev)
  dpkg -s build-essential >/dev/null 2>&1 || need_apt+=(build-essential)
  have dh        || need_apt+=(debhelper)
  have lintian   || need_apt+=(lintian)
  have groff     || need_apt+=(groff-base)
  # abidiff, abidw (libabigail): ctest abi_compat compares the C libraries'
  # ABI with the committed baseline (abi/) and with the previous release's.
  have abidiff   || need_apt+=(abigail-tools)
  # prometheus-cpp: the statistics benchmark's Histogram::Observe comparison
  # (optional there: the quick tier builds it without).
  [ -e /usr/include/prometheus/histogram.h ] || need_apt+=(prometheus-cpp-dev)
  # The aarch64 cross build (cmake/toolchain-aarch64-linux-gnu.cmake) and
  # tests/check_rseq_sections.py on its binaries (aarch64-linux-gnu-objdump).
  have aarch64-linux-gnu-gcc || need_apt+=(gcc-aarch64-linux-gnu)
  [ -e /usr/aarch64-linux-gnu/include/stdio.h ] || need_apt+=(libc6-dev-arm64-cross)
  have aarch64-linux-gnu-objdump || need_apt+=(binutils-aarch64-linux-gnu)
  # The ARMv7 (armhf) and riscv64 cross builds (cmake/toolchain-cross.cmake with
  # PCPU_CROSS_TRIPLET arm-linux-gnueabihf or riscv64-linux-gnu) for their
  # emulated machines, and tests/check_rseq_sections.py on their binaries.
  have arm-linux-gnueabihf-gcc || need_apt+=(gcc-arm-linux-gnueabihf)
  [ -e /usr/arm-linux-gnueabihf/include/stdio.h ] || need_apt+=(libc6-dev-armhf-cross)
  have arm-linux-gnueabihf-objdump || need_apt+=(binutils-arm-linux-gnueabihf)
  have riscv64-linux-gnu-gcc || need_apt+=(gcc-riscv64-linux-gnu)
  [ -e /usr/riscv64-linux-gnu/include/stdio.h ] || need_apt+=(libc6-dev-riscv64-cross)
  have riscv64-linux-gnu-objdump || need_apt+=(binutils-riscv64-linux-gnu)
  # The emulated machines (scripts/vm/run.sh): the emulators, cpio for the
  # initramfs, and dpkg-deb and apt-get to fetch and unpack the kernels.
  have qemu-system-aarch64 || need_apt+=(qemu-system-arm)
  have qemu-system-x86_64 || need_apt+=(qemu-system-x86)
  have qemu-system-riscv64 || need_apt+=(qemu-system-misc)
  have cpio      || need_apt+=(cpio)
  # curl: bench/prefork_anchor.py times HTTP scrapes (pcpustat serve,
  # prometheus_client's start_http_server) with it.
  have curl      || need_apt+=(curl)
  have gzip      || need_apt+=(gzip)
  [ -e /usr/share/keyrings/debian-archive-keyring.gpg ] || need_apt+=(debian-archive-keyring)

  # C++ (issue 28): prometheus-cpp's own core tests against libpcpu-prometheus
  # (GoogleTest and gmock's main), its core benchmarks (Google Benchmark);
  # both compilers compile every C++ header; prometheus-cpp-dev (above) is the
  # real library they are compared with. The peer's sources are fetched at
  # test time (tests/cxx/promcpp_peer.sh, apt-get source with a list of its own).
  [ -e /usr/lib/x86_64-linux-gnu/libgmock_main.a ] || [ -n "$(ls /usr/lib/*/libgmock_main.a 2>/dev/null)" ] || need_apt+=(libgmock-dev)
  [ -n "$(ls /usr/lib/*/libgtest.a 2>/dev/null)" ] || need_apt+=(libgtest-dev)
  [ -e /usr/include/benchmark/benchmark.h ] || need_apt+=(libbenchmark-dev)
  have clang++   || need_apt+=(clang)
  # prometheus-cpp's push API on pcpu (libpcpu-prometheus-push): its tests
  # push to a real Pushgateway (Debian prometheus-pushgateway, the server is
  # started by each test on a port of its own, never as a service).
  have prometheus-pushgateway || need_apt+=(prometheus-pushgateway)

  # nginx's pcpu module (integrations/nginx, issue 52): nginx, the server its
  # tests run; nginx-dev, the packaged nginx's module build system
  # (/usr/share/nginx/src with its configure flags) and dh_nginx for the
  # libnginx-mod-http-pcpu package; wrk, the load of the exactness test and
  # of bench/nginx_bench.py; chromium, the status page's headless test (with
  # a screenshot); libnginx-mod-stream, nginx's stream module, which the
  # stream module's test loads before ngx_stream_pcpu_module. Debian
  # packages only: no browser or tool is downloaded.
  have nginx     || [ -x /usr/sbin/nginx ] || need_apt+=(nginx)
  [ -e /usr/share/nginx/src/configure ] || need_apt+=(nginx-dev)
  [ -e /usr/lib/nginx/modules/ngx_stream_module.so ] || need_apt+=(libnginx-mod-stream)
  have strace    || need_apt+=(strace)  # which thread reads in nginx_display
  have wrk       || need_apt+=(wrk)
  have chromium  || need_apt+=(chromium)

  # PostgreSQL's pcpu_stat_statements (integrations/postgresql, issue 64):
  # the server its tests run (postgresql-15: postgres, initdb, pg_ctl,
  # pgbench, psql, and pg_stat_statements, which they compare with) and
  # its extension build system (postgresql-server-dev-15: pg_config's PGXS
  # makefiles and the server's headers). The tests make their own cluster,
  # as the postgres user the package creates; no service is started here.
  [ -x /usr/lib/postgresql/15/bin/postgres ] || need_apt+=(postgresql-15)
  [ -e /usr/lib/postgresql/15/lib/pgxs/src/makefiles/pgxs.mk ] || need_apt+=(postgresql-server-dev-15)
  # The Debian packages' build dependency for postgresql-15-pcpu
  # (debian/control; pg_buildext itself is postgresql-common's).
  dpkg -s postgresql-server-dev-all >/dev/null 2>&1 || need_apt+=(postgresql-server-dev-all)
fi

install_apt

# A decimal-comma locale for the locale-independence tests (test_format,
# stats_tool_numbers); Debian's locales package ships the definition.
if ! locale -a 2>/dev/null | grep -qix 'de_DE\.utf-\?8' && command -v localedef >/dev/null; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO localedef -i de_DE -f UTF-8 de_DE.UTF-8 || echo "install-deps: could not build de_DE.UTF-8"
fi

# The tests' Python packages, in a virtual environment of their own: the
# system Python is never written to. --system-site-packages: the venv also
# sees what the base interpreter has (Debian's python3-* packages), and pip
# adds only what is missing. scripts/test.sh puts its bin/ first on PATH;
# CMake finds its python3 first (PCPU_PYTHON3).
venv=${XDG_CACHE_HOME:-$HOME/.cache}/pcpu-venv
if [ ! -x "$venv/bin/python3" ]; then
  echo "install-deps: python3 -m venv $venv (the tests' Python packages)"
  mkdir -p "$(dirname "$venv")"
  python3 -m venv --system-site-packages "$venv"
fi
py() { "$venv/bin/python3" "$@"; }
py_need=()
py -c 'import prometheus_client' 2>/dev/null || py_need+=(prometheus_client)
if [ $mode = all ]; then
  py -c 'import matplotlib' 2>/dev/null || py_need+=(matplotlib)
  py -c 'import pytest' 2>/dev/null || py_need+=(pytest)
fi
py -c 'import google.protobuf' 2>/dev/null || py_need+=("protobuf>=4.21,<5")
# pcpustat push's OTLP tests decode the requests with the published schema.
py -c 'import opentelemetry.proto.collector.metrics.v1.metrics_service_pb2' 2>/dev/null \
  || py_need+=("opentelemetry-proto>=1.20,<1.28")
# ... and push_otlp_grpc serves OTLP/gRPC with it (grpcio, which the
# generated metrics_service_pb2_grpc module needs).
py -c 'import grpc' 2>/dev/null || py_need+=("grpcio>=1.60")
if [ ${#py_need[@]} -gt 0 ]; then
  echo "install-deps: $venv/bin/pip install ${py_need[*]}"
  py -m pip install --quiet --disable-pip-version-check "${py_need[@]}"
fi
[ $mode = quick ] && exit 0

# The Python package's build requirements, as wheels, in $venv/wheels
# (CMake's PCPU_PYTHON_WHEELS): ctest python_venv, python_prefix and
# python_binding's install test `pip install` the package into bare
# virtual environments, offline (--no-index --find-links), and pip builds
# it with these in an environment of its own, as it does for a user from
# the index. So no interpreter's own setuptools or wheel takes part (issue
# 62). The requirements are pyproject.toml's [build-system] line itself,
# bounded there; the index is asked only when the wheels there do not meet it.
wheels=$venv/wheels
src=$(cd "$(dirname "$0")/.." && pwd)
mapfile -t build_reqs < <(py - "$src/python/pyproject.toml" <<'PY'
import re, sys
table = re.search(r"^\[build-system\]$(.*?)(?=^\[|\Z)", open(sys.argv[1]).read(), re.M | re.S)
reqs = re.search(r"^requires\s*=\s*\[(.*?)\]", table.group(1) if table else "", re.M | re.S)
print("\n".join(re.findall(r'"([^"]+)"', reqs.group(1) if reqs else "")))
PY
)
[ ${#build_reqs[@]} -gt 0 ] && [ -n "${build_reqs[0]}" ] \
  || { echo "install-deps: python/pyproject.toml has no [build-system] requires" >&2; exit 1; }
pip_wheels() { py -m pip download --quiet --disable-pip-version-check --only-binary :all: --dest "$wheels" "$@" "${build_reqs[@]}"; }
if ! pip_wheels --no-index --find-links "$wheels" >/dev/null 2>&1; then
  echo "install-deps: $venv/bin/pip download ${build_reqs[*]} (into $wheels)"
  pip_wheels
fi

# The Rust crates' emulated machines (scripts/vm/run.sh --rust): the
# standard library for aarch64 (rust/pcpu-vm is cross-built statically for
# it; x86-64's is the host's). Only where rustup manages the toolchain.
if command -v rustup >/dev/null && ! rustup target list --installed | grep -qx aarch64-unknown-linux-gnu; then
  echo "install-deps: rustup target add aarch64-unknown-linux-gnu"
  rustup target add aarch64-unknown-linux-gnu || echo "install-deps: could not add the aarch64 Rust target"
fi
# Miri (scripts/test.sh's Miri step: the pcpu crate's safe layer under
# the interpreter, the C library run natively): a nightly toolchain with
# the miri and rust-src components.
if command -v rustup >/dev/null && ! cargo +nightly miri --version >/dev/null 2>&1; then
  echo "install-deps: rustup toolchain install nightly (miri, rust-src)"
  rustup toolchain install nightly --profile minimal --component miri,rust-src \
    || echo "install-deps: could not install Miri"
fi
exit 0
