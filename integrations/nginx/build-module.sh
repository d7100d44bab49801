#!/bin/sh
# Builds ngx_http_pcpu_module.so (and ngx_stream_pcpu_module.so, beside it,
# where that nginx has stream) against an installed nginx's module build
# system (Debian's nginx-dev: /usr/share/nginx/src, with conf_flags, the
# packaged binary's configure flags), as nginx builds dynamic modules:
#   configure <the binary's flags> --add-dynamic-module=<this directory>
#   make -f objs/Makefile modules
# Usage: build-module.sh NGINX_SRC WORK_DIR OUTPUT INCS LIBS [CFLAGS [LDFLAGS]]
#   NGINX_SRC  nginx's sources or nginx-dev's tree (copied into WORK_DIR/ngx)
#   WORK_DIR   a directory of the build tree
#   OUTPUT     where the .so goes
#   INCS, LIBS what `config` takes as PCPU_NGINX_INCS and PCPU_NGINX_LIBS
#   CFLAGS, LDFLAGS  added to nginx's own (--with-cc-opt, --with-ld-opt):
#              a distribution's hardening flags (dpkg-buildflags), as
#              Debian's nginx modules are built
# configure runs again only when nginx's tree, `config` or an argument changed.
set -eu
src=$1 work=$2 out=$3 incs=$4 libs=$5 ccopt=${6:-} ldopt=${7:-}
here=$(cd "$(dirname "$0")" && pwd)
ngx=$work/ngx
stamp=$work/configured.stamp
mkdir -p "$work"
if [ ! -f "$stamp" ] || [ "$here/config" -nt "$stamp" ] || [ "$here/status.html" -nt "$stamp" ] ||
   [ "$src/configure" -nt "$stamp" ] || [ "$(cat "$stamp")" != "$incs|$libs|$ccopt|$ldopt" ]; then
  rm -rf "$ngx"
  cp -r "$src" "$ngx"
  flags=""
  if [ -f "$ngx/conf_flags" ]; then
    # Debian's: NGX_CONF_FLAGS=( ... ), a bash array of the packaged
    # binary's flags (--with-compat among them).
    flags=$(sed -n 's/^NGX_CONF_FLAGS=( *\(.*\) *)$/\1/p' "$ngx/conf_flags")
  fi
  [ -n "$flags" ] || flags="--with-compat"
  # The stream module's headers: Debian's flags leave stream out (its
  # stream modules are packages of their own, built with
  # --with-stream=dynamic); with --with-compat the module loads into the
  # packaged binary as theirs do.
  case " $flags " in *" --with-stream"*) ;; *) flags="$flags --with-stream=dynamic" ;; esac
  export PCPU_NGINX_INCS="$incs" PCPU_NGINX_LIBS="$libs"
  # $flags is the packaged binary's (no spaces within a flag); ours are
  # quoted for eval's second reading.
  (cd "$ngx" && eval "./configure $flags --add-dynamic-module=\"\$here\" \
     \${ccopt:+\"--with-cc-opt=\$ccopt -fPIC\"} \${ldopt:+\"--with-ld-opt=\$ldopt -fPIC\"}") \
    > "$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
  printf '%s\n' "$incs|$libs|$ccopt|$ldopt" > "$stamp"
fi
# The module's objects are made again every time: nginx's Makefile knows
# its own headers, not pcpu's, so an object compiled against an older
# <pcpu/expose.h> (another struct size) would be linked into a module that
# reads the new library's structs wrongly (it crashed a binary upgrade).
rm -f "$ngx"/objs/addon/*/*.o
# Our modules only, not `make modules`: with --with-stream=dynamic that
# would build nginx's own ngx_stream_module.so too, whose sources nginx-dev
# does not ship (its headers only).
targets=objs/ngx_http_pcpu_module.so
grep -q '^objs/ngx_stream_pcpu_module.so:' "$ngx/objs/Makefile" && targets="$targets objs/ngx_stream_pcpu_module.so"
make -s -C "$ngx" -f objs/Makefile $targets > "$work/make.log" 2>&1 || { cat "$work/make.log"; exit 1; }
cp "$ngx/objs/ngx_http_pcpu_module.so" "$out"
# The stream module, beside it, where this nginx has stream (`config`).
rm -f "$(dirname "$out")/ngx_stream_pcpu_module.so"
if [ -f "$ngx/objs/ngx_stream_pcpu_module.so" ]; then
  cp "$ngx/objs/ngx_stream_pcpu_module.so" "$(dirname "$out")/"
fi
