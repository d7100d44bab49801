//! A loop of `c.inc()` is the C loop's instructions (as tests/cxx's
//! cxx_loop_insns requires of the C++ wrappers): bench/loop_insns.py counts
//! one iteration of this test binary's `pcpu_rust_inc_loop` and of
//! bench/insn_loops.c's `pcpu_inc_loop` compiled by the C compiler at -O2
//! against the same headers; the rseq section's instructions must be the
//! same sequence and the whole iteration no longer. x86-64 only (the
//! aarch64 asm would need a cross objdump here); skipped where the
//! repository's bench/ or the tools are absent (a packaged crate).

// Machine code, which Miri (an interpreter) does not make.
#![cfg(not(miri))]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The loop the test disassembles: kept by name, never inlined.
#[no_mangle]
#[inline(never)]
pub fn pcpu_rust_inc_loop(c: &pcpu::Counter, n: u64) {
    for _ in 0..n {
        c.inc();
    }
}

/// The fast path of one iteration: (mnemonics, instruction count).
fn loop_path(script: &Path, elf: &Path, func: &str) -> (Vec<String>, usize) {
    let out = Command::new("python3").arg(script).arg(elf).arg(func).output().expect("python3");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "loop_insns.py {func}: {text}{}", String::from_utf8_lossy(&out.stderr));
    let mnemonics: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with("  ") && l.contains(": "))
        .map(|l| l.split(": ").nth(1).unwrap().split_whitespace().next().unwrap().to_string())
        // objdump writes the operand size where an immediate leaves it
        // open (`addq $0x1,...` for C's constant, `add %r12,...` for a
        // register): the same instruction.
        .map(|m| match m.as_str() {
            "addq" | "movq" | "cmpq" | "leaq" | "shlq" | "cmpl" => m[..m.len() - 1].to_string(),
            _ => m,
        })
        .collect();
    let count: usize = text
        .lines()
        .find_map(|l| l.split(": ").nth(1).and_then(|r| r.strip_suffix(" per iteration")))
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("loop_insns.py {func}: no count in {text}"));
    println!("{func}:\n{text}");
    (mnemonics, count)
}

/// The rseq section: from the index load to the commit.
fn section(m: &[String]) -> Vec<String> {
    let start = m.iter().position(|x| x.starts_with("movzw")).expect("the index load");
    let end = m.iter().rposition(|x| x.starts_with("add")).expect("the commit");
    let mut s = m[start..=end].to_vec();
    // The loop counter's own add may follow the commit: cut at the first
    // add after the shift.
    let shl = s.iter().position(|x| x == "shl").expect("the shift");
    s.truncate(shl + 2);
    s
}

#[test]
fn inc_loop_is_the_c_loop() {
    let c = pcpu::Counter::new().unwrap();
    pcpu_rust_inc_loop(&c, 1000);
    assert_eq!(c.get(), 1000);

    if !cfg!(target_arch = "x86_64") || cfg!(feature = "stable-tier") {
        println!("skipped: the inline asm is checked on x86-64");
        return;
    }
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let script = repo.join("bench/loop_insns.py");
    let (Some(gen), true) = (pcpu_sys::GENERATED_INCLUDE, script.is_file()) else {
        println!("skipped: no bench/loop_insns.py or generated headers (a packaged crate or a system build)");
        return;
    };
    if Command::new("objdump").arg("--version").output().is_err() {
        println!("skipped: no objdump");
        return;
    }
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let so = std::env::temp_dir().join(format!("pcpu-rust-insn-loops-{}.so", std::process::id()));
    let st = Command::new(&cc)
        .args(["-O2", "-fPIC", "-shared"])
        .arg(format!("-I{}", repo.join("include").display()))
        .arg(format!("-I{gen}"))
        .arg(repo.join("bench/insn_loops.c"))
        .arg("-o")
        .arg(&so)
        .status()
        .expect("the C compiler");
    assert!(st.success(), "{cc} bench/insn_loops.c failed");

    let exe = std::env::current_exe().unwrap();
    let (rust, rust_n) = loop_path(&script, &exe, "pcpu_rust_inc_loop");
    let (c_loop, c_n) = loop_path(&script, &so, "pcpu_inc_loop");
    std::fs::remove_file(&so).ok();
    assert_eq!(section(&rust), section(&c_loop), "the rseq section differs from C's");
    assert!(rust_n <= c_n, "the Rust loop has {rust_n} instructions per iteration, C's {c_n}");
}

/// The Rust add's critical sections, as the kernel and debuggers read
/// them: tests/check_rseq_sections.py checks every descriptor of this
/// binary (range on instruction boundaries, the commit its last
/// instruction, the signature before abort_ip, no call inside, listed in
/// __rseq_cs_ptr_array, exits in __rseq_exit_point_array): the Rust
/// add's sections and the bundled C library's alike. pcpu-sys compiles
/// the C library with its two debugger lists retained
/// (`PCPU_RSEQ_RETAIN_LISTS`), which the linker's --gc-sections would
/// otherwise drop from every Rust binary. Only where its assembler lacks
/// the `R` flag (`pcpu_sys::RETAIN_LISTS` false: GNU as before 2.36) may
/// the C library's sections miss their list entries; those faults are
/// then printed, not counted.
#[test]
fn rust_sections_pass_check_rseq_sections() {
    let c = pcpu::Counter::new().unwrap();
    pcpu_rust_inc_loop(&c, 10);
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let script = repo.join("tests/check_rseq_sections.py");
    if !cfg!(target_arch = "x86_64") || cfg!(feature = "stable-tier") || !script.is_file() {
        println!("skipped: x86-64 builds of the inline asm in a pcpu checkout only");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("python3").arg(&script).arg("1").arg(&exe).output().expect("python3");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    println!("{text}");
    let checked: usize = text
        .lines()
        .find_map(|l| l.split(": ").nth(1)?.strip_suffix(" faults").map(|r| r.to_string()))
        .and_then(|r| r.split(" sections checked").next()?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no summary line in {text}"));
    assert!(checked >= 1, "{text}");
    // The Rust loop's section: its descriptor's range is inside
    // pcpu_rust_inc_loop, and any fault would name a jump in it, or its
    // descriptor's address, which the disassembly below gives.
    assert!(!text.contains("<pcpu_rust_inc_loop"), "the Rust add's section has faults:\n{text}");
    let faults = text
        .lines()
        .filter(|l| l.starts_with("FAULT"))
        .filter(|l| {
            pcpu_sys::RETAIN_LISTS
                || (!l.contains("<pcpu__")
                    && !l.contains("<pcpu_slot")
                    && !l.contains("<pcpu_counter")
                    && (!l.contains("not in __rseq_cs_ptr_array") || !c_section(l, &text)))
        })
        .count();
    assert_eq!(faults, 0, "retained lists: {}\n{text}", pcpu_sys::RETAIN_LISTS);
}

/// Whether the fault line's section also has a fault naming a C function
/// (its exit jump), i.e. it is one of the C library's sections.
fn c_section(line: &str, all: &str) -> bool {
    let key = line.split("): ").next().unwrap_or(line);
    all.lines().any(|l| {
        l.starts_with(key) && (l.contains("<pcpu__") || l.contains("<pcpu_slot") || l.contains("<pcpu_counter"))
    })
}
