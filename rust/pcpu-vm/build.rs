//! Links the program with `--wrap=pcpu__counter_add_slow`: the inline
//! add's calls of the C slow path (an aborted or refused attempt) go
//! through `__wrap_pcpu__counter_add_slow` in src/main.rs, which counts
//! them and calls the library's (`__real_...`). Only references from other
//! object files are wrapped: the Rust code's, not the library's own.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-link-arg-bins=-Wl,--wrap=pcpu__counter_add_slow");
}
