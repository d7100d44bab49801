//! The counter add, inlined: the C library's rseq critical section
//! (`pcpu__rseq_idx16_cmpeq_addv_indexed` in include/pcpu/arch/x86_64.h and
//! aarch64.h) written in Rust inline assembly, instruction for instruction,
//! with the same descriptors, so the kernel restarts it as it restarts C's.
//!
//! What the section relies on is the C library's inline layout
//! (`pcpu_sys::PCPU_INLINE_LAYOUT`): the thread-pointer offsets of the rseq
//! area's index and rseq_cs fields in `pcpu__g`, the slot stride, a
//! counter's word at slot 0's address, and `pcpu__counter_add_slow`.
//! [`crate::check_layout`] compares it with the library's before any
//! counter exists, so no add runs against another layout.
//!
//! x86-64, as C's:
//! ```text
//!     movzwl %fs:(idx), %edx          read the index (16 bits)
//!     leaq desc(%rip), %rax           arm: rseq_cs = &descriptor
//!     movq %rax, %fs:(cs)
//! 21: cmpl %edx, %fs:(idx)            start_ip: still the same index?
//!     jnz abort
//!     shlq $25, %rdx                  the slot's offset
//! 22: addq v, (base, %rdx)            the commit
//! 23:                                 post_commit_ip
//! ```
//! The descriptor (`struct rseq_cs`: version 0, flags 0, start_ip,
//! post_commit_offset, abort_ip) goes into `__rseq_cs`, a pointer to it into
//! `__rseq_cs_ptr_array`, the jump out into `__rseq_exit_point_array`, and
//! the abort handler, after glibc's signature, into `__rseq_failure`: the
//! C sections' sections (include/pcpu/arch/common.h), each a member of the
//! code's section group (`?`), so COMDAT copies take their descriptors
//! with them. Labels are 21..25, not C's 0..4: LLVM's Intel-syntax parser
//! reads labels of 0s and 1s as binary numbers, and rustc rejects them.

// The asm's macros are unused where the stable tier's call replaces it
// (feature `stable-tier`, Miri's runs, other architectures).
#![cfg_attr(
    not(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64"), not(feature = "stable-tier"))),
    allow(unused_macros)
)]

use pcpu_sys::pcpu_counter;

/// The thread-pointer offsets of the rseq area's index and rseq_cs fields
/// (`pcpu__g`), copied into every counter handle.
///
/// Why a copy: C declares `pcpu__g` const, so a C loop of adds loads the
/// two offsets once, before the loop. Rust declares an extern static as an
/// ordinary global, and every asm block that may write memory (the add)
/// makes the compiler load it again: two loads more per add. A field of a
/// handle the loop borrows (`&Counter`: immutable for the borrow) is loaded
/// once, before the loop, as C's are. 32 bits each (static TLS offsets are
/// small; [`Offsets::get`] refuses others), so a handle is 16 bytes.
#[derive(Clone, Copy, Debug)]
// Read only by the inline asm, which the stable tier leaves out.
#[cfg_attr(
    not(all(any(target_arch = "x86_64", target_arch = "aarch64"), not(feature = "stable-tier"))),
    allow(dead_code)
)]
pub(crate) struct Offsets {
    cs: i32,
    idx: i32,
}

impl Offsets {
    /// The process's offsets. Called only once the library is initialised
    /// (after a counter allocation succeeded): they never change after.
    pub(crate) fn get() -> crate::Result<Offsets> {
        if !INLINE_ASM {
            // Only the inline asm reads them; the stable tier's call reads
            // the library's own. Not reading the C global also lets Miri
            // (which cannot see a native library's statics) run the crate.
            return Ok(Offsets { cs: 0, idx: 0 });
        }
        // SAFETY: set before any counter exists and never changed after.
        let (cs, idx) = unsafe { (pcpu_sys::pcpu__g.cs_tpoff, pcpu_sys::pcpu__g.index_tpoff) };
        match (i32::try_from(cs), i32::try_from(idx)) {
            (Ok(cs), Ok(idx)) => Ok(Offsets { cs, idx }),
            _ => Err(crate::Error::Sys {
                errno: 34,
                message: format!("pcpu: rseq offsets {cs}, {idx} do not fit the handle's 32 bits"),
            }),
        }
    }
}

