#!/usr/bin/env bash
# The Debian packages, built and used as a user would:
#  1. dpkg-buildpackage -us -uc -b builds libpcpu1, libpcpu-stats1, libpcpu-dev and
#     pcpu-tools from a copy of the source tree (debian/rules builds the
#     library and tools only: no test suite);
#  2. lintian reports no error;
#  3. each package holds what it should (dpkg -c);
#  4. unpacked with dpkg -x into a throwaway root, the -dev package builds
#     consumers through pkg-config and CMake's find_package; a program built
#     that way publishes a segment that the packaged pcpustat and the Python
#     binding (over the packaged libpcpu-stats.so.1) read back; the manual pages
#     are found by man;
#  5. a static link against libpcpu.a works as a user of libpcpu-dev does it
#     (pkg-config --static, CMake's pcpu::pcpu_static), and every library
#     those name (pcpu.pc's Libs.private, the static target's
#     INTERFACE_LINK_LIBRARIES) belongs to a package libpcpu-dev depends on:
#     on a machine with only libpcpu-dev installed, the link finds it.
# Exit 77 (skipped, and ctest says so) only on a system without dpkg at all;
# on Debian a missing tool is a failure: scripts/install-deps.sh installs it.
# usage: deb_test.sh SOURCE_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
fail() { echo "deb_test: $*" >&2; exit 1; }
command -v dpkg >/dev/null || { echo "deb_test: not a Debian system (no dpkg): skipped"; exit 77; }
for t in dpkg-buildpackage dh lintian pkg-config cmake ninja man python3; do
  command -v "$t" >/dev/null || fail "$t not found: run scripts/install-deps.sh"
done
work=$(mktemp -d /tmp/pcpu-deb.XXXXXX)
trap 'rm -rf "$work"' EXIT

# ---- 1. build -------------------------------------------------------------------
mkdir "$work/src"
tar -C "$src" --exclude=./.git --exclude=./build --exclude='./build-*' --exclude='./obj-*' \
  --exclude=./debian/tmp --exclude=./debian/.debhelper -cf - . | tar -C "$work/src" -xf -
jobs=$(nproc)
if ! (cd "$work/src" && DEB_BUILD_OPTIONS="parallel=$jobs" dpkg-buildpackage -us -uc -b) \
     >"$work/build.log" 2>&1; then
  tail -40 "$work/build.log"; fail "dpkg-buildpackage failed"
fi
changes=$(ls "$work"/pcpu_*.changes)
for p in libpcpu1 libpcpu-stats1 libpcpu-prometheus1 libpcpu-dev pcpu-tools; do
  ls "$work/${p}"_*.deb >/dev/null 2>&1 || fail "no $p package built"
done

# ---- 2. lintian -----------------------------------------------------------------
lintian --fail-on error --no-tag-display-limit "$changes" >"$work/lintian.log" 2>&1 \
  || { cat "$work/lintian.log"; fail "lintian reports errors"; }
grep -E '^[EW]: ' "$work/lintian.log" || true

# ---- 3. contents ----------------------------------------------------------------
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
for p in libpcpu1 libpcpu-stats1 libpcpu-prometheus1 libpcpu-dev pcpu-tools; do
  dpkg -c "$work/${p}"_*.deb | awk '{print $6}' >"$work/$p.list"
