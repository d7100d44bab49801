#!/usr/bin/env bash
# The prometheus-cpp layer's libraries export their API in one version node
# and hide their internals (compat/prometheus-cpp/pcpu-prometheus.map,
# issue 53):
#  1. every symbol each library defines in its dynamic table carries the
#     node PCPU_PROMETHEUS_<major.minor> (none in the unversioned Base), and
#     its SONAME the same major.minor (libpcpu-prometheus.so.0.2: issue 62);
#  2. every prometheus::detail symbol exported is one the layer's headers use:
#     abi/probe.cpp, compiled at -O0, runs every header path that calls into
#     the libraries; a detail symbol exported that its object neither
#     references nor instantiates is an internal that leaked;
#  3. the probe links with the libraries by their link names and runs: they
#     export everything the headers need.
# Usage: abi_symbols.sh SRC_DIR BUILD_DIR CXX
set -uo pipefail
src=$1 bin=$2 cxx=$3
work=$bin/cxx-abi-symbols
rm -rf "$work"
mkdir -p "$work"
lib=$bin/compat/prometheus-cpp
node=$(sed -n 's/^\(PCPU_PROMETHEUS_[0-9.]*\) {$/\1/p' "$lib/pcpu-prometheus.map")
[ -n "$node" ] || { echo "FAIL no PCPU_PROMETHEUS_<version> node in $lib/pcpu-prometheus.map"; exit 1; }
fails=0
inc=(-I"$src/compat/prometheus-cpp/include" -I"$src/include" -I"$bin/include")
if ! "$cxx" -std=c++17 -O0 -Wall -Wextra -Werror "${inc[@]}" -c "$src/tests/cxx/abi/probe.cpp" \
     -o "$work/probe.o" > "$work/probe.log" 2>&1; then
  echo "FAIL the probe does not compile:"; sed 's/^/  /' "$work/probe.log" | head -20; exit 1
fi
# What the headers use: the probe's undefined and its (weak) definitions.
# Compared demangled: a constructor's complete and base objects (C1, C2)
# are one name.
nm "$work/probe.o" | awk '{print $NF}' | c++filt | sort -u > "$work/used"
# The SONAME carries the node's major.minor (libpcpu-prometheus.so.0.2).
abi=${node#PCPU_PROMETHEUS_}
for so in libpcpu-prometheus.so.$abi libpcpu-prometheus-pull.so.$abi libpcpu-prometheus-push.so.$abi; do
  [ -f "$lib/$so" ] || { echo "FAIL $so not found in $lib (the test runs where all three are built)"; fails=$((fails + 1)); continue; }
  soname=$(readelf -d "$lib/$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  [ "$soname" = "$so" ] || { echo "FAIL $so: SONAME $soname, not $so"; fails=$((fails + 1)); }
  # objdump -T: address flags section size version name; defined symbols only.
  objdump -T "$lib/$so" | awk '$0 ~ /^[0-9a-f]+ / && $0 !~ /\*UND\*/ {print $(NF-1), $NF}' > "$work/$so.dyn"
  unversioned=$(awk -v n="$node" '$1 != n && $1 != "(" n ")" {print $2}' "$work/$so.dyn")
  if [ -n "$unversioned" ]; then
    echo "FAIL $so: $(echo "$unversioned" | wc -l) symbol(s) outside $node, e.g.:"
    echo "$unversioned" | head -5 | c++filt | cut -c1-160 | sed 's/^/  /'; fails=$((fails + 1))
  fi
  awk '{print $2}' "$work/$so.dyn" | grep -E '^_ZNK?10prometheus6detail|^_ZT[VIS]N10prometheus6detail' \
    | c++filt | sort -u > "$work/$so.detail"
  leaked=$(comm -23 "$work/$so.detail" "$work/used")
  if [ -n "$leaked" ]; then
    echo "FAIL $so exports $(echo "$leaked" | wc -l) prometheus::detail symbol(s) the headers do not use:"
    echo "$leaked" | cut -c1-160 | sed 's/^/  /'; fails=$((fails + 1))
  else
    echo "ok   $so: $(wc -l < "$work/$so.dyn") symbols, all in $node; $(wc -l < "$work/$so.detail") prometheus::detail, each used by the headers"
  fi
done
if "$cxx" "$work/probe.o" -L"$lib" -L"$bin" -Wl,-rpath,"$lib:$bin" -lpcpu-prometheus-pull -lpcpu-prometheus-push \
     -lpcpu-prometheus -lpcpu-stats -lpcpu -pthread -o "$work/probe" > "$work/link.log" 2>&1 && "$work/probe" >> "$work/link.log" 2>&1; then
  echo "ok   the probe links with the libraries and runs"
else
  echo "FAIL the probe does not link or run:"; sed 's/^/  /' "$work/link.log" | head -20; fails=$((fails + 1))
fi
[ $fails = 0 ] || { echo "$fails check(s) failed"; exit 1; }
