#!/bin/sh
# Writes the golden registry's Prometheus 0.0.4 exposition and checks it with
# `promtool check metrics` (Debian package `prometheus`), which parses it with
# Prometheus' own text parser and lints it (names, units, help, _total).
# Usage: check_promtool.sh TEST_EXPOSE WORKDIR
set -eu
if ! command -v promtool >/dev/null 2>&1; then
	echo "FAIL: promtool not found. Install it with scripts/install-deps.sh" \
	     "(Debian package 'prometheus'); this test does not skip." >&2
	exit 1
fi
mkdir -p "$2"
"$1" --out "$2" >/dev/null
promtool check metrics < "$2/expose.prom"
echo "promtool check metrics: ok ($(wc -l < "$2/expose.prom") lines)"
