#!/usr/bin/env bash
# The Debian packages, built and used as a user would:
#  1. dpkg-buildpackage -us -uc -b builds every package of debian/control
#     from a copy of the source tree (debian/rules builds the libraries and
#     the tools only: no test suite), with the C libraries' symbols files
#     checked at dpkg-gensymbols' level 4 (a symbol added or removed fails);
#     here with -O3 -Werror appended to dpkg-buildflags' flags
#     (DEB_CFLAGS_APPEND: the test's build only, debian/rules is unchanged):
#     the optimiser's flow analysis at -O3, with _FORTIFY_SOURCE, warns
#     about what the RelWithDebInfo builds (-O2) do not see, and a warning
#     fails the build. This is the project's one build with prefix /usr
#     and the multiarch libdir (install_consumer builds none). What the
#     build leaves in the tree (obj-*/, debian/<package>/) is all ignored
#     by .gitignore;
#  2. lintian --pedantic -I reports nothing (overrides say why where they
#     are needed);
#  3. each package holds its library's files and no other library's, and
#     depends on what it needs and nothing more: libpcpu-dev (libpcpu's
#     headers and links) needs libpcpu1 alone -- no statistics, no C++, no
#     protobuf-c, no libcurl or libmicrohttpd; the C++ libraries' packages
#     carry the release's major.minor, as their SONAME does
#     (libpcpu-prometheus0.2), and so does the dependency a program built
#     against them gets (shlibs);
#  4. libpcpu-dev alone, with what it depends on among these packages,
#     unpacked with dpkg -x into a throwaway root, builds and runs the
#     README's first program, copied from README.md, through pkg-config pcpu
#     and through CMake's find_package(pcpu) and pcpu::pcpu; man finds
#     pcpu(3) there;
#  5. every package unpacked into another root: pkg-config names /usr/include
#     and /usr/lib/<multiarch> (a .pc that derives its prefix from its own
#     location gets both wrong), no .pc file names a run path and no
#     packaged library or program has an RPATH or RUNPATH (Debian policy);
#     consumers built through
#     pkg-config and CMake (C, C++, prometheus-cpp code); a program built
#     that way publishes a segment that the packaged pcpustat and the Python
#     binding (over the packaged libpcpu-stats.so.1) read back; the manual
#     pages are found by man;
#  6. the integrations' packages: nginx's two modules, each with its load
#     file, enabled in the order nginx must load them (the http module,
#     nginx's stream module, then the stream module), pass nginx -t
#     together; PostgreSQL's extension is where PostgreSQL 15's pg_config
#     says, and a cluster of its own (initdb in a temporary folder, as the
#     postgres user) preloads it from the package, CREATE EXTENSION works,
#     the view counts, and the packaged pcpustat reads the same counts from
#     outside (tests/packaging/pg_package_test.py);
#  7. a static link works as a user of the -dev packages does it
#     (pkg-config --static, CMake's pcpu::stats_static), and every library
#     those name (Libs.private, the static target's INTERFACE_LINK_LIBRARIES)
#     belongs to a package libpcpu-stats-dev depends on.
# Exit 77 (skipped, and ctest says so) only on a system without dpkg at all;
# on Debian a missing tool is a failure: scripts/install-deps.sh installs it.
# usage: deb_test.sh SOURCE_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
fail() { echo "deb_test: $*" >&2; exit 1; }
command -v dpkg >/dev/null || { echo "deb_test: not a Debian system (no dpkg): skipped"; exit 77; }
python=python3
for t in dpkg-buildpackage dh lintian pkg-config cmake ninja man "$python"; do
  command -v "$t" >/dev/null || fail "$t not found: run scripts/install-deps.sh"
done
work=$(mktemp -d /tmp/pcpu-deb.XXXXXX)
trap 'rm -rf "$work"' EXIT

