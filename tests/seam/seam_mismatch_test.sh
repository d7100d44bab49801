#!/bin/sh
# The seam between libpcpu and libpcpu-stats refuses a mismatched pair at
# load, always (src/core/core.h, PCPU_PRIVATE): two libpcpu builds that differ from the
# one this libpcpu-stats was built with, each made here from a copy of the
# source tree, are put beside it and a program of libpcpu-stats is run:
#
#   version   the project version raised (another release): refused with
#             "version `PCPU_PRIVATE_<release>' not found";
#   renamed   the same version, one private function renamed
#             (pcpu__zone_tree_adopt, which the program never calls):
#             refused with "undefined symbol: pcpu__zone_tree_adopt".
#
# Either way the program never reaches main (exit 1 or 127). Before the fix both
# loaded: the first ran whole, the second died at the renamed function's
# first call, if ever. A pair of one build runs (the control).
#
#   seam_mismatch_test.sh SOURCE_DIR BUILD_DIR PROBE
set -eu
src=$1 build=$2 probe=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pcpu-seam.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

stats=$(ls "$build"/libpcpu-stats.so.[0-9]* | head -1)
core=$(ls "$build"/libpcpu.so.[0-9]* | head -1)
soname_stats=$(basename "$stats" | sed 's/^\(libpcpu-stats\.so\.[0-9]*\).*/\1/')
soname_core=$(basename "$core" | sed 's/^\(libpcpu\.so\.[0-9]*\).*/\1/')

# run DIR: the probe with the pair in DIR; its output in $tmp/out, rc in $rc.
run() {
	rc=0
	LD_LIBRARY_PATH=$1 "$probe" >"$tmp/out" 2>&1 || rc=$?
}

mkdir "$tmp/same"
cp -L "$core" "$tmp/same/$soname_core"
cp -L "$stats" "$tmp/same/$soname_stats"
run "$tmp/same"
if [ "$rc" != 0 ] || ! grep -q "seam_probe: ok" "$tmp/out"; then
	echo "FAIL: the pair of one build does not run (exit $rc):"; cat "$tmp/out"; exit 1
fi
echo "ok   the pair of one build runs"

# variant NAME: a libpcpu built from a copy of the tree changed by the
# function change_NAME, put beside this build's libpcpu-stats.
variant() {
	v=$tmp/$1
	mkdir -p "$v/tree"
	cp -R "$src/CMakeLists.txt" "$src/cmake" "$src/include" "$src/src" "$v/tree/"
	(cd "$v/tree" && "change_$1")
	cmake -S "$v/tree" -B "$v/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPCPU_BUILD_TESTS=OFF \
		-DPCPU_BUILD_BENCH=OFF -DPCPU_BUILD_EXAMPLES=OFF -DPCPU_BUILD_TOOLS=OFF \
		-DPCPU_BUILD_PROMETHEUS_CPP=OFF -DPCPU_BUILD_NGINX=OFF -DPCPU_BUILD_POSTGRESQL=OFF >"$v/configure.log" 2>&1 ||
		{ echo "FAIL: configuring the $1 variant:"; tail -20 "$v/configure.log"; exit 1; }
	cmake --build "$v/build" --target pcpu -j2 >"$v/build.log" 2>&1 ||
		{ echo "FAIL: building the $1 variant:"; tail -20 "$v/build.log"; exit 1; }
	mkdir "$v/mix"
	cp -L "$(ls "$v/build"/libpcpu.so.[0-9]* | head -1)" "$v/mix/$soname_core"
	cp -L "$stats" "$v/mix/$soname_stats"
	run "$v/mix"
}

change_version() {
	sed 's/^project(pcpu VERSION \([0-9]*\)\.\([0-9]*\)\.[0-9]*/project(pcpu VERSION \1.\2.99/' \
		CMakeLists.txt >CMakeLists.txt.new && mv CMakeLists.txt.new CMakeLists.txt
	grep -q '^project(pcpu VERSION [0-9]*\.[0-9]*\.99' CMakeLists.txt
}
change_renamed() {
	grep -rl pcpu__zone_tree_adopt src | while read -r f; do
		sed 's/pcpu__zone_tree_adopt\b/pcpu__zone_tree_adopt_renamed/g' "$f" >"$f.new" && mv "$f.new" "$f"
	done
	grep -q pcpu__zone_tree_adopt_renamed src/core/pcpu.map
}

fails=0
for name in version renamed; do
	variant "$name"
	case $name in
	version) want="version \`PCPU_PRIVATE_[0-9.]*' not found" ;;
	renamed) want="undefined symbol: pcpu__zone_tree_adopt" ;;
	esac
	if grep -q "seam_probe: main reached" "$tmp/out" || [ "$rc" = 0 ] || ! grep -q "$want" "$tmp/out"; then
		echo "FAIL: $name: a mismatched pair loaded, or failed otherwise (exit $rc; want \"$want\" before main):"
		cat "$tmp/out"
		fails=1
	else
		echo "ok   $name: refused at load (exit $rc): $(head -1 "$tmp/out")"
	fi
done
exit $fails
