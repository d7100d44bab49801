#!/usr/bin/env bash
# prometheus-cpp 1.0.1's three pull samples (pull/tests/integration/
# sample_server.cc, sample_server_multi.cc, sample_server_auth.cc) compiled
# unchanged against pcpu's layer (its include directory first; linked with
# -lpcpu-prometheus-pull -lpcpu-prometheus -lpcpu-stats -lpcpu), run, and scraped with
# curl: status codes, headers, `promtool check metrics`, and the values.
# The samples listen on 127.0.0.1:8080, hard-coded: each runs in a network
# namespace of its own (unshare -n, or -rn as a user) where one is allowed,
# so that nothing else on the machine is in the way; elsewhere on the
# host's loopback (ctest serializes this test with RESOURCE_LOCK).
# No timing is asserted: the checks poll, with generous limits.
# Usage: promcpp_pull_samples.sh SRC_DIR BUILD_DIR CXX
#        promcpp_pull_samples.sh --check NAME EXE   (internal: one sample)
set -euo pipefail

fail() { echo "FAIL: $*" >&2; exit 1; }

if [ "$1" = --check ]; then
  name=$2 exe=$3
  ip link set lo up 2>/dev/null || true
  tmp=$(mktemp -d)
  "$exe" > "$tmp/out" 2>&1 &
  pid=$!
  trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
  base=http://127.0.0.1:8080
  # get PATH [curl options...]: the body in $tmp/body, headers in $tmp/hdr,
  # the status in $code.
  get() {
    local path=$1; shift
    code=$(curl -sS -o "$tmp/body" -D "$tmp/hdr" -w '%{http_code}' "$@" "$base$path" 2> "$tmp/curl.err") || code=000
  }
  # wait_up PATH CODE [curl arguments]: polls until PATH answers CODE, up
  # to 120 s. Not just any answer: the samples start serving in Exposer's
  # constructor and register their endpoints and authentication after it,
  # so a scrape in between gets 404, or 200 where 401 is due (one clean
  # clone's run failed there: "/metricsA answered 404").
  wait_up() {
    local path=$1 want=$2 i; shift 2
    for i in $(seq 1 600); do
      kill -0 $pid 2>/dev/null || { cat "$tmp/out"; fail "$name exited"; }
      get "$path" "$@"
      [ "$code" = "$want" ] && return 0
      sleep 0.2
    done
    fail "$name: $base$path answered $code, never $want: $(cat "$tmp/curl.err")"
  }
  # value NAME_AND_LABELS: the sample's value in $tmp/body.
  value() { awk -v k="$1" '$1 == k { print $2 }' "$tmp/body"; }
  promcheck() {
    promtool check metrics < "$tmp/body" || fail "$name $1: promtool check metrics"
    echo "  $1: promtool check metrics ok"
  }
  # Polls PATH until the sample NAME_AND_LABELS is >= MIN (up to 120 s);
  # prints it (run in $(...), its $code does not come back).
  wait_value() {
    local path=$1 key=$2 min=$3 i v; shift 3
    for i in $(seq 1 600); do
      get "$path" "$@"
      v=$(value "$key")
      if [ -n "$v" ] && awk -v v="$v" -v m="$min" 'BEGIN { exit !(v + 0 >= m + 0) }'; then
        echo "$v"; return 0
      fi
      sleep 0.2
    done
    fail "$name: $key on $path never reached $min (last: '${v:-}')"
  }
  case $name in
    sample_server)
      wait_up /metrics 200
      # The endpoint's own counter: the scrapes before this one, exactly.
      n=0
      for i in 1 2 3; do get /metrics; n=$((n + 1)); done
      get /metrics
      v=$(value exposer_scrapes_total)
      [ "$v" -ge 4 ] 2>/dev/null || fail "exposer_scrapes_total '$v' after at least 4 scrapes"
      get /metrics; v2=$(value exposer_scrapes_total)
      [ "$v2" = $((v + 1)) ] || fail "exposer_scrapes_total went from $v to $v2 in one scrape"
      echo "  exposer_scrapes_total counts the scrapes: $v then $v2"
      grep -qi '^Content-Type: text/plain.*charset=utf-8' "$tmp/hdr" || fail "Content-Type: $(cat "$tmp/hdr")"
      for l in 'direction="rx",protocol="tcp"' 'direction="tx",protocol="tcp"' \
               'direction="rx",protocol="udp"' 'direction="tx",protocol="udp"'; do
        [ -n "$(value "observed_packets_total{$l}")" ] || fail "observed_packets_total{$l} missing"
      done
      for f in exposer_transferred_bytes_total exposer_request_latencies_count \
               'exposer_request_latencies{quantile="0.99"}'; do
        [ -n "$(value "$f")" ] || fail "$f missing"
      done
      # The sample adds http_requests_total series once a second.
      wait_value /metrics 'http_requests_total{method="GET"}' 1 > /dev/null ||
        wait_value /metrics 'http_requests_total{method="HEAD"}' 1 > /dev/null
      grep -q '^http_requests_total{method="[A-Z]*"} [1-9]' "$tmp/body" || fail "no http_requests_total"
      promcheck /metrics
      # gzip when accepted, the same exposition once inflated.
      get /metrics --compressed
      [ "$code" = 200 ] || fail "gzip scrape answered $code"
      grep -qi '^Content-Encoding: gzip' "$tmp/hdr" || fail "no Content-Encoding: gzip"
      grep -q '^# TYPE observed_packets_total counter' "$tmp/body" || fail "gzip body"
      promcheck "/metrics (gzip)"
      get /metrics -H 'Accept-Encoding: gzip;q=0'
      ! grep -qi '^Content-Encoding' "$tmp/hdr" || fail "gzip despite q=0"
      get /other; [ "$code" = 404 ] || fail "/other answered $code, not 404"
      get /metrics -X POST -d x; [ "$code" = 405 ] || fail "POST answered $code, not 405"
      echo "  gzip, 404 and 405 ok"
      ;;
    sample_server_multi)
      wait_up /metricsA 200
      key_a='time_running_seconds_total{another_label="bar",yet_another_label="baz"}'
      key_b='other_time_running_seconds_total{another_label="not_bar",yet_another_label="not_baz"}'
      a=$(wait_value /metricsA "$key_a" 2)
      grep -q '^other_time' "$tmp/body" && fail "/metricsA serves registry B"
      promcheck /metricsA
      b=$(wait_value /metricsB "$key_b" 3)
      grep -q '^time_running' "$tmp/body" && fail "/metricsB serves registry A"
      promcheck /metricsB
      # A counts seconds by 1, B by 1.5, in the same loop.
      awk -v a="$a" -v b="$b" 'BEGIN { k = b / 1.5; exit !(a == int(a) && k == int(k) && k >= a) }' ||
        fail "values: A $a, B $b"
      echo "  A $a (by 1), B $b (by 1.5)"
      get /metrics; [ "$code" = 404 ] || fail "/metrics answered $code, not 404"
      get /metricsA; grep -q '^exposer_scrapes_total [1-9]' "$tmp/body" || fail "A's own scrape counter"
      ;;
    sample_server_auth)
      wait_up /metrics 401
      grep -qi '^WWW-Authenticate: Basic realm="Some Auth Realm"' "$tmp/hdr" ||
        fail "401 without WWW-Authenticate: $(cat "$tmp/hdr")"
      echo "  401 with WWW-Authenticate without credentials"
      get /metrics -u test_user:wrong; [ "$code" = 401 ] || fail "wrong password answered $code"
      get /metrics -u other:test_password; [ "$code" = 401 ] || fail "wrong user answered $code"
      get /metrics -H 'Authorization: Basic !!!'; [ "$code" = 401 ] || fail "bad base64 answered $code"
      echo "  401 for a wrong password, a wrong user, malformed credentials"
      key='time_running_seconds_total{another_label="bar",yet_another_label="baz"}'
      wait_value /metrics "$key" 2 -u test_user:test_password > /dev/null
      get /metrics -u test_user:test_password
      [ "$code" = 200 ] || fail "with credentials: $code"
      v=$(value "$key")
      promcheck "/metrics (authenticated)"
      awk -v v="$v" 'BEGIN { exit !(v == int(v)) }' || fail "seconds $v"
      echo "  200 with credentials, $key $v"
      ;;
    *) fail "unknown sample $name" ;;
  esac
  echo "ok: $name"
  exit 0
