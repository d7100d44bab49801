//! Compiles bench/insn_loops.c (the C loop of the C inline add) against
//! the headers pcpu-sys built the library with, for the C baseline.
fn main() {
    let include = std::env::var("DEP_PCPU_INCLUDE").expect("pcpu-sys's include directory");
    let gen = std::env::var("DEP_PCPU_GEN_INCLUDE").expect("pcpu-sys's generated headers (a bundled build)");
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("the crate's directory");
    let src = std::path::Path::new(&manifest).join("../../bench/insn_loops.c");
    println!("cargo:rerun-if-changed={}", src.display());
    cc::Build::new().file(&src).include(&include).include(&gen).opt_level(2).compile("pcpu_bench_loops");
}
