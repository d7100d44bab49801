#!/bin/sh
# Checks the aarch64 inline add (src/inline.rs) where no aarch64 Rust
# standard library is installed: compiles that function alone as a
# no_core crate for aarch64-unknown-linux-gnu with a nightly rustc (the
# no_core and lang_items features; stable rustc has no aarch64 `core`
# here), links it with the aarch64 cross gcc, and runs
# tests/check_rseq_sections.py on it (range on instruction boundaries,
# the commit last, the signature before abort_ip, both debugger lists),
# then prints the disassembly to compare with include/pcpu/arch/aarch64.h.
# It does not run the code (no aarch64 machine or qemu-user here).
# Not in scripts/test.sh: it needs the nightly toolchain and
# aarch64-linux-gnu-gcc. Usage: pcpu/check-aarch64-asm.sh [--split|--broken]
#   --split   the emulated machines' block-splitting variant (the cfg
#             pcpu_test_split_blocks): checked as the plain one
#   --broken  split + pcpu_test_broken_section: the check passes only if it
#             finds the commit outside the range (--expect-broken)
set -eu
cfgs="" expect=""
case "${1:-}" in
  "") ;;
  --split) cfgs="--cfg pcpu_test_split_blocks" ;;
  --broken) cfgs="--cfg pcpu_test_split_blocks --cfg pcpu_test_broken_section" expect=--expect-broken ;;
  *) echo "usage: pcpu/check-aarch64-asm.sh [--split|--broken]" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$here/src/inline.rs" "$tmp/a.rs" <<'PY'
import sys
src = open(sys.argv[1]).read()
marker = '#[cfg(all(target_os = "linux", target_arch = "aarch64", not(feature = "stable-tier")))]\n#[inline(always)]\nunsafe fn add_once'
body = src[src.index(marker):src.index('/// Elsewhere: the stable tier')].split('\n', 1)[1]
body = body.replace('pcpu_sys::PCPU_SLOT_STRIDE_SHIFT', '25').replace('core::arch::asm!', 'asm!')
# The test variants' macros (split!, range_end!) that the body uses.
body = src[src.index('// ---- test variants'):src.index('// ---- end of the test variants')] + body
prelude = '''#![feature(no_core, lang_items, rustc_attrs, decl_macro)]
#![allow(internal_features)]
#![no_core]
#![crate_type = "lib"]
#[lang = "pointee_sized"] pub trait PointeeSized {}
#[lang = "meta_sized"] pub trait MetaSized: PointeeSized {}
#[lang = "sized"] pub trait Sized: MetaSized {}
#[lang = "copy"] pub trait Copy {}
impl Copy for Offsets {} impl Copy for i64 {} impl Copy for isize {} impl Copy for usize {}
impl Copy for i32 {} impl Copy for bool {} impl<T: ?Sized> Copy for *mut T {}
#[rustc_builtin_macro] pub macro concat($($t:tt)*) {}
#[rustc_builtin_macro] pub macro asm("assembly template", $(operands,)* $(options($(option),*))?) {}
pub struct Offsets { pub cs: i32, pub idx: i32 }
'''
test = '\n#[no_mangle]\npub unsafe fn rust_a64_add(base: *mut i64, v: i64, off: Offsets) -> bool { add_once(base, v, off) }\n'
open(sys.argv[2], 'w').write(prelude + body + test)
PY
# shellcheck disable=SC2086 # the cfgs, split on purpose
rustc +nightly --target aarch64-unknown-linux-gnu -O $cfgs --emit=obj "$tmp/a.rs" -o "$tmp/a.o"
aarch64-linux-gnu-gcc -shared -nostdlib "$tmp/a.o" -o "$tmp/a.so"
python3 "$here/../../tests/check_rseq_sections.py" $expect 1 "$tmp/a.so"
aarch64-linux-gnu-objdump -d --no-show-raw-insn "$tmp/a.so" | sed -n '/<rust_a64_add>:/,/^$/p'