fi

src=$1 bin=$2 cxx=$3
peer=$("$src/tests/cxx/promcpp_peer.sh" --fetch-only "$src" "$bin" | tail -n 1)
work=$bin/promcpp-pull-samples
mkdir -p "$work"
command -v promtool > /dev/null || fail "promtool is needed (Debian: prometheus)"
command -v curl > /dev/null || fail "curl is needed"
ns=()
if unshare -n true 2>/dev/null; then
  ns=(unshare -n)
elif unshare -rn true 2>/dev/null; then
  ns=(unshare -rn)
else
  echo "note: no network namespace here; the samples use the host's 127.0.0.1:8080"
fi
for s in sample_server sample_server_multi sample_server_auth; do
  # Unchanged: the peer's file itself, the layer's include directory first.
  "$cxx" -std=c++17 -O1 -g -pthread -I"$src/compat/prometheus-cpp/include" -I"$src/include" -I"$bin/include" \
    "$peer/pull/tests/integration/$s.cc" \
    -L"$bin/compat/prometheus-cpp" -L"$bin" -Wl,-rpath,"$bin/compat/prometheus-cpp:$bin" \
    -lpcpu-prometheus-pull -lpcpu-prometheus -lpcpu-stats -lpcpu -o "$work/$s"
  echo "== $s (built unchanged from $peer/pull/tests/integration/$s.cc)"
  "${ns[@]}" "$0" --check "$s" "$work/$s"
done
echo "ok: 3 of 3 samples"