# The C++ libraries' packages carry the release's major.minor, as their
# SONAME does (libpcpu-prometheus0.2: compat/prometheus-cpp/CMakeLists.txt).
cxx=$(sed -n 's/^project(pcpu VERSION \([0-9]*\.[0-9]*\)\..*/\1/p' "$src/CMakeLists.txt")
[ -n "$cxx" ] || fail "no project(pcpu VERSION x.y.z) in CMakeLists.txt"
cxx_re=${cxx//./\\.}
runtime=(libpcpu1 libpcpu-stats1 libpcpu-exporter1 libpcpu-prometheus$cxx libpcpu-prometheus-pull$cxx
  libpcpu-prometheus-push$cxx)
dev=(libpcpu-dev libpcpu-stats-dev libpcpu-exporter-dev libpcpu-prometheus-dev libpcpu-prometheus-pull-dev libpcpu-prometheus-push-dev)
all=("${runtime[@]}" "${dev[@]}" pcpu-tools libnginx-mod-http-pcpu libnginx-mod-stream-pcpu postgresql-15-pcpu)

# ---- 1. build -------------------------------------------------------------------
(cd "$src" && dpkg-checkbuilddeps) || fail "debian/control's Build-Depends are not all installed: run scripts/install-deps.sh"
mkdir "$work/src"
tar -C "$src" --exclude=./.git --exclude=./build --exclude='./build-*' --exclude='./obj-*' \
  --exclude=./debian/tmp --exclude=./debian/.debhelper -cf - . | tar -C "$work/src" -xf -
(cd "$work/src" && find . \( -type f -o -type l \) | sort) >"$work/before"
jobs=$(nproc)
werror="-O3 -Werror"
if ! (cd "$work/src" && DEB_BUILD_OPTIONS="parallel=$jobs" DEB_CFLAGS_APPEND="$werror" \
        DEB_CXXFLAGS_APPEND="$werror" dpkg-buildpackage -us -uc -b) \
     >"$work/build.log" 2>&1; then
  grep -B2 -A30 'dpkg-gensymbols: warning: some new symbols\|dpkg-gensymbols: error\|has no package' \
    "$work/build.log" | head -80 || true
  tail -40 "$work/build.log"
  grep -m5 -E 'error: |\[-Werror' "$work/build.log" || true
  fail "dpkg-buildpackage failed (a warning at $werror, or a new or removed symbol: update debian/<library>.symbols as the diff above says)"
fi
changes=$(ls "$work"/pcpu_*.changes)
# What the build leaves in the tree is all ignored by git (.gitignore:
# obj-*/, debian/<package>/, debhelper's files): a Debian build in a clone
# leaves `git status` clean. Checked where the source is a git work tree.
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  (cd "$work/src" && find . \( -type f -o -type l \) | sort) | comm -13 "$work/before" - | sed 's|^\./||' \
    >"$work/leftovers"
  { git -C "$src" check-ignore --no-index --stdin <"$work/leftovers" || true; } | sort >"$work/ignored"
  shown=$(comm -23 "$work/leftovers" "$work/ignored")
  [ -z "$shown" ] || fail "the Debian build leaves files that .gitignore does not ignore: $(echo "$shown" | head -20)"
  echo "the build's $(wc -l <"$work/leftovers") files left in the tree: all ignored by .gitignore"
fi
deb() { ls "$work/$1"_*.deb 2>/dev/null | grep -v dbgsym | head -1; }
for p in "${all[@]}"; do
  [ -n "$(deb "$p")" ] || fail "no $p package built"
done
# Nothing was built that debian/control does not list here.
for f in "$work"/*.deb; do
  p=$(dpkg-deb -f "$f" Package)
  case " ${all[*]} " in *" ${p%-dbgsym} "*) ;; *) fail "unexpected package $p: add it to this test" ;; esac
done

# ---- 2. lintian -------------------------------------------------------------------
if ! lintian --pedantic -I --fail-on error,warning,info,pedantic --tag-display-limit 0 \
       "$changes" >"$work/lintian.log" 2>&1; then
  cat "$work/lintian.log"; fail "lintian --pedantic -I is not clean"
fi
! grep -E '^[EWIPX]: ' "$work/lintian.log" || fail "lintian printed tags"

# ---- 3. contents and dependencies ---------------------------------------------------
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
for p in "${all[@]}"; do
  dpkg -c "$(deb "$p")" | awk '{print $6}' | sed 's|^\./||' >"$work/$p.list"
done
has() { # package, path (regex)
  grep -qE "^$2\$" "$work/$1.list" || fail "$1 lacks $2"
}
hasnt() { # package, path (regex)
  ! grep -E "^$2\$" "$work/$1.list" || fail "$1 ships $2"
}
L=usr/lib/$ma
has libpcpu1 "$L/libpcpu\.so\.1"
has libpcpu1 "$L/libpcpu\.so\.1\.[0-9.]+"
has libpcpu-dev "$L/libpcpu\.so"
has libpcpu-dev "$L/libpcpu\.a"
has libpcpu-dev "$L/pkgconfig/pcpu\.pc"
has libpcpu-dev "$L/pkgconfig/pcpu-counter9\.pc"
has libpcpu-dev "$L/cmake/pcpu/pcpuConfig\.cmake"
has libpcpu-dev "$L/cmake/pcpu/pcpuTargets\.cmake"
has libpcpu-dev "usr/include/pcpu/pcpu\.h"
has libpcpu-dev "usr/include/pcpu/counter\.h"
has libpcpu-dev "usr/include/pcpu/version\.h"
has libpcpu-dev "usr/include/pcpu/compat/sys/counter\.h"
has libpcpu-dev "usr/share/man/man3/pcpu\.3\.gz"
has libpcpu-dev "usr/share/man/man3/pcpu_counter_add\.3\.gz"
has libpcpu-stats1 "$L/libpcpu-stats\.so\.1"
has libpcpu-stats1 "$L/libpcpu-stats\.so\.1\.[0-9.]+"
has libpcpu-stats-dev "$L/libpcpu-stats\.so"
has libpcpu-stats-dev "$L/libpcpu-stats\.a"
has libpcpu-stats-dev "$L/pkgconfig/pcpu-stats\.pc"
has libpcpu-stats-dev "$L/cmake/pcpu/pcpu-statsTargets\.cmake"
has libpcpu-stats-dev "usr/include/pcpu/stats\.h"
has libpcpu-stats-dev "usr/include/pcpu/reader\.h"
has libpcpu-stats-dev "usr/include/pcpu/pcpu\.hpp"
has libpcpu-stats-dev "usr/share/man/man3/pcpu_registry_create\.3\.gz"
has libpcpu-exporter1 "$L/libpcpu-exporter\.so\.1"
has libpcpu-exporter-dev "$L/libpcpu-exporter\.so"
has libpcpu-exporter-dev "$L/pkgconfig/pcpu-exporter\.pc"
has libpcpu-exporter-dev "usr/include/pcpu/exporter\.h"
has libpcpu-exporter-dev "usr/share/man/man3/pcpu_exporter_new\.3\.gz"
has libpcpu-prometheus$cxx "$L/libpcpu-prometheus\.so\.$cxx_re"
has libpcpu-prometheus-dev "$L/libpcpu-prometheus\.so"
has libpcpu-prometheus-dev "$L/pkgconfig/pcpu-prometheus\.pc"
has libpcpu-prometheus-dev "$L/cmake/pcpu/pcpu-prometheusTargets\.cmake"
has libpcpu-prometheus-dev "usr/include/pcpu-prometheus/prometheus/counter\.h"
has libpcpu-prometheus-pull$cxx "$L/libpcpu-prometheus-pull\.so\.$cxx_re"
has libpcpu-prometheus-pull-dev "$L/libpcpu-prometheus-pull\.so"
has libpcpu-prometheus-pull-dev "$L/pkgconfig/pcpu-prometheus-pull\.pc"
has libpcpu-prometheus-pull-dev "usr/include/pcpu-prometheus/prometheus/exposer\.h"
has libpcpu-prometheus-pull-dev "usr/include/pcpu/exposer\.hpp"
has libpcpu-prometheus-push$cxx "$L/libpcpu-prometheus-push\.so\.$cxx_re"
has libpcpu-prometheus-push-dev "$L/libpcpu-prometheus-push\.so"
has libpcpu-prometheus-push-dev "$L/pkgconfig/pcpu-prometheus-push\.pc"
has libpcpu-prometheus-push-dev "usr/include/pcpu-prometheus/prometheus/gateway\.h"
has pcpu-tools "usr/bin/pcpustat"
has pcpu-tools "usr/share/man/man1/pcpustat\.1\.gz"
# Each package holds one library's files: the runtime packages no headers
# and no other library; libpcpu-dev nothing of the statistics layer.
for p in "${runtime[@]}"; do
  hasnt "$p" "usr/include/.*"
  [ "$(grep -cE '\.so\.[0-9]+\.[0-9]+\.[0-9]+$' "$work/$p.list")" = 1 ] || fail "$p: not exactly one shared object"
done
hasnt libpcpu-dev "usr/include/pcpu/(stats|gauge|histogram|group|expose|segment|segment_dir|reader|counter9_sysctl)\.h"
hasnt libpcpu-dev "usr/include/pcpu/.*\.hpp"
hasnt libpcpu-dev "usr/include/pcpu-prometheus/.*"
hasnt libpcpu-dev "$L/libpcpu-.*"
hasnt libpcpu-dev "$L/pkgconfig/pcpu-(stats|prometheus.*)\.pc"
hasnt libpcpu-dev "$L/cmake/pcpu/pcpu-.*"
hasnt libpcpu-dev "usr/share/man/man3/pcpu_(registry|reader|gauge|segment)_.*"
hasnt libpcpu-prometheus-dev "usr/include/pcpu-prometheus/prometheus/(exposer|gateway)\.h"
hasnt libpcpu-stats-dev "usr/include/pcpu/exporter\.h"
# The same file in two packages would make them conflict.
dup=$(for p in "${all[@]}"; do grep -vE '/$' "$work/$p.list"; done | sort | uniq -d | grep -v '^usr/share/doc/' || true)
[ -z "$dup" ] || fail "files in more than one package: $dup"

depends() { dpkg-deb -f "$(deb "$1")" Depends; }
echo "libpcpu-dev Depends: $(depends libpcpu-dev)"
# libpcpu-dev: libpcpu1 of the same build, and nothing else of substance.
[[ "$(depends libpcpu-dev | tr -d ' ')" =~ ^libpcpu1\(=[^\)]*\)$ ]] \
  || fail "libpcpu-dev depends on more than libpcpu1: $(depends libpcpu-dev)"
[[ $(depends libpcpu1) != *libpcpu-* && $(depends libpcpu1) != *protobuf* ]] \
  || fail "libpcpu1 depends on $(depends libpcpu1)"
[[ $(depends libpcpu-stats-dev) == *"libpcpu-stats1 (= "* && $(depends libpcpu-stats-dev) == *"libpcpu-dev (= "* ]] \
  || fail "libpcpu-stats-dev does not depend on libpcpu-stats1 and libpcpu-dev of its build: $(depends libpcpu-stats-dev)"
# libpcpu-stats calls libpcpu's private interface: only the same build's.
[[ $(depends libpcpu-stats1) == *"libpcpu1 (= "* ]] || fail "libpcpu-stats1 does not depend on its own libpcpu1"
[[ $(depends libpcpu-stats-dev) != *prometheus* && $(depends libpcpu-stats-dev) != *curl* ]] \
  || fail "libpcpu-stats-dev depends on $(depends libpcpu-stats-dev)"
for p in libpcpu-prometheus-pull libpcpu-prometheus-push; do
  [[ $(depends $p-dev) == *"$p$cxx (= "* && $(depends $p-dev) == *"libpcpu-prometheus-dev (= "* ]] \
    || fail "$p-dev: $(depends $p-dev)"
  # The pull and push libraries need the core library of their own minor.
  [[ $(depends $p$cxx) == *"libpcpu-prometheus$cxx (>= "* ]] || fail "$p$cxx: $(depends $p$cxx)"
done
[[ $(depends libpcpu-prometheus$cxx) != *curl* && $(depends libpcpu-prometheus$cxx) != *microhttpd* ]] \
  || fail "libpcpu-prometheus$cxx (the core API) depends on $(depends libpcpu-prometheus$cxx)"
# What a program built against a C++ library will depend on: that minor's
# package (shlibs: library, SONAME version, dependency).
for p in libpcpu-prometheus libpcpu-prometheus-pull libpcpu-prometheus-push; do
  shlibs=$(dpkg-deb --ctrl-tarfile "$(deb $p$cxx)" | tar -xOf - ./shlibs)
  [[ $shlibs =~ ^$p\ $cxx_re\ $p$cxx_re\ \(\>=\ $cxx_re\.[0-9]+\)$ ]] || fail "$p$cxx: shlibs '$shlibs'"
done
[[ $(depends pcpu-tools) == *libpcpu-stats1* ]] || fail "pcpu-tools does not depend on libpcpu-stats1"
# The exporter core: its own library above libpcpu-stats, with libmicrohttpd;
# pcpustat serve and the Exposer use it, the statistics layer does not.
[[ $(depends libpcpu-exporter1) == *"libpcpu-stats1 (= "* && $(depends libpcpu-exporter1) == *microhttpd* ]] \
  || fail "libpcpu-exporter1: $(depends libpcpu-exporter1)"
[[ $(depends libpcpu-stats1) != *microhttpd* ]] || fail "libpcpu-stats1 depends on $(depends libpcpu-stats1)"
[[ $(depends pcpu-tools) == *libpcpu-exporter1* && $(depends libpcpu-prometheus-pull$cxx) == *libpcpu-exporter1* ]] \
  || fail "pcpu-tools or libpcpu-prometheus-pull$cxx does not depend on libpcpu-exporter1"
# nginx's module, as Debian's libnginx-mod-* are: where nginx loads modules,
# a load file it enables, tied to the nginx ABI it was built for.
has libnginx-mod-http-pcpu "usr/lib/nginx/modules/ngx_http_pcpu_module\.so"
has libnginx-mod-http-pcpu "usr/share/nginx/modules-available/mod-http-pcpu\.conf"
[[ $(depends libnginx-mod-http-pcpu) == *nginx-abi-* && $(depends libnginx-mod-http-pcpu) == *libpcpu-stats1* ]] \
  || fail "libnginx-mod-http-pcpu: $(depends libnginx-mod-http-pcpu)"
# enabled POSTINST: the load files a postinst made by dh_nginx enables, as
# its pairs FILE:PRIORITY-FILE (modules-available, modules-enabled).
enabled() { sed -n 's/^for confpair in \(.*[^ ]\) *; do$/\1/p' "$1"; }
postinst() { dpkg-deb --ctrl-tarfile "$(deb "$1")" | tar -xOf - ./postinst; }
postinst libnginx-mod-http-pcpu >"$work/http.postinst"
[ "$(enabled "$work/http.postinst")" = mod-http-pcpu.conf:50-mod-http-pcpu.conf ] \
  || fail "libnginx-mod-http-pcpu's postinst enables '$(enabled "$work/http.postinst")', not 50-mod-http-pcpu.conf"
# The stream module: its own package, enabled after nginx's stream module
# (50-mod-stream.conf, libnginx-mod-stream) and after the http module
# (50-mod-http-pcpu.conf), whose registry it counts into through the http
# module's functions: the same build's.
has libnginx-mod-stream-pcpu "usr/lib/nginx/modules/ngx_stream_pcpu_module\.so"
has libnginx-mod-stream-pcpu "usr/share/nginx/modules-available/mod-stream-pcpu\.conf"
d=$(depends libnginx-mod-stream-pcpu)
[[ $d == *nginx-abi-* && $d == *libpcpu-stats1* && $d == *"libnginx-mod-http-pcpu (= "* &&
   ", $d," =~ ,\ libnginx-mod-stream[,\ ] ]] || fail "libnginx-mod-stream-pcpu: $d"
postinst libnginx-mod-stream-pcpu >"$work/stream.postinst"
[ "$(enabled "$work/stream.postinst")" = mod-stream-pcpu.conf:70-mod-stream-pcpu.conf ] \
  || fail "libnginx-mod-stream-pcpu's postinst enables '$(enabled "$work/stream.postinst")', not 70-mod-stream-pcpu.conf"
# PostgreSQL's extension: where PostgreSQL 15's pg_config says (the
# module, its control file and SQL script; the JIT's bitcode of the module
# beside), nothing else but its documentation and lintian overrides; it
# depends on the server
# and the libraries, nothing of nginx.
pgc=/usr/lib/postgresql/15/bin/pg_config
pg_lib=$("$pgc" --pkglibdir) && pg_lib=${pg_lib#/}
pg_ext=$("$pgc" --sharedir) && pg_ext=${pg_ext#/}/extension
has postgresql-15-pcpu "$pg_lib/pcpu_stat_statements\.so"
has postgresql-15-pcpu "$pg_ext/pcpu_stat_statements\.control"
has postgresql-15-pcpu "$pg_ext/pcpu_stat_statements--1\.0\.sql"
others=$(grep -vE '/$' "$work/postgresql-15-pcpu.list" | grep -vE \
  "^($pg_lib/pcpu_stat_statements\.so|$pg_lib/bitcode/pcpu_stat_statements(\.index\.bc|/.*\.bc)|$pg_ext/pcpu_stat_statements(\.control|--.*\.sql)|usr/share/doc/postgresql-15-pcpu/.*|usr/share/lintian/overrides/postgresql-15-pcpu)$" || true)
[ -z "$others" ] || fail "postgresql-15-pcpu ships more: $others"
d=$(depends postgresql-15-pcpu)
echo "postgresql-15-pcpu Depends: $d"
[[ ", $d," =~ ,\ postgresql-15[,\ ] && $d == *libpcpu-stats1* && $d != *nginx* ]] \
  || fail "postgresql-15-pcpu: $d"
# docs/nginx.md's install line, `apt install` of the three packages, as
# apt would resolve it here (simulated: nothing is installed): the nginx
# ABI from the installed nginx, the libraries from the two packages beside.
if command -v apt-get >/dev/null && [ -x /usr/sbin/nginx ]; then
  apt-get install -s "$(deb libnginx-mod-http-pcpu)" "$(deb libpcpu-stats1)" "$(deb libpcpu1)" \
    >"$work/apt.log" 2>&1 || { cat "$work/apt.log"; fail "apt install of the module's three packages"; }
  grep -q '^Inst libnginx-mod-http-pcpu ' "$work/apt.log" \
    || { cat "$work/apt.log"; fail "apt would not install libnginx-mod-http-pcpu"; }
  echo "apt install of libnginx-mod-http-pcpu with libpcpu-stats1 and libpcpu1 resolves (simulated)"
fi
# The README's install line of the extension (its PostgreSQL section:
# sudo apt install ../{PACKAGE,...}_*.deb), and the stream module's
# (docs/nginx.md), the same way.
readme_pg=$(awk '/^## PostgreSQL$/{f=1; next} f && /^## /{exit} f' "$src/README.md" |
  sed -n 's|^sudo apt install \.\./{\([^}]*\)}_\*\.deb$|\1|p' | tr ',' ' ')
[[ " $readme_pg " == *" postgresql-15-pcpu "* && " $readme_pg " == *" pcpu-tools "* ]] \
  || fail "README.md's PostgreSQL section: no 'sudo apt install ../{postgresql-15-pcpu,pcpu-tools,...}_*.deb' line"
if command -v apt-get >/dev/null && [ -x /usr/lib/postgresql/15/bin/postgres ]; then
  readme_debs=()
  for p in $readme_pg; do
    [ -n "$(deb "$p")" ] || fail "README.md's PostgreSQL section installs $p, which is not built"
    readme_debs+=("$(deb "$p")")
  done
  apt-get install -s "${readme_debs[@]}" >"$work/apt.log" 2>&1 \
    || { cat "$work/apt.log"; fail "the README's apt install of the extension ($readme_pg)"; }
  for p in $readme_pg; do
    grep -q "^Inst $p " "$work/apt.log" || { cat "$work/apt.log"; fail "apt would not install $p"; }
  done
  echo "the README's apt install of $readme_pg resolves (simulated)"
fi
if command -v apt-get >/dev/null && [ -e /usr/lib/nginx/modules/ngx_stream_module.so ]; then
  apt-get install -s "$(deb libnginx-mod-stream-pcpu)" "$(deb libnginx-mod-http-pcpu)" "$(deb libpcpu-stats1)" \
    "$(deb libpcpu1)" >"$work/apt.log" 2>&1 || { cat "$work/apt.log"; fail "apt install of the stream module's packages"; }
  grep -q '^Inst libnginx-mod-stream-pcpu ' "$work/apt.log" || { cat "$work/apt.log"; fail "apt would not install libnginx-mod-stream-pcpu"; }
  echo "apt install of libnginx-mod-stream-pcpu with its three packages resolves (simulated)"
fi

# unpack ROOT PACKAGE...: each package and, recursively, what it depends on
# among the packages built here (dependencies outside them, libc6 and the
# like, are this machine's); prints the packages unpacked.
unpack() {
  local root=$1 p d; shift
  local -a todo=("$@") done=()
  while [ ${#todo[@]} -gt 0 ]; do
    p=${todo[0]}; todo=("${todo[@]:1}")
    case " ${done[*]} " in *" $p "*) continue ;; esac
    done+=("$p")
    dpkg -x "$(deb "$p")" "$root"
    for d in $(depends "$p" | tr ',|' '\n\n' | sed 's/^ *//;s/[ (].*//'); do
      [ -n "$(deb "$d")" ] && todo+=("$d")
    done
  done
  echo "${done[*]}"
}

# ---- 4. libpcpu-dev alone: the README's first program -------------------------------
root=$work/dev-only
echo "libpcpu-dev alone unpacks: $(unpack "$root" libpcpu-dev)"
awk '/^## A first program/{f=1} f&&/^```c/{p=1;next} p&&/^```/{exit} p' "$src/README.md" >"$work/app.c"
grep -q 'pcpu_counter_inc' "$work/app.c" || fail "README.md: no first program found under '## A first program'"
lib=$root/usr/lib/$ma
pc() { PKG_CONFIG_LIBDIR=$lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$root pkg-config "$@"; }
[ "$(PKG_CONFIG_LIBDIR=$lib/pkgconfig pkg-config --variable=includedir pcpu)" = /usr/include ] \
  || fail "pcpu.pc: includedir is not /usr/include"
echo "pkg-config --cflags --libs pcpu: $(pc --cflags --libs pcpu)"
# shellcheck disable=SC2046
cc -Wall -Werror "$work/app.c" $(pc --cflags --libs pcpu) -pthread -o "$work/app-pc" \
  || fail "the README's first program does not build against libpcpu-dev alone (pkg-config pcpu)"
[ "$(LD_LIBRARY_PATH=$lib "$work/app-pc")" = "400000 requests" ] || fail "the first program (pkg-config) printed something else"
mkdir "$work/app-cmake"
cat >"$work/app-cmake/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.18)
project(app C)
find_package(pcpu REQUIRED)
add_executable(app $work/app.c)
target_link_libraries(app PRIVATE pcpu::pcpu)
# The statistics layer is not installed: its component is not found.
find_package(pcpu QUIET COMPONENTS stats)
if(pcpu_stats_FOUND OR TARGET pcpu::stats)
  message(FATAL_ERROR "libpcpu-dev alone: pcpu::stats found")
endif()
EOF
cmake -S "$work/app-cmake" -B "$work/app-cmake/b" -G Ninja -DCMAKE_PREFIX_PATH="$root/usr" >"$work/app-cmake.log" 2>&1 \
  || { cat "$work/app-cmake.log"; fail "find_package(pcpu) with libpcpu-dev alone"; }
cmake --build "$work/app-cmake/b" >>"$work/app-cmake.log" 2>&1 || { cat "$work/app-cmake.log"; fail "pcpu::pcpu with libpcpu-dev alone"; }
[ "$(LD_LIBRARY_PATH=$lib "$work/app-cmake/b/app")" = "400000 requests" ] || fail "the first program (CMake) printed something else"
MANPATH=$root/usr/share/man man -w pcpu >/dev/null || fail "man pcpu: not found with libpcpu-dev"
MANPATH=$root/usr/share/man man -w pcpu_counter_inc >/dev/null || fail "man pcpu_counter_inc: not found with libpcpu-dev"
echo "libpcpu-dev alone: the README's first program built with pkg-config and CMake; man pcpu found"

# ---- 5. every package -----------------------------------------------------------
root=$work/root
unpack "$root" "${all[@]}" >/dev/null
lib=$root/usr/lib/$ma
export LD_LIBRARY_PATH=$lib
[ "$(PKG_CONFIG_LIBDIR=$lib/pkgconfig pkg-config --variable=libdir pcpu)" = "/usr/lib/$ma" ] \
  || fail "pcpu.pc: libdir is $(PKG_CONFIG_LIBDIR=$lib/pkgconfig pkg-config --variable=libdir pcpu), not /usr/lib/$ma"
[ "$(PKG_CONFIG_LIBDIR=$lib/pkgconfig pkg-config --variable=includedir pcpu-stats)" = /usr/include ] \
  || fail "pcpu-stats.pc: includedir is not /usr/include"
! grep -l rpath "$lib"/pkgconfig/*.pc || fail "a packaged .pc file names a run path"
for f in "$lib"/*.so.* "$root"/usr/bin/*; do
  [ -L "$f" ] && continue
  ! readelf -d "$f" | grep -E 'RPATH|RUNPATH' || fail "$f has an RPATH"
done
cflags=$(pc --cflags pcpu)
libs=$(pc --libs pcpu)
cc $cflags "$src/tests/install_consumer/consumer_counter.c" -o "$work/pc_counter" $libs -pthread
"$work/pc_counter"
libs=$(pc --libs pcpu-stats)
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
# Kept now: bash unsets PUB_PID once it has reaped the coprocess, which can
# happen before the `wait` below (then `set -u` fails the test on a race).
pub_pid=$PUB_PID
read -r line <&"${PUB[0]}"
[ "$line" = ready ] || fail "publisher: $line"
! readelf -d "$root/usr/bin/pcpustat" | grep -E 'RPATH|RUNPATH' || fail "/usr/bin/pcpustat has an RPATH"
out=$("$root/usr/bin/pcpustat" debtest)
echo "$out"
grep -qE 'debtest_events_total +4242' <<<"$out" || fail "pcpustat does not show debtest_events_total 4242"
[[ $("$root/usr/bin/pcpustat") == *debtest* ]] || fail "pcpustat does not list the segment"
# The Python binding over the packaged library.
PCPU_LIBRARY=$lib/libpcpu-stats.so.1 PYTHONPATH=$src/python/src PYTHONDONTWRITEBYTECODE=1 "$python" - <<'PY'
import pcpu
with pcpu.open_segment("debtest") as seg:
    snap = seg.snapshot()
assert snap.family("debtest_events").series[0].value == 4242, snap
assert snap.family("debtest_depth").series[0].value == -5, snap
print("python: debtest_events_total", snap.family("debtest_events").series[0].value)
PY
exec {PUB[1]}>&-
wait "$pub_pid" || fail "publisher failed"
[ -z "$(ls "$work/segs")" ] || fail "the publisher left its segment"
# nginx loads the packaged module with the packaged libraries.
ngx_root=$work/nginx-module
echo "libnginx-mod-http-pcpu unpacks: $(unpack "$ngx_root" libnginx-mod-http-pcpu)"
so=$ngx_root/usr/lib/nginx/modules/ngx_http_pcpu_module.so
! readelf -d "$so" | grep -E 'RPATH|RUNPATH' || fail "the nginx module has an RPATH"
sed "s|modules/|$ngx_root/usr/lib/nginx/modules/|" \
  "$ngx_root/usr/share/nginx/modules-available/mod-http-pcpu.conf" >"$work/nginx.conf"
printf 'events {}\nhttp { pcpu_stats on; server { listen 127.0.0.1:1; location / { pcpu_stats_display; } } }\n' \
  >>"$work/nginx.conf"
if [ -x /usr/sbin/nginx ]; then
  LD_LIBRARY_PATH=$ngx_root/usr/lib/$ma /usr/sbin/nginx -t -q \
    -g "error_log /dev/null; pid $work/nginx.pid;" -c "$work/nginx.conf" \
    || fail "nginx -t does not load the packaged module"
  echo "nginx -t: the packaged module loads"
fi
# Manual pages: man finds them in the unpacked tree, links included.
for page in pcpu pcpu_counter_add pcpu_counter_inc pcpu_reader_open pcpustat; do
  MANPATH=$root/usr/share/man man -w "$page" >/dev/null || fail "man $page: not found"
done
[[ $(MANPATH=$root/usr/share/man MANWIDTH=80 man -P cat pcpu_counter_inc 2>/dev/null) == *pcpu_counter_add* ]] \
  || fail "man pcpu_counter_inc does not show pcpu_counter_add(3)"

# ---- 6. the integrations -----------------------------------------------------------
# nginx's modules: modules-enabled as the postinsts make it (nginx's stream
# module's from its own postinst), each load file pointed at the unpacked
# module; nginx includes them in their names' order, as Debian's
# nginx.conf does (include modules-enabled/*.conf), and takes both modules'
# directives (nginx -t).
ngx_root=$work/nginx-modules
echo "libnginx-mod-stream-pcpu unpacks: $(unpack "$ngx_root" libnginx-mod-stream-pcpu)"
for so in "$ngx_root"/usr/lib/nginx/modules/*.so; do
  ! readelf -d "$so" | grep -E 'RPATH|RUNPATH' || fail "$so has an RPATH"
done
if [ -x /usr/sbin/nginx ] && [ -e /var/lib/dpkg/info/libnginx-mod-stream.postinst ]; then
  mkdir "$work/modules-enabled"
  for pair in $(enabled "$work/http.postinst") $(enabled "$work/stream.postinst"); do
    sed "s|modules/|$ngx_root/usr/lib/nginx/modules/|" "$ngx_root/usr/share/nginx/modules-available/${pair%%:*}" \
      >"$work/modules-enabled/${pair#*:}"
  done
  for pair in $(enabled /var/lib/dpkg/info/libnginx-mod-stream.postinst); do
    cp "/usr/share/nginx/modules-available/${pair%%:*}" "$work/modules-enabled/${pair#*:}"
  done
  echo "modules-enabled: $(cd "$work/modules-enabled" && echo *)"
  cat >"$work/nginx-stream.conf" <<EOF
include $work/modules-enabled/*.conf;
events {}
http { pcpu_stats on; server { listen 127.0.0.1:1; location / { pcpu_stats_display; } } }
stream { pcpu_stats on; server { listen 127.0.0.1:2; proxy_pass 127.0.0.1:3; } }
EOF
  LD_LIBRARY_PATH=$ngx_root/usr/lib/$ma /usr/sbin/nginx -t -q \
    -g "error_log stderr; pid $work/nginx.pid;" -c "$work/nginx-stream.conf" \
    || fail "nginx -t does not load the packaged modules in their modules-enabled order"
  echo "nginx -t: the packaged http and stream modules load, in their modules-enabled order"
fi
# PostgreSQL's extension: the module links -z nodelete (the PGXS
# Makefile's flags made it through pg_buildext), has no run path, and a
# cluster preloads it from the package and counts (pg_package_test.py).
pg_root=$work/postgresql
echo "postgresql-15-pcpu unpacks: $(unpack "$pg_root" postgresql-15-pcpu pcpu-tools)"
so=$pg_root/$pg_lib/pcpu_stat_statements.so
! readelf -d "$so" | grep -E 'RPATH|RUNPATH' || fail "pcpu_stat_statements.so has an RPATH"
readelf -d "$so" | grep -q 'Flags:.*NODELETE' || fail "pcpu_stat_statements.so is not linked -z nodelete"
# The server runs as the postgres user, which reads the unpacked packages.
chmod 755 "$work"
rc=0
"$python" "$src/tests/packaging/pg_package_test.py" "$pg_root" || rc=$?
case $rc in
0) echo "a cluster loads the packaged extension, and the packaged pcpustat reads its counts" ;;
77) echo "the packaged extension's cluster test cannot run here (skipped: above)" ;;
*) fail "the packaged extension does not load or count (pg_package_test.py)" ;;
esac

# ---- 7. static linking ------------------------------------------------------------
# Every library a static link needs comes with libpcpu-stats-dev's dependencies.
stats_depends=$(depends libpcpu-stats-dev)
owner() { # a library file -> the package that ships it
  dpkg-query -S "$1" 2>/dev/null | sed -n '1s/:.*//p'
}
needs() { # what names the library, the file
  local pkg
  pkg=$(owner "$2")
  [ -n "$pkg" ] || fail "$1 names $2, which no installed package ships"
  [[ ", $stats_depends," == *", $pkg"[\ ,]* ]] \
    || fail "$1 names $2 (package $pkg), but libpcpu-stats-dev does not depend on $pkg: a static link fails where $pkg is not installed"
  echo "static link: $1 needs $2, from $pkg: a dependency of libpcpu-stats-dev"
}
# libpcpu.a needs libc alone: pcpu.pc's Libs.private names no library.
for flag in $(sed -n 's/^Libs\.private://p' "$lib/pkgconfig/pcpu.pc"); do
  case $flag in
  -lpthread | -lm | -lrt | -ldl | -lc | -pthread) ;;
  *) fail "pcpu.pc Libs.private names $flag: libpcpu.a must need libc alone (libpcpu-dev depends on nothing else)" ;;
  esac
