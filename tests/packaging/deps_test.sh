#!/usr/bin/env bash
# What the project's scripts install, and where (issue 50):
#  1. `scripts/install-deps.sh --demo`, run where nothing is installed (a
#     PATH of stubs: apt-get records what it is asked for), asks apt-get for
#     the demonstration's packages only -- a compiler, CMake, Ninja,
#     pkg-config, pcpustat's libraries, man -- never the test suite's
#     (emulators, cross compilers, valgrind, Prometheus, fuzzers, lintian,
#     Python), and runs no pip, rustup, cargo or localedef;
#  1b. `scripts/install-deps.sh --quick` on that machine (issue 62) asks
#     apt-get for what the plain build and the unit tier use -- the demo's,
#     g++, valgrind, liburcu-dev, Prometheus, protoc, openssl, apache2-utils,
#     binutils -- and pip, in the tests' venv, for the unit tier's Python
#     packages, never for the whole suite's (emulators, cross compilers,
#     clang, Chromium, nginx, Debian packaging tools, matplotlib, the build
#     wheels), and runs no rustup or cargo; scripts/test.sh --quick asks
#     for --quick, the whole run for everything;
#  2. scripts/demo.sh asks for --demo, not the whole set, and configures a
#     new build folder without the test suite;
#  3. nothing writes into the system Python: no --break-system-packages, and
#     every pip of install-deps.sh is the tests' virtual environment's;
#  4. every python3 the tests' CMake files run is ${PCPU_PYTHON3}.
# usage: deps_test.sh SOURCE_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "deps_test: $*" >&2; exit 1; }

# ---- 1. install-deps.sh --demo on an empty machine ----
stub=$work/bin
mkdir "$stub"
for t in apt-get sudo python3 pip pip3 rustup cargo localedef locale valgrind; do
  cat >"$stub/$t" <<EOF
#!$BASH
echo "$t \$*" >>"$work/calls"
EOF
  chmod +x "$stub/$t"
done
printf '#!%s\necho 0\n' "$BASH" >"$stub/id"
chmod +x "$stub/id"
PATH=$stub "$BASH" "$src/scripts/install-deps.sh" --demo >"$work/out" 2>&1 \
  || { cat "$work/out"; fail "install-deps.sh --demo failed"; }
[ -f "$work/calls" ] || fail "install-deps.sh --demo asked apt-get for nothing on an empty machine"
echo "install-deps.sh --demo on an empty machine: $(grep '^apt-get install' "$work/calls" || true)"
! grep -vE '^(apt-get (update|install) )' "$work/calls" || fail "install-deps.sh --demo ran more than apt-get"
wanted=$(sed -n 's/^apt-get install //p' "$work/calls" | tr ' ' '\n' | grep -v '^-' | sort -u)
for p in cmake ninja-build gcc pkg-config libmicrohttpd-dev man-db; do
  grep -qx "$p" <<<"$wanted" || fail "install-deps.sh --demo does not install $p"
done
for p in $wanted; do
  case $p in
  valgrind | qemu-* | prometheus* | clang* | libclang* | gcc-*-linux-* | binutils-*-linux-* | \
  libc6-dev-*-cross | lintian | debhelper | dpkg-dev | build-essential | python3* | liburcu* | \
  libgtest* | libgmock* | libbenchmark* | g++ | apache2-utils | openssl | cpio | curl)
    fail "install-deps.sh --demo installs $p, which the demonstration neither builds nor shows" ;;
  esac
done

