#!/bin/bash
# nginx's own test suite (nginx-tests) against Debian's nginx, run twice as
# user nobody: without pcpu's modules, then with ngx_http_pcpu_module and
# ngx_stream_pcpu_module loaded in every test (`pcpu_stats on;` and a
# filter with a histogram in every http{}, `pcpu_stats on;` in every
# stream{}). The two runs must fail the same subtests: the modules change
# nothing nginx does. Not part of the test command: nginx-tests is fetched
# from the network (https://github.com/nginx/nginx-tests; a revision of
# nginx's own age: for Debian 12's 1.22.1, 23b5ae1 of 2023-02, the last
# before the tests assumed newer nginx).
#
# Usage: nginx_tests.sh NGINX_TESTS_DIR BUILD_DIR [prove arguments, default -j4 .]
#
# As root it installs the Debian packages nginx-tests needs (every dynamic
# module `nginx -V` names: nginx-tests loads each one it finds there, and a
# missing one fails every test; IO::Socket::SSL). The runs are made as
# nobody, so the suite's files and the modules are copied where nobody can
# read them.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 NGINX_TESTS_DIR BUILD_DIR [prove args]" >&2; exit 2; }
tests=$(realpath "$1") build=$(realpath "$2")
shift 2
[ $# -gt 0 ] || set -- -j4 .
nginx=/usr/sbin/nginx
[ -x "$nginx" ] || { echo "$0: no $nginx (apt install nginx)" >&2; exit 1; }
for m in ngx_http_pcpu_module ngx_stream_pcpu_module; do
  [ -f "$build/integrations/nginx/$m.so" ] || { echo "$0: no $build/integrations/nginx/$m.so" >&2; exit 1; }
done
if [ "$(id -u)" = 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q nginx libnginx-mod-mail \
    libnginx-mod-http-geoip libnginx-mod-http-image-filter libnginx-mod-http-perl \
    libnginx-mod-http-xslt-filter libnginx-mod-stream libnginx-mod-stream-geoip \
    libio-socket-ssl-perl >/dev/null
fi

work=$(mktemp -d /tmp/pcpu-nginx-tests.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp -r "$tests" "$work/t"
cp "$build"/integrations/nginx/ngx_*_pcpu_module.so "$build"/libpcpu.so.* "$build"/libpcpu-stats.so.* "$work/"
# nginx-tests loads every dynamic module `nginx -V` lists after the
# TEST_NGINX_GLOBALS lines; ngx_stream_pcpu_module must follow the stream
# module, so this nginx says stream is built in and the globals load it.
cat >"$work/nginx" <<EOF
#!/bin/sh
if [ "\$1" = -V ]; then
  $nginx -V 2>&1 | sed 's/--with-stream=dynamic/--with-stream/' >&2
  exit 0
fi
LD_LIBRARY_PATH=$work exec $nginx "\$@"
EOF
chmod -R a+rX "$work"
chmod a+rx "$work/nginx"

run() { # NAME GLOBALS HTTP STREAM
  (cd "$work/t" && runuser -u nobody -- env TEST_NGINX_BINARY="$work/nginx" \
    TEST_NGINX_MODULES=/usr/lib/nginx/modules TEST_NGINX_GLOBALS="$2" \
    TEST_NGINX_GLOBALS_HTTP="$3" TEST_NGINX_GLOBALS_STREAM="$4" prove "${@:5}" >"$work/$1.txt" 2>&1) || true
  grep -a '^Files=' "$work/$1.txt" | sed "s/^/$1: /"
  # the failed subtests, per file: what the two runs must share
  grep -aA2 'Wstat' "$work/$1.txt" | grep -a 'Wstat\|Failed tests\|Parse errors' \
    | sed 's/ *(Wstat.*Tests: \([0-9]*\).*/ (\1 subtests)/' >"$work/$1.fail"
}
stream="load_module /usr/lib/nginx/modules/ngx_stream_module.so;"
run without "$stream" "" "" "$@"
run with "$stream load_module $work/ngx_http_pcpu_module.so; load_module $work/ngx_stream_pcpu_module.so;" \
  'pcpu_stats on; pcpu_stats_filter uri $uri histogram;' 'pcpu_stats on;' "$@"
echo "failing without the modules (the environment's, not pcpu's):"
sed 's/^/  /' "$work/without.fail"
if diff -u "$work/without.fail" "$work/with.fail"; then
  echo "nginx_tests: the same results with the modules"
else
  echo "nginx_tests: the results differ with the modules (above)"
  exit 1
fi