done
for flag in $(sed -n 's/^Libs\.private://p' "$lib/pkgconfig/pcpu-stats.pc"); do
  case $flag in
  -lpthread | -lm | -lrt | -ldl | -lc | -pthread) ;;
  -l*)
    so=
    for d in /usr/lib/$ma /lib/$ma /usr/lib /lib; do
      [ -e "$d/lib${flag#-l}.so" ] && { so=$d/lib${flag#-l}.so; break; }
    done
    [ -n "$so" ] || fail "pcpu-stats.pc Libs.private names $flag: lib${flag#-l}.so not found on this machine"
    needs "pcpu-stats.pc Libs.private ($flag)" "$so" ;;
  *) fail "pcpu-stats.pc Libs.private: unexpected '$flag'" ;;
  esac
done
targets=$lib/cmake/pcpu/pcpu-statsTargets.cmake
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
static_libs_pc=$(pc --static --libs pcpu-stats)
echo "pkg-config --static --libs pcpu-stats: $static_libs_pc"
cc $cflags "$src/tests/install_consumer/consumer.c" -o "$work/static_consumer" \
  -Wl,-Bstatic $static_libs_pc -Wl,-Bdynamic
! readelf -d "$work/static_consumer" | grep -q 'libpcpu.*\.so' || fail "the pkg-config --static consumer links libpcpu*.so"
"$work/static_consumer"
echo "deb_test: ok ($(cd "$work" && ls *.deb | grep -v dbgsym | tr '\n' ' '))"