# ---- 1b. install-deps.sh --quick on an empty machine ----
# Its python3 makes a venv whose python3 has nothing (every import fails,
# so every package is asked for) and records what pip is asked.
calls=$work/calls-quick
cat >"$stub/python3" <<EOF
#!$BASH
echo "python3 \$*" >>"$calls"
if [ "\$1 \$2" = "-m venv" ]; then
  d=\${!#}
  mkdir -p "\$d/bin"
  printf '#!%s\necho "venv-python \$*" >>"%s"\n[ "\$1" != -c ]\n' "$BASH" "$calls" >"\$d/bin/python3"
  chmod +x "\$d/bin/python3"
fi
EOF
for t in apt-get localedef rustup cargo; do
  printf '#!%s\necho "%s $*" >>"%s"\n' "$BASH" "$t" "$calls" >"$stub/$t"
done
rm "$stub/valgrind" # (a stub for 1: here, not installed)
for t in mkdir dirname chmod; do ln -s "$(command -v $t)" "$stub/$t"; done
PATH=$stub XDG_CACHE_HOME=$work/cache "$BASH" "$src/scripts/install-deps.sh" --quick >"$work/out" 2>&1 \
  || { cat "$work/out"; fail "install-deps.sh --quick failed"; }
echo "install-deps.sh --quick on an empty machine: $(grep '^apt-get install' "$calls" || true)"
wanted=$(sed -n 's/^apt-get install //p' "$calls" | tr ' ' '\n' | grep -v '^-' | sort -u)
for p in cmake ninja-build gcc pkg-config libmicrohttpd-dev valgrind g++ liburcu-dev prometheus \
         protobuf-compiler openssl apache2-utils binutils; do
  grep -qx "$p" <<<"$wanted" || fail "install-deps.sh --quick does not install $p"
done
for p in $wanted; do
  case $p in
  qemu-* | clang* | libclang* | gcc-*-linux-* | binutils-*-linux-* | libc6-dev-*-cross | lintian | \
  debhelper | dpkg-dev | build-essential | nginx* | wrk | chromium | abigail-tools | libgtest* | \
  libgmock* | libbenchmark* | prometheus-cpp-dev | prometheus-pushgateway | cpio | curl | \
  debian-archive-keyring | groff*)
    fail "install-deps.sh --quick installs $p, which the quick tier does not use" ;;
  esac
done
pips=$(sed -n 's/^venv-python -m pip //p' "$calls")
for p in prometheus_client protobuf opentelemetry-proto grpcio; do
  grep -q "^install .* $p" <<<"$pips" || fail "install-deps.sh --quick does not pip install $p: $pips"
done
! grep -E 'matplotlib|pytest|download' <<<"$pips" \
  || fail "install-deps.sh --quick asks pip for more than the unit tier's packages"
! grep -E '^(rustup|cargo) ' "$calls" || fail "install-deps.sh --quick runs rustup or cargo"
grep -qx 'deps_mode=""' "$src/scripts/test.sh" \
  && grep -qx '\[ $quick -eq 1 \] && deps_mode=--quick' "$src/scripts/test.sh" \
  && grep -q '^bash scripts/install-deps.sh $deps_mode ||' "$src/scripts/test.sh" \
  || fail "scripts/test.sh does not run install-deps.sh --quick for --quick, the whole of it otherwise"

# ---- 2. demo.sh ----
grep -qE '^bash scripts/install-deps.sh --demo$' "$src/scripts/demo.sh" \
  || fail "scripts/demo.sh does not run install-deps.sh --demo"
! grep -nE 'install-deps.sh *($|[^ -]|\|\|)' "$src/scripts/demo.sh" | grep -v -- '--demo' \
  || fail "scripts/demo.sh runs the whole install-deps.sh"
grep -q -- '-DPCPU_BUILD_TESTS=OFF' "$src/scripts/demo.sh" || fail "scripts/demo.sh builds the test suite"
! grep -nE '\bctest\b' "$src/scripts/demo.sh" | grep -v '^[0-9]*: *#' || fail "scripts/demo.sh runs tests"

# ---- 3. the system Python ----
! grep -rn --include='*.sh' --include='*.py' --include='CMakeLists.txt' -e '--break-system-packages' \
    "$src/scripts" "$src/tests" "$src/bench" "$src/CMakeLists.txt" | grep -v 'deps_test.sh' \
  || fail "something installs into the system Python"
bad=$(grep -n 'pip install\|-m pip' "$src/scripts/install-deps.sh" | grep -v '^[0-9]*: *#' \
  | grep -v 'py -m pip\|\$venv/bin/pip' || true)
[ -z "$bad" ] || fail "install-deps.sh runs a pip outside the tests' virtual environment: $bad"

# ---- 4. the tests' python3 ----
bad=$(grep -rnE 'COMMAND +python3?\b' "$src/tests" "$src/bench" --include=CMakeLists.txt || true)
[ -z "$bad" ] || fail "a test runs a bare python3 instead of \${PCPU_PYTHON3}: $bad"
echo "deps_test: ok"
