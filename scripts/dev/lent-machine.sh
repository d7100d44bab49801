#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Benchmarks on a lent many-core machine (the `device` tool's machine: bare,
# x86-64, Ubuntu, root, nothing can be fetched there). The benchmarks need
# programs that machine lacks -- PostgreSQL 15, pgbench, nginx, wrk -- so
# this script carries Debian's, as installed here by scripts/install-deps.sh,
# with every library they load that is not the C library itself.
#
#   scripts/dev/lent-machine.sh bundle [VTS.so [PG_BASELINE]]   here, after a
#       build in build/: makes .devbundle/ (ignored by git; pass it as the
#       run's `carry`). PG_BASELINE: another build's pcpu_stat_statements
#       folder, run beside this one (postgresql_bench.py --baseline)
#   scripts/dev/lent-machine.sh install            there, as root, first:
#       unpacks the programs into / , the libraries the machine lacks into
#       /usr/local/lib/pcpu-host (its own are kept), adds the postgres user
#   scripts/dev/lent-machine.sh run OUT            there, after install:
#       the benchmarks, each under a time limit, logs into OUT
#
# What `run` runs (bench/postgresql.md, bench/nginx.md, bench/flows.md):
#   bench/postgresql_bench.py at 16 and 64 clients, then memory per entry;
#   bench/pcpu_bench_flows --workers 16;
#   bench/nginx_bench.py with 8 workers and 8 wrk threads (the workers have
#   cores of their own), VTS beside it when the bundle holds it.
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
B=$here/.devbundle

# The C library's own objects: the lent machine's newer ones serve (a
# program built against glibc 2.36 runs on a later one), never a copy.
is_libc() {
	case $(basename "$1") in
	libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|libresolv.so.*|libutil.so.*|libanl.so.*|libnss_*|libmvec.so.*)
		return 0 ;;
	esac
	return 1
}

