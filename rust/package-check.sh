#!/usr/bin/env bash
# The Rust crates as a crates.io user gets them (scripts/test.sh runs this;
# it runs by hand too, from anywhere). Four checks, each printed as
# `--- PASS: NAME` or `--- FAIL: NAME`:
#   fmt        cargo fmt --check of the workspace;
#   publish    cargo publish --dry-run of pcpu-sys and pcpu: packages both
#              (pcpu-sys carries the C sources through csrc/'s links) and
#              builds each from its package alone;
#   program    a small program outside the repository, depending on
#              pcpu = "=VERSION" with the metrics, prometheus-client and
#              protobuf features and on the newest prometheus-client, with the two
#              crates patched to the unpacked .crate files: built and run
#              (it checks the exposition it gets);
#   program-prometheus-client-0.23   the same program with the oldest
#              prometheus-client release pcpu accepts.
# The program, the unpacked crates and its target directory stay in
# ${PCPU_RUST_PACKAGE_CACHE:-~/.cache/pcpu-rust-package}, so a run after
# the first rebuilds only what changed (tar keeps the files' times).
# Usage: rust/package-check.sh   (exit status 0 if every check passed)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${PCPU_RUST_PACKAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pcpu-rust-package}
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$here/Cargo.toml" | head -1)
failed=0

check() { # NAME COMMAND...: runs it, prints its verdict
  local name=$1; shift
  if "$@"; then echo "--- PASS: $name"; else echo "--- FAIL: $name"; failed=1; fi
}

check fmt bash -c "cd '$here' && cargo fmt --all --check"

# --allow-dirty: the check is of the working tree, committed or not.
# Afresh each time: cargo verifies pcpu against pcpu-sys from a temporary
# registry, and takes a registry crate of one version as never changing
# (its unpacked copy in $CARGO_HOME/registry/src/-*/ and its build), so
# a pcpu-sys changed since the last run would be verified stale.
publish() {
  rm -rf "$cache/publish-target" "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/pcpu-sys-"$version" \
    "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/pcpu-"$version" || return 1
  (
    cd "$here" && export CARGO_TARGET_DIR="$cache/publish-target" &&
      cargo publish --dry-run --allow-dirty -p pcpu-sys -p pcpu &&
      # The same packages where cargo package leaves them (the dry run
      # keeps its own out of sight), for the program below.
      cargo package -q --no-verify --allow-dirty -p pcpu-sys -p pcpu
  )
}
check publish publish

# The .crate files the dry run verified.
unpack() {
  local crate
  # Afresh, so that a file the package lost is not found from a run
  # before; tar keeps the files' times, so cargo rebuilds only what changed.
  rm -rf "$cache/crates" && mkdir -p "$cache/crates" || return 1
  # cargo package gives every file one fixed time, so a changed build.rs
  # looks unchanged to the target directory below and its old build
  # script would run (it looked for src/rseq.c after the sources moved to
  # src/core): pcpu-sys and its build script are built afresh each run.
  rm -rf "$cache"/target/*/build/pcpu-sys-* "$cache"/target/*/.fingerprint/pcpu-sys-* || return 1
  for crate in pcpu-sys pcpu; do
    tar -xzf "$cache/publish-target/package/$crate-$version.crate" -C "$cache/crates" || return 1
  done
}

# The program: the README's first example, a metrics macro with a name to
# sanitise, and pcpu's counter and histogram in the program's own
# prometheus-client registry (which needs one prometheus-client in the
# build: pcpu's range must take the program's version).
write_program() {
  mkdir -p "$cache/app/src" || return 1
  cat >"$cache/app/Cargo.toml" <<EOF
[package]
name = "pcpu-package-check"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
pcpu = { version = "=$version", features = ["metrics", "prometheus-client", "protobuf"] }
metrics = "0.24"
prometheus-client = "$1"

[patch.crates-io]
pcpu = { path = "../crates/pcpu-$version" }
pcpu-sys = { path = "../crates/pcpu-sys-$version" }

[workspace]
EOF
  cat >"$cache/app/src/main.rs" <<'EOF'
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;

fn main() {
    let c = pcpu::Counter::new().expect("a counter");
    c.add(2);
    assert_eq!(c.get(), 2);

    let rec = pcpu::metrics::Recorder::new().expect("a recorder");
    metrics::with_local_recorder(&rec, || {
        metrics::counter!("requests", "path" => "/x").increment(5);
        metrics::counter!("bad name-with.dots").increment(1);
    });
    let text = rec.registry().write(pcpu::Format::Prometheus).expect("exposition");
    assert!(text.contains("requests_total{path=\"/x\"} 5\n"), "{text}");
    assert!(text.contains("bad_name_with_dots_total 1\n"), "{text}");

    let jobs = pcpu::prometheus_client::Shared::new(pcpu::Counter::new().unwrap());
    let layout = pcpu::HistogramLayout::explicit(&[10, 100]);
    let sizes = pcpu::prometheus_client::Shared::new(pcpu::Histogram::new(&layout).unwrap());
    let mut reg = Registry::default();
    reg.register("jobs", "Jobs run", jobs.clone());
    reg.register("sizes", "Sizes", sizes.clone());
    jobs.add(3);
    sizes.record(50);
    let mut out = String::new();
    encode(&mut out, &reg).unwrap();
    assert!(out.contains("jobs_total 3\n"), "{out}");
    assert!(out.contains("sizes_bucket{le=\"100.0\"} 1\n"), "{out}");
    assert!(out.contains("sizes_bucket{le=\"+Inf\"} 1\n"), "{out}");
    // The protobuf writer, built from the packaged metrics.proto.
    assert!(pcpu::Format::Protobuf.supported());
    assert!(!rec.registry().write_bytes(pcpu::Format::Protobuf).unwrap().is_empty());
    println!("pcpu-package-check: ok ({})", pcpu::library_version());
}
EOF
}

# PROMETHEUS_CLIENT_REQ [PRECISE]: builds and runs the program, with
# prometheus-client at PRECISE if given (cargo picks the newest otherwise).
program() {
  write_program "$1" || return 1
  (
    cd "$cache/app" || exit 1
    export CARGO_TARGET_DIR="$cache/target"
    rm -f Cargo.lock
    cargo generate-lockfile -q || exit 1
    if [ $# -gt 1 ]; then
      # What pcpu::prometheus_client's documentation tells a program on an
      # older release to do: move pcpu's copy down to the program's.
      for v in $(grep -A1 '^name = "prometheus-client"$' Cargo.lock | sed -n 's/^version = "\(.*\)"$/\1/p'); do
        [ "$v" = "$2" ] || cargo update -q -p "prometheus-client@$v" --precise "$2" || exit 1
      done
    fi
    n=$(grep -c '^name = "prometheus-client"$' Cargo.lock)
    [ "$n" -eq 1 ] || { echo "package-check: $n versions of prometheus-client in the build"; exit 1; }
    cargo run -q
  )
}

if unpack; then
  check program program 0.26
  check program-prometheus-client-0.23 program 0.23 0.23.1
else
  echo "package-check: no packages to unpack (the publish check failed)"
  echo "--- FAIL: program"; echo "--- FAIL: program-prometheus-client-0.23"; failed=1
fi
exit $failed
