#!/bin/sh
# Writes the golden registry in the three formats and checks them with
# prometheus_client's strict OpenMetrics parser (and its 0.0.4 parser, and
# Python's JSON parser), comparing every sample across the formats.
# Usage: check_openmetrics.sh TEST_EXPOSE WORKDIR
set -eu
here=$(dirname "$0")
if ! command -v python3 >/dev/null 2>&1; then
	echo "FAIL: python3 not found; install it with scripts/install-deps.sh" >&2
	exit 1
fi
if ! python3 -c 'import prometheus_client' 2>/dev/null; then
	echo "FAIL: the Python package prometheus_client is missing. Install it with" \
	     "scripts/install-deps.sh (into its virtual environment, ~/.cache/pcpu-venv, which the tests run first on PATH); this test does not skip." >&2
	exit 1
fi
mkdir -p "$2"
"$1" --out "$2" >/dev/null
exec python3 "$here/check_openmetrics.py" "$2"