/// Adds `v` to the counter whose slot 0 is `base`: one rseq attempt, then
/// the C slow path (registration, retries, the exact atomic fallback).
///
/// # Safety
/// `base` is a live counter, and [`crate::check_layout`] succeeded.
#[inline(always)]
pub(crate) unsafe fn counter_add(base: *mut pcpu_counter, v: i64, off: Offsets) {
    if !add_once(base as *mut i64, v, off) {
        pcpu_sys::pcpu__counter_add_slow(base, v);
    }
}

#[cfg(all(target_os = "linux", target_arch = "x86_64", not(feature = "stable-tier")))]
pub(crate) const INLINE_ASM: bool = true;
#[cfg(all(target_os = "linux", target_arch = "aarch64", not(feature = "stable-tier")))]
pub(crate) const INLINE_ASM: bool = true;
#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64"),
    not(feature = "stable-tier")
)))]
pub(crate) const INLINE_ASM: bool = false;

// ---- test variants (scripts/vm/run.sh --rust: the emulated machines) ----
// The C build's PCPU_TEST_SPLIT_BLOCKS and PCPU_TEST_BROKEN_SECTION
// (include/pcpu/arch/common.h) as rustc cfgs (`--cfg pcpu_test_...`, which
// only that script sets, never a feature: no user build gets them).
// split: a branch to the next instruction after the compare and after each
// step of the add, which ends an emulator's translated block there, so
// that TCG (which takes interrupts only between blocks) can interrupt the
// section mid-way, on the commit's first byte too. broken: the descriptor's
// range ends at the commit's first byte instead of after it, so that an
// interruption landing on the commit is not restarted and the add a signal
// handler or another thread makes to the slot meanwhile is lost: the
// emulated run must then see a wrong total (the test of the test).
#[cfg(not(pcpu_test_split_blocks))]
macro_rules! split {
    () => {
        ""
    };
}
#[cfg(all(pcpu_test_split_blocks, target_arch = "x86_64"))]
macro_rules! split {
    () => {
        "jmp 26f\n26:"
    };
}
#[cfg(all(pcpu_test_split_blocks, not(target_arch = "x86_64")))]
macro_rules! split {
    () => {
        "b 26f\n26:"
    };
}
#[cfg(not(pcpu_test_broken_section))]
macro_rules! range_end {
    () => {
        "23f"
    };
}
#[cfg(pcpu_test_broken_section)]
macro_rules! range_end {
    () => {
        "22f"
    };
}
// ---- end of the test variants ----

// The entries both architectures' add puts beside its section, as C's
// PCPU__RSEQ_EXIT_POINT and PCPU__RSEQ_DESCRIPTOR do (pcpu/arch/common.h):
// the exit point (start 21, the abort label) in __rseq_exit_point_array;
// the descriptor (label 24, 32-byte aligned in __rseq_cs: start 21, the
// range's length, abort 25) and a pointer to it in __rseq_cs_ptr_array.
// The two lists carry `R` (retain): nothing refers to them, and rustc links
// with --gc-sections.
macro_rules! rseq_exit_point {
    () => {
        concat!(
            ".pushsection __rseq_exit_point_array, \"aw?R\"\n",
            ".balign 8\n",
            ".quad 21f\n",
            ".quad {abort}\n",
            ".popsection"
        )
    };
}
macro_rules! rseq_descriptor {
    () => {
        concat!(
            ".pushsection __rseq_cs, \"aw?\"\n",
            ".balign 32\n",
            "24:\n",
            ".long 0x0, 0x0\n",
            ".quad 21f\n",
            ".quad (",
            range_end!(),
            " - 21f)\n",
            ".quad 25f\n",
            ".popsection\n",
            ".pushsection __rseq_cs_ptr_array, \"aw?R\"\n",
            ".balign 8\n",
            ".quad 24b\n",
            ".popsection"
        )
    };
}

