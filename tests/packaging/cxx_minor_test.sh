#!/bin/sh
# Two minor releases of the prometheus-cpp layer installed side by side
# (issue 62). The layer's C++ ABI may change with any minor release
# (docs/stability.md), so each minor is another library: its SONAME carries
# major.minor (libpcpu-prometheus.so.0.2), as its symbol node does
# (PCPU_PROMETHEUS_0.2), and its Debian package is named after it
# (libpcpu-prometheus0.2, Debian Policy 8.1). An upgrade to the next minor
# then installs a library beside the old one, never over it.
#
# This build is release A (major.minor of project()). Release B is built
# here from a copy of the tree with the minor raised: libpcpu,
# libpcpu-stats and libpcpu-prometheus only, unoptimised (the cheapest
# build that links). Both are installed into one prefix, A first, as an
# upgrade does (`cmake --install --component`: the runtime components,
# pcpu, stats, prometheus; B's C libraries replace A's, whose SONAME is the
# same). Then:
#   1. A's program (PROBE, built against this build, no RUNPATH) still
#      starts and runs on A's layer;
#   2. B's program (the same source, built against B) runs on B's layer;
#   3. each library's SONAME is libpcpu-prometheus.so.<major.minor>;
#   4. with A's layer removed (the package removed), A's program is refused
#      by the loader, before main: "libpcpu-prometheus.so.<A>: cannot open
#      shared object file".
# Under the former scheme (SONAME .so.1 for every minor) B's install
# replaced A's libpcpu-prometheus.so.1, and A's program failed to start
# ("version `PCPU_PROMETHEUS_0.2' not found"): check 1 fails.
#
#   cxx_minor_test.sh SOURCE_DIR BUILD_DIR PROBE CXX
set -eu
src=$1 build=$2 probe=$3 cxx=$4
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pcpu-cxx-minor.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

version=$(sed -n 's/^project(pcpu VERSION \([0-9]*\.[0-9]*\)\.[0-9]*.*/\1/p' "$src/CMakeLists.txt")
[ -n "$version" ] || fail "no project(pcpu VERSION x.y.z) in $src/CMakeLists.txt"
a=$version
b=${version%%.*}.$((${version#*.} + 1))
echo "release A: $a (this build); release B: $b (built here)"

# B: a copy of the tree with the minor raised.
mkdir "$tmp/tree"
cp -R "$src/CMakeLists.txt" "$src/cmake" "$src/include" "$src/src" "$src/compat" "$src/man" "$tmp/tree/"
sed "s/^project(pcpu VERSION [0-9]*\.[0-9]*\.[0-9]*/project(pcpu VERSION $b.0/" "$src/CMakeLists.txt" \
	>"$tmp/tree/CMakeLists.txt"
grep -q "^project(pcpu VERSION $b\.0" "$tmp/tree/CMakeLists.txt" || fail "could not raise the minor"
cmake -S "$tmp/tree" -B "$tmp/b" -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_COMPILER="$cxx" \
	-DPCPU_BUILD_TESTS=OFF -DPCPU_BUILD_BENCH=OFF -DPCPU_BUILD_EXAMPLES=OFF -DPCPU_BUILD_TOOLS=OFF \
	-DPCPU_BUILD_NGINX=OFF -DPCPU_BUILD_POSTGRESQL=OFF -DPCPU_PROTOBUF=OFF -DPCPU_INSTALL_PYTHON=OFF >"$tmp/configure.log" 2>&1 ||
	{ tail -20 "$tmp/configure.log"; fail "configuring release B"; }
cmake --build "$tmp/b" --target pcpu_prometheus -j2 >"$tmp/build.log" 2>&1 ||
	{ tail -20 "$tmp/build.log"; fail "building release B"; }

# Both installed into one prefix, A then B.
for tree in "$build" "$tmp/b"; do
	for component in pcpu stats prometheus; do
		cmake --install "$tree" --component "$component" --prefix "$tmp/usr" >/dev/null ||
			fail "cmake --install $tree --component $component"
	done
done
lib=$(dirname "$(ls "$tmp"/usr/lib*/libpcpu-prometheus.so.* | head -1)")
echo "installed: $(cd "$lib" && ls libpcpu-prometheus.so.* | tr '\n' ' ')"

# B's program: the same source, built against B's tree.
"$cxx" -std=c++17 -I"$tmp/tree/compat/prometheus-cpp/include" -I"$tmp/tree/include" -I"$tmp/b/include" \
	"$src/tests/packaging/cxx_minor_probe.cpp" -o "$tmp/probe-b" \
	-L"$tmp/b/compat/prometheus-cpp" -lpcpu-prometheus -L"$tmp/b" -lpcpu-stats -lpcpu -pthread ||
	fail "building the probe against release B"

# run NAME PROGRAM: the program with the prefix's libraries; output in
# $tmp/out, exit status in $rc.
run() {
	rc=0
	LD_LIBRARY_PATH=$lib "$2" >"$tmp/out" 2>&1 || rc=$?
	echo "  $1 (exit $rc): $(tail -1 "$tmp/out")"
}

# 1, 2: each program on its own minor's layer.
# own VERSION PROGRAM
own() {
	run "release $1's program, both releases installed" "$2"
	[ "$rc" = 0 ] && grep -q "^cxx_minor_probe: ok $lib/libpcpu-prometheus\.so\.$1\$" "$tmp/out" ||
		{ cat "$tmp/out"; fail "release $1's program does not run on release $1's layer once both are installed"; }
}
own "$a" "$probe"
own "$b" "$tmp/probe-b"

# 3: the SONAMEs.
for v in "$a" "$b"; do
	soname=$(readelf -d "$lib/libpcpu-prometheus.so.$v" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
	[ "$soname" = "libpcpu-prometheus.so.$v" ] || fail "release $v's SONAME is '$soname', not libpcpu-prometheus.so.$v"
done

# 4: A's layer removed: A's program never reaches main.
rm -f "$lib/libpcpu-prometheus.so.$a" "$lib/libpcpu-prometheus.so.$a".*
run "release $a's program, only release $b installed" "$probe"
if [ "$rc" = 0 ] || grep -q "main reached" "$tmp/out" ||
	! grep -q "libpcpu-prometheus\.so\.$a: cannot open shared object file" "$tmp/out"; then
	cat "$tmp/out"; fail "release $a's program was not refused at load by release $b's layer alone"
fi
echo "ok: release $a's and $b's layers side by side, each program on its own; $a's program refused by $b's alone"