done
has() { # package, path (regex)
  grep -qE "^\./$2\$" "$work/$1.list" || fail "$1 lacks $2"
}
has libpcpu1 "usr/lib/$ma/libpcpu\.so\.1"
has libpcpu1 "usr/lib/$ma/libpcpu\.so\.1\.[0-9.]+"
has libpcpu-stats1 "usr/lib/$ma/libpcpu-stats\.so\.1"
has libpcpu-stats1 "usr/lib/$ma/libpcpu-stats\.so\.1\.[0-9.]+"
has libpcpu-dev "usr/lib/$ma/libpcpu-stats\.so"
has libpcpu-dev "usr/lib/$ma/libpcpu-stats\.a"
has libpcpu-dev "usr/lib/$ma/pkgconfig/pcpu-stats\.pc"
has libpcpu-dev "usr/include/pcpu/pcpu\.h"
has libpcpu-dev "usr/lib/$ma/libpcpu\.so"
has libpcpu-dev "usr/lib/$ma/libpcpu\.a"
has libpcpu-dev "usr/lib/$ma/pkgconfig/pcpu\.pc"
has libpcpu-dev "usr/lib/$ma/cmake/pcpu/pcpuConfig\.cmake"
has libpcpu-dev "usr/share/man/man3/pcpu_counter_add\.3\.gz"
# prometheus-cpp's push library (libcurl is a Build-Depends: always built).
has libpcpu-prometheus1 "usr/lib/$ma/libpcpu-prometheus-push\.so\.1"
has libpcpu-dev "usr/lib/$ma/libpcpu-prometheus-push\.so"
has libpcpu-dev "usr/lib/$ma/pkgconfig/pcpu-prometheus-push\.pc"
has libpcpu-dev "usr/include/pcpu-prometheus/prometheus/gateway\.h"
has pcpu-tools "usr/bin/pcpustat"
# prometheus-cpp's pull API (libpcpu-prometheus-pull, prometheus::Exposer).
has libpcpu-prometheus1 "usr/lib/$ma/libpcpu-prometheus-pull\.so\.1"
has libpcpu-dev "usr/lib/$ma/libpcpu-prometheus-pull\.so"
has libpcpu-dev "usr/lib/$ma/pkgconfig/pcpu-prometheus-pull\.pc"
has libpcpu-dev "usr/include/pcpu-prometheus/prometheus/exposer\.h"
has pcpu-tools "usr/share/man/man1/pcpustat\.1\.gz"
! grep -q 'include/' "$work/libpcpu1.list" || fail "libpcpu1 ships headers"
! grep -q 'libpcpu-stats' "$work/libpcpu1.list" || fail "libpcpu1 ships libpcpu-stats"
[[ $(dpkg-deb -f "$work"/libpcpu-dev_*.deb Depends) == *"libpcpu1 (= "* ]] || fail "libpcpu-dev does not depend on its libpcpu1"
[[ $(dpkg-deb -f "$work"/libpcpu-dev_*.deb Depends) == *"libpcpu-stats1 (= "* ]] || fail "libpcpu-dev does not depend on its libpcpu-stats1"
# libpcpu-stats calls libpcpu's private interface: only the same build's.
[[ $(dpkg-deb -f "$work"/libpcpu-stats1_*.deb Depends) == *"libpcpu1 (= "* ]] || fail "libpcpu-stats1 does not depend on its own libpcpu1"
[[ $(dpkg-deb -f "$work"/libpcpu1_*.deb Depends) != *protobuf* ]] || fail "libpcpu1 depends on protobuf-c"
[[ $(dpkg-deb -f "$work"/pcpu-tools_*.deb Depends) == *libpcpu-stats1* ]] || fail "pcpu-tools does not depend on libpcpu-stats1"

# ---- 4. use the unpacked packages -------------------------------------------------
root=$work/root
for p in libpcpu1 libpcpu-stats1 libpcpu-prometheus1 libpcpu-dev pcpu-tools; do dpkg -x "$work/${p}"_*.deb "$root"; done
lib=$root/usr/lib/$ma
export LD_LIBRARY_PATH=$lib
# pkg-config: the .pc says /usr; the sysroot maps it to the unpacked root.
[ "$(PKG_CONFIG_LIBDIR=$lib/pkgconfig pkg-config --variable=includedir pcpu)" = /usr/include ] \
  || fail "pcpu.pc: includedir is not /usr/include"
cflags=$(PKG_CONFIG_LIBDIR=$lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$root pkg-config --cflags pcpu)
libs=$(PKG_CONFIG_LIBDIR=$lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$root pkg-config --libs pcpu)
echo "pkg-config --cflags --libs pcpu: $cflags $libs"
cc $cflags "$src/tests/install_consumer/consumer_counter.c" -o "$work/pc_counter" $libs -pthread
"$work/pc_counter"
libs=$(PKG_CONFIG_LIBDIR=$lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$root pkg-config --libs pcpu-stats)
echo "pkg-config --libs pcpu-stats: $libs"
cc $cflags "$src/tests/install_consumer/consumer.c" -o "$work/pc_consumer" $libs -pthread
"$work/pc_consumer"
cc $cflags "$src/tests/packaging/publisher.c" -o "$work/publisher" $libs -pthread
# CMake: find_package(pcpu) in the unpacked /usr (shared, static, C++).
cmake -S "$src/tests/install_consumer" -B "$work/cmake" -G Ninja -DCMAKE_PREFIX_PATH="$root/usr" >/dev/null
cmake --build "$work/cmake" >/dev/null
"$work/cmake/consumer_counter"; "$work/cmake/consumer_c"; "$work/cmake/consumer_cxx"; "$work/cmake/consumer_static"
# The packaged tool reads what a program built against the package publishes.
mkdir -m 700 "$work/segs"
export PCPU_SEGMENT_DIR=$work/segs
coproc PUB { "$work/publisher" debtest; }
read -r line <&"${PUB[0]}"
[ "$line" = ready ] || fail "publisher: $line"
! readelf -d "$root/usr/bin/pcpustat" | grep -E 'RPATH|RUNPATH' || fail "/usr/bin/pcpustat has an RPATH"
out=$("$root/usr/bin/pcpustat" debtest)
echo "$out"
grep -qE 'debtest_events_total +4242' <<<"$out" || fail "pcpustat does not show debtest_events_total 4242"
[[ $("$root/usr/bin/pcpustat") == *debtest* ]] || fail "pcpustat does not list the segment"
# The Python binding over the packaged library.
PCPU_LIBRARY=$lib/libpcpu-stats.so.1 PYTHONPATH=$src/python/src PYTHONDONTWRITEBYTECODE=1 python3 - <<'PY'
import pcpu
with pcpu.open_segment("debtest") as seg:
    snap = seg.snapshot()