/// One attempt; `true` once committed.
#[cfg(all(target_os = "linux", target_arch = "x86_64", not(feature = "stable-tier")))]
#[inline(always)]
unsafe fn add_once(base: *mut i64, v: i64, off: Offsets) -> bool {
    let (cs, idx) = (off.cs as isize, off.idx as isize);
    core::arch::asm!(
        rseq_exit_point!(),
        "movzwl %fs:({idx}), %edx",
        rseq_descriptor!(),
        "leaq 24b(%rip), %rax",
        "movq %rax, %fs:({cs})",
        "21:",
        "cmpl %edx, %fs:({idx})",
        "jnz {abort}",
        split!(),
        "shlq ${shift}, %rdx",
        split!(),
        "22:",
        "addq {v}, ({base}, %rdx)",
        "23:",
        ".pushsection __rseq_failure, \"ax?\"",
        // `ud1`'s opcode, so that the signature is its displacement and a
        // stray jump into it traps; then glibc's RSEQ_SIG for x86.
        ".byte 0x0f, 0xb9, 0x3d",
        ".long 0x53053053",
        "25:",
        "jmp {abort}",
        ".popsection",
        cs = in(reg) cs,
        idx = in(reg) idx,
        base = in(reg) base,
        v = in(reg) v,
        shift = const pcpu_sys::PCPU_SLOT_STRIDE_SHIFT,
        out("rax") _,
        out("rdx") _,
        abort = label { return false; },
        options(att_syntax, nostack)
    );
    true
}

#[cfg(all(target_os = "linux", target_arch = "aarch64", not(feature = "stable-tier")))]
#[inline(always)]
unsafe fn add_once(base: *mut i64, v: i64, off: Offsets) -> bool {
    let (cs, idx) = (off.cs as isize, off.idx as isize);
    // The thread pointer: constant for a thread, so `pure` lets the
    // compiler hoist it out of a loop of adds, as C's builtin is.
    let tp: usize;
    core::arch::asm!("mrs {}, tpidr_el0", out(reg) tp, options(pure, nomem, nostack, preserves_flags));
    core::arch::asm!(
        rseq_exit_point!(),
        "ldrh w13, [{tp}, {idx}]",
        rseq_descriptor!(),
        "adrp x15, 24b",
        "add x15, x15, :lo12:24b",
        "str x15, [{tp}, {cs}]",
        "21:",
        "ldr w15, [{tp}, {idx}]",
        "cmp w15, w13",
        "b.ne {abort}",
        split!(),
        "add x13, {base}, x13, lsl #{shift}",
        "ldr x14, [x13]",
        split!(),
        "add x14, x14, {v}",
        split!(),
        "22:",
        "str x14, [x13]",
        "23:",
        ".pushsection __rseq_failure, \"ax?\"",
        ".balign 4",
        // glibc's RSEQ_SIG for aarch64: `brk #0x45e0`.
        ".inst 0xd428bc00",
        "25:",
        "b {abort}",
        ".popsection",
        tp = in(reg) tp,
        cs = in(reg) cs,
        idx = in(reg) idx,
        base = in(reg) base,
        v = in(reg) v,
        shift = const pcpu_sys::PCPU_SLOT_STRIDE_SHIFT,
        out("x13") _,
        out("x14") _,
        out("x15") _,
        out("x16") _,
        out("x17") _,
        abort = label { return false; },
        options(nostack)
    );
    true
}

/// Elsewhere: the stable tier's exported add does the whole add.
#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64"),
    not(feature = "stable-tier")
)))]
#[inline(always)]
unsafe fn add_once(base: *mut i64, v: i64, _off: Offsets) -> bool {
    pcpu_sys::pcpu_counter_add(base as *mut pcpu_counter, v);
    true
}

/// Adds `v` to the word `p` of an owned slot: one unlocked `add` to memory
/// on x86-64 (what C's `pcpu__owned_add` emits: a signal handler of the same
/// thread lands before or after it, never inside); elsewhere the stable
/// tier's owned add.
///
/// # Safety
/// `p` is a word of an owned slot the calling thread holds, of a live
/// counter.
#[cfg(all(target_arch = "x86_64", not(feature = "stable-tier")))]
#[inline(always)]
pub(crate) unsafe fn owned_add(p: *mut i64, v: i64) {
    core::arch::asm!("addq {v}, ({p})", p = in(reg) p, v = in(reg) v, options(att_syntax, nostack));
}
