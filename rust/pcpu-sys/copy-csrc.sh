#!/bin/sh
# Copies the C library's sources into csrc/ (git-ignored), so that the
# packaged crate (`cargo package`, `cargo publish`) builds without the
# repository around it: build.rs uses the repository's tree when the crate
# sits in it, csrc/ otherwise. The copy is what build.rs reads: the
# headers, the sources of libpcpu (src/*) and libpcpu-stats (src/stats,
# src/segment), and CMakeLists.txt, the one source of the version and
# layout numbers. Run it again before each packaging; never edit csrc/.
# Then: cargo publish --dry-run --allow-dirty -p pcpu-sys -p pcpu (cargo
# sees the uncommitted csrc/ as a dirty tree).
# Usage: pcpu-sys/copy-csrc.sh   (from anywhere)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
test -f "$repo/src/rseq.c" || { echo "copy-csrc.sh: $repo is not a pcpu checkout" >&2; exit 1; }
rm -rf "$here/csrc"
mkdir -p "$here/csrc/src/stats" "$here/csrc/src/segment"
cp -R "$repo/include" "$here/csrc/"
cp "$repo/CMakeLists.txt" "$here/csrc/"
cp "$repo"/src/*.c "$repo"/src/*.h "$here/csrc/src/"
cp "$repo"/src/stats/*.c "$repo"/src/stats/*.h "$here/csrc/src/stats/"
cp "$repo"/src/segment/*.c "$repo"/src/segment/*.h "$here/csrc/src/segment/"
echo "copy-csrc.sh: $(find "$here/csrc" -type f | wc -l) files in $here/csrc"