assert snap.family("debtest_events").series[0].value == 4242, snap
assert snap.family("debtest_depth").series[0].value == -5, snap
print("python: debtest_events_total", snap.family("debtest_events").series[0].value)
PY
exec {PUB[1]}>&-
wait "$PUB_PID" || fail "publisher failed"
[ -z "$(ls "$work/segs")" ] || fail "the publisher left its segment"
# Manual pages: man finds them in the unpacked tree, links included.
for page in pcpu pcpu_counter_add pcpu_counter_inc pcpu_reader_open pcpustat; do
  MANPATH=$root/usr/share/man man -w "$page" >/dev/null || fail "man $page: not found"
done
[[ $(MANPATH=$root/usr/share/man MANWIDTH=80 man -P cat pcpu_counter_inc 2>/dev/null) == *pcpu_counter_add* ]] \
  || fail "man pcpu_counter_inc does not show pcpu_counter_add(3)"

# ---- 5. static linking ------------------------------------------------------------
# Every library a static link needs comes with libpcpu-dev's dependencies.
dev_depends=$(dpkg-deb -f "$work"/libpcpu-dev_*.deb Depends)
echo "libpcpu-dev Depends: $dev_depends"
owner() { # a library file -> the package that ships it
  dpkg-query -S "$1" 2>/dev/null | sed -n '1s/:.*//p'
}
needs() { # what names the library, the file
  local pkg
  pkg=$(owner "$2")
  [ -n "$pkg" ] || fail "$1 names $2, which no installed package ships"
  [[ ", $dev_depends," == *", $pkg"[\ ,]* ]] \
    || fail "$1 names $2 (package $pkg), but libpcpu-dev does not depend on $pkg: a static link fails where $pkg is not installed"
  echo "static link: $1 needs $2, from $pkg: a dependency of libpcpu-dev"
}
private="$(sed -n 's/^Libs\.private://p' "$lib/pkgconfig/pcpu.pc") $(sed -n 's/^Libs\.private://p' "$lib/pkgconfig/pcpu-stats.pc")"
for flag in $private; do
  case $flag in
  -lpthread | -lm | -lrt | -ldl | -lc | -pthread) ;;
  -l*)
    so=
    for d in /usr/lib/$ma /lib/$ma /usr/lib /lib; do
      [ -e "$d/lib${flag#-l}.so" ] && { so=$d/lib${flag#-l}.so; break; }
    done
    [ -n "$so" ] || fail "pcpu.pc Libs.private names $flag: lib${flag#-l}.so not found on this machine"
    needs "pcpu.pc Libs.private ($flag)" "$so" ;;
  *) fail "pcpu.pc Libs.private: unexpected '$flag'" ;;
  esac
done
targets=$lib/cmake/pcpu/pcpuTargets.cmake
static_libs=$(awk '/set_target_properties\(pcpu::stats_static /{t=1} t && /INTERFACE_LINK_LIBRARIES/{print; exit}' "$targets" \
  | sed 's/.*INTERFACE_LINK_LIBRARIES "\(.*\)"/\1/')
[ -n "$static_libs" ] || fail "no INTERFACE_LINK_LIBRARIES for pcpu::stats_static in $targets"
IFS=';' read -ra items <<<"$static_libs"
for item in "${items[@]}"; do
  item=${item#\$<LINK_ONLY:}
  item=${item%>}
  case $item in
  Threads::Threads | pcpu::pcpu_static) ;;
  /*) needs "pcpu::stats_static" "$item" ;;
  *) fail "pcpu::stats_static links '$item': neither Threads, pcpu::pcpu_static nor a library file" ;;
  esac
done
# The static link itself, with pkg-config --static: libpcpu-stats.a,
# libpcpu.a, and what Libs.private adds, linked statically too where an
# archive exists.
static_libs_pc=$(PKG_CONFIG_LIBDIR=$lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$root pkg-config --static --libs pcpu-stats)
echo "pkg-config --static --libs pcpu-stats: $static_libs_pc"
cc $cflags "$src/tests/install_consumer/consumer.c" -o "$work/static_consumer" \
  -Wl,-Bstatic $static_libs_pc -Wl,-Bdynamic
! readelf -d "$work/static_consumer" | grep -q 'libpcpu.*\.so' || fail "the pkg-config --static consumer links libpcpu*.so"
"$work/static_consumer"
echo "deb_test: ok ($(cd "$work" && ls *.deb | tr '\n' ' '))"
