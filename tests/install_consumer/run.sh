#!/usr/bin/env bash
# Installs pcpu from the build tree into a scratch prefix, then builds and runs
# consumers against it with CMake's find_package and with pkg-config.
# usage: run.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
here=$(cd "$(dirname "$0")" && pwd)
cmake -S "$here" -B "$work/cbuild" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/cbuild" >/dev/null
LD_LIBRARY_PATH="$work/prefix/lib" "$work/cbuild/consumer_c"
LD_LIBRARY_PATH="$work/prefix/lib" "$work/cbuild/consumer_cxx"
"$work/cbuild/consumer_static"
# pkg-config, as a Makefile user would.
libdir=$(ls -d "$work"/prefix/lib* | head -1)
export PKG_CONFIG_PATH="$libdir/pkgconfig"
cc $(pkg-config --cflags pcpu) "$here/consumer.c" -o "$work/pc_consumer" $(pkg-config --libs pcpu) -pthread
LD_LIBRARY_PATH="$libdir" "$work/pc_consumer"
# Only pcpu_-prefixed symbols are exported, and the SONAME is versioned.
lib=$(ls "$libdir"/libpcpu.so.0)
bad=$(nm -D --defined-only "$lib" | awk '$3 !~ /^pcpu_/ && $3 !~ /^PCPU_(0|LAYOUT_[0-9]+)$/ {print $3}')
if [ -n "$bad" ]; then echo "exported symbols without the pcpu_ prefix: $bad"; exit 1; fi
objdump -p "$lib" | grep -q 'SONAME *libpcpu.so.0' || { echo "SONAME is not libpcpu.so.0"; exit 1; }
echo "install_consumer: ok"