bundle() {
	vts=${1:-}
	pgbase=${2:-}
	build=$here/build
	for f in "$build/integrations/postgresql/pcpu_stat_statements.so" \
	         "$build/integrations/nginx/ngx_http_pcpu_module.so" \
	         "$build/bench/pcpu_bench_flows" "$build/tools/pcpustat"; do
		[ -e "$f" ] || { echo "lent-machine: no $f: build first" >&2; exit 1; }
	done
	grep -qx '/.devbundle/' "$here/.git/info/exclude" 2>/dev/null ||
		echo '/.devbundle/' >>"$here/.git/info/exclude"
	rm -rf "$B"
	mkdir -p "$B/root/usr/lib/postgresql/15/bin" "$B/root/usr/lib/postgresql/15/lib" \
	         "$B/root/usr/share/postgresql" "$B/root/usr/sbin" "$B/root/usr/bin" \
	         "$B/root/usr/share/zoneinfo/Etc" "$B/lib" "$B/pg" "$B/pg-baseline" "$B/nginx" "$B/bin"
	for p in postgres initdb pg_ctl pgbench psql; do
		cp -L /usr/lib/postgresql/15/bin/$p "$B/root/usr/lib/postgresql/15/bin/"
	done
	# Every module but the JIT's (its LLVM is 100 MB, and jit is off for
	# these statements anyway: their cost is far under jit_above_cost).
	for f in /usr/lib/postgresql/15/lib/*.so; do
		[ "$(basename "$f")" = llvmjit.so ] || cp -L "$f" "$B/root/usr/lib/postgresql/15/lib/"
	done
	cp -a /usr/share/postgresql/15 "$B/root/usr/share/postgresql/"
	cp -L /usr/share/zoneinfo/UTC "$B/root/usr/share/zoneinfo/"
	cp -L /usr/share/zoneinfo/Etc/UTC "$B/root/usr/share/zoneinfo/Etc/"
	cp -L /usr/sbin/nginx "$B/root/usr/sbin/"
	cp -L /usr/bin/wrk "$B/root/usr/bin/"
	cp -L "$build"/integrations/postgresql/pcpu_stat_statements.so \
	      "$build"/integrations/postgresql/pcpu_stat_statements.control \
	      "$build"/integrations/postgresql/pcpu_stat_statements--*.sql "$B/pg/"
	[ -n "$pgbase" ] && cp -L "$pgbase"/pcpu_stat_statements.so "$pgbase"/pcpu_stat_statements.control \
		"$pgbase"/pcpu_stat_statements--*.sql "$B/pg-baseline/"
	cp -L "$build/integrations/nginx/ngx_http_pcpu_module.so" "$B/nginx/"
	[ -n "$vts" ] && cp -L "$vts" "$B/nginx/"
	cp -L "$build/bench/pcpu_bench_flows" "$build/tools/pcpustat" "$B/bin/"
	for f in "$build"/libpcpu*.so.[0-9]*; do # this build's, as the loader names them
		case $f in *.so.[0-9]) cp -L "$f" "$B/lib/" ;; esac
	done
	# Every library any of them loads, by the name the loader asks for.
	find "$B/root" "$B/pg" "$B/pg-baseline" "$B/nginx" "$B/bin" -type f | while read -r f; do
		file -L "$f" | grep -q ELF || continue
		ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'
	done | sort -u | while read -r name path; do
		is_libc "$name" && continue
		case $name in libpcpu*) continue ;; esac
		[ -e "$B/lib/$name" ] || cp -L "$path" "$B/lib/$name"
	done
	tar -C "$B" -cJf "$B.tar.xz" root lib pg pg-baseline nginx bin
	rm -rf "${B:?}"/*
	mv "$B.tar.xz" "$B/bundle.tar.xz"
	du -h "$B/bundle.tar.xz"
}

install_there() {
	[ "$(id -u)" = 0 ] || { echo "lent-machine: install runs as root" >&2; exit 1; }
	w=/opt/pcpu-bundle
	rm -rf "$w" && mkdir -p "$w" || exit 1
	# Python's tarfile where the machine has no xz.
	if command -v xz >/dev/null; then tar -C "$w" -xJf "$B/bundle.tar.xz"
	else python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
		"$B/bundle.tar.xz" "$w"; fi || exit 1
	# Programs and PostgreSQL's tree into their Debian paths (pg_cluster.py
	# and the benchmarks look there); zoneinfo only where the machine has none.
	[ -e /usr/share/zoneinfo/UTC ] && rm -rf "$w/root/usr/share/zoneinfo"
	cp -a "$w/root/." / || exit 1
	mkdir -p /usr/local/lib/pcpu-host
	for f in "$w"/lib/*; do
		n=$(basename "$f")
		ldconfig -p | grep -q "^[[:space:]]*$n " || cp -a "$f" /usr/local/lib/pcpu-host/
	done
	echo /usr/local/lib/pcpu-host >/etc/ld.so.conf.d/pcpu-host.conf
	ldconfig
	id postgres >/dev/null 2>&1 || useradd -r -M -d /nonexistent -s /bin/sh postgres || exit 1
	getent group nogroup >/dev/null || groupadd -r nogroup
	mkdir -p /var/lib/nginx /var/log/nginx
	missing=$(for f in /usr/lib/postgresql/15/bin/* /usr/sbin/nginx /usr/bin/wrk "$w"/pg/*.so \
	                    "$w"/pg-baseline/*.so "$w"/nginx/*.so "$w"/bin/*; do
		[ -e "$f" ] || continue ldd "$f" 2>&1 | grep "not found"; done | sort -u)
	[ -z "$missing" ] || { echo "lent-machine: still missing: $missing" >&2; exit 1; }
	echo "lent-machine: installed; $(/usr/lib/postgresql/15/bin/postgres --version);" \
	     "$(nginx -v 2>&1); $(nproc) CPUs; $(uname -r)"
}

run_there() {
	out=${1:?OUT}
	w=/opt/pcpu-bundle
	export PATH=/usr/lib/postgresql/15/bin:$PATH PYTHONUNBUFFERED=1 TZ=UTC
	cd "$here" || exit 1
	{ grep -m1 'model name' /proc/cpuinfo; cat /proc/loadavg; } | tee "$out/machine.txt"
	base=
	[ -e "$w/pg-baseline/pcpu_stat_statements.so" ] && base="--baseline $w/pg-baseline"
	# shellcheck disable=SC2086 # $base: an option and its value, or nothing
	timeout 270 python3 bench/postgresql_bench.py "$w/pg" $base --clients 16,64 --rounds 3 \
		--duration 3 --tools "$w/bin" 2>&1 | tee "$out/postgresql.txt"
	timeout 60 "$w/bin/pcpu_bench_flows" --workers 16 2>&1 | tee "$out/flows.txt"
	vts=$w/nginx/ngx_http_vhost_traffic_status_module.so
	if [ -e "$vts" ]; then
		timeout 200 python3 bench/nginx_bench.py --module "$w/nginx/ngx_http_pcpu_module.so" \
			--vts "$vts" --workers 8 --threads 8 --connections 64 --duration 3 \
			--rounds 3 --keys 1000 2>&1 | tee "$out/nginx.txt"
	else
		echo "lent-machine: no VTS in the bundle: nginx_bench.py not run" | tee "$out/nginx.txt"
	fi
}

case ${1:-} in
bundle) shift; bundle "$@" ;;
install) install_there ;;
run) shift; run_there "$@" ;;
*) echo "usage: $0 bundle [VTS.so [PG_BASELINE]] | install | run OUT" >&2; exit 2 ;;
esac
