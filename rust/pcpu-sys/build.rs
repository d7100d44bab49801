//! Builds or finds the C library pcpu-sys binds.
//!
//! Default: compiles the C library with the `cc` crate, from `csrc/`: in
//! a pcpu checkout, symbolic links to the repository's `src/`, `include/`
//! and `CMakeLists.txt` (committed); in the packaged crate, the files
//! themselves (`cargo package` follows the links), so the crate builds
//! alone with no step before packaging.
//! The sources are globbed, not listed: core = `src/core/*.c` (libpcpu),
//! statistics = `src/stats/*.c` and `src/segment/*.c` (libpcpu-stats),
//! without the optional protobuf writer (`PCPU_HAVE_PROTOBUF` undefined,
//! so the library needs libc alone). `pcpu/version.h` is generated from
//! `include/pcpu/version.h.in` with the version and layout numbers read
//! from `CMakeLists.txt`, their one source, as CMake's configure_file() does.
//!
//! Feature `protobuf`: also compiles the Prometheus protobuf writer
//! (`PCPU_FORMAT_PROTOBUF`: native histograms), with protoc-c and
//! protobuf-c, as CMake does where they are installed.
//!
//! Feature `system`: links the installed libraries found by pkg-config
//! (`pcpu-stats`, which brings `pcpu`; or `pcpu` alone where the statistics
//! layer is still part of it) and compiles nothing.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=PCPU_SYS_CSRC");
    if env::var_os("CARGO_FEATURE_SYSTEM").is_some() {
        system();
    } else {
        bundled();
    }
}

#[cfg(feature = "system")]
fn system() {
    // pcpu-stats requires pcpu in its .pc file, so probing it links both.
    if pkg_config::Config::new().probe("pcpu-stats").is_err() {
        if let Err(e) = pkg_config::Config::new().probe("pcpu") {
            panic!("pcpu-sys (feature `system`): pkg-config found neither pcpu-stats nor pcpu: {e}");
        }
    }
}

#[cfg(not(feature = "system"))]
fn system() {
    unreachable!("the `system` feature brings the pkg-config dependency");
}

/// The C tree: `$PCPU_SYS_CSRC` if set, else the crate's `csrc/`.
fn c_tree(manifest: &Path) -> PathBuf {
    if let Some(dir) = env::var_os("PCPU_SYS_CSRC") {
        return PathBuf::from(dir);
    }
    let csrc = manifest.join("csrc");
    if !csrc.join("src/core/rseq.c").is_file() {
        panic!(
            "pcpu-sys: no C sources in {}: in a pcpu checkout its entries are symbolic links to the \
             repository's src/, include/ and CMakeLists.txt (a checkout without symbolic links \
             cannot build it; PCPU_SYS_CSRC=/path/to/pcpu names a tree)",
            csrc.display()
        );
    }
    csrc
}

/// The value of `key` in CMakeLists.txt: `project(pcpu VERSION x.y.z` or
/// `set(PCPU_LAYOUT n)`.
fn cmake_value(cmake: &str, prefix: &str, end: char) -> String {
    cmake
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|rest| rest.split(end).next())
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|| panic!("pcpu-sys: CMakeLists.txt has no line `{prefix}...`"))
}

fn c_files(dir: &Path, skip: &[&str]) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("pcpu-sys: {}: {e}", dir.display()))
        .map(|e| e.expect("pcpu-sys: reading a source directory").path())
        .filter(|p| p.extension().is_some_and(|x| x == "c"))
        .filter(|p| !skip.iter().any(|s| p.file_name().is_some_and(|n| n == *s)))
        .collect();
    files.sort();
    files
}

fn bundled() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let root = c_tree(&manifest);
    for d in ["src", "include", "CMakeLists.txt"] {
        println!("cargo:rerun-if-changed={}", root.join(d).display());
    }

    // pcpu/version.h from its template and the one source of the numbers.
    let cmake = fs::read_to_string(root.join("CMakeLists.txt")).expect("pcpu-sys: CMakeLists.txt");
    let version = cmake_value(&cmake, "project(pcpu VERSION ", ' ');
    let layout = cmake_value(&cmake, "set(PCPU_LAYOUT ", ')');
    let parts: Vec<&str> = version.split('.').collect();
    assert_eq!(parts.len(), 3, "pcpu-sys: version {version} is not MAJOR.MINOR.PATCH");
    let template =
        fs::read_to_string(root.join("include/pcpu/version.h.in")).expect("pcpu-sys: include/pcpu/version.h.in");
    let header = template
        .replace("@PROJECT_VERSION_MAJOR@", parts[0])
        .replace("@PROJECT_VERSION_MINOR@", parts[1])
        .replace("@PROJECT_VERSION_PATCH@", parts[2])
        .replace("@PROJECT_VERSION@", &version)
        .replace("@PCPU_LAYOUT@", &layout);
    // Any `@NAME@` left is a placeholder added to the template since.
    let left = header
        .split('@')
        .skip(1)
        .step_by(2)
        .find(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'));
    assert!(
        left.is_none(),
        "pcpu-sys: version.h.in has a placeholder build.rs does not fill: @{}@",
        left.unwrap_or("")
    );
    let gen = out.join("include/pcpu");
    fs::create_dir_all(&gen).unwrap();
    fs::write(gen.join("version.h"), header).unwrap();

    let mut files = c_files(&root.join("src/core"), &[]);
    // expose_protobuf.c needs protobuf-c's generated code: left out, as
    // CMake leaves it out without protobuf-c, unless the feature asks.
    files.extend(c_files(&root.join("src/stats"), &["expose_protobuf.c"]));
    files.extend(c_files(&root.join("src/segment"), &[]));

    let mut build = cc::Build::new();
    // The protobuf-c link lines, printed after the library's: a static
    // libpcpu that needs libprotobuf-c must come first on the link line.
    let mut link_after = Vec::new();
    if env::var_os("CARGO_FEATURE_PROTOBUF").is_some() {
        let (more, links) = protobuf(&root, &out, &mut build);
        files.extend(more);
        link_after = links;
    }
    // rustc links with --gc-sections, which drops the rseq debugger lists
    // nothing refers to: keep them (include/pcpu/arch/common.h) where the
    // assembler knows the retain flag, and say so in pcpu_sys::RETAIN_LISTS
    // (pcpu's test of the sections reads it).
    if assembler_retains(&out) {
        build.define("PCPU_RSEQ_RETAIN_LISTS", "1");
        println!("cargo:rustc-env=PCPU_SYS_RETAIN_LISTS=1");
    }
    build
        .files(&files)
        .include(out.join("include"))
        .include(root.join("include"))
        .include(root.join("src"))
        .define("_GNU_SOURCE", None)
        // 64-bit off_t on 32-bit targets, as CMakeLists.txt builds it
        .define("_FILE_OFFSET_BITS", "64")
        .define("PCPU_BUILDING_LIBRARY", None)
        .flag_if_supported("-std=gnu11")
        .flag("-fvisibility=hidden")
        .flag_if_supported("-Wno-unused-parameter")
        .compile("pcpu");
    for l in link_after {
        println!("{l}");
    }
    println!("cargo:rustc-link-lib=m");
    println!("cargo:include={}", root.join("include").display());
    println!("cargo:gen_include={}", out.join("include").display());
    // For tests that compile C against the same headers (pcpu's loop test).
    println!("cargo:rustc-env=PCPU_SYS_GENERATED_INCLUDE={}", out.join("include").display());
    println!("cargo:layout={layout}");
}

/// Feature `protobuf`: the Prometheus protobuf writer, as CMake builds it
/// (src/stats/sources.cmake): protoc-c generates the C code of
/// src/stats/proto/metrics.proto into OUT_DIR, and the library links
/// protobuf-c (pkg-config `libprotobuf-c`).
/// Needs protoc-c (`$PROTOC_C`, else on the PATH), protobuf-c's headers and
/// protobuf-c.proto, and google/protobuf/descriptor.proto (Debian:
/// protobuf-c-compiler, libprotobuf-c-dev, libprotobuf-dev); the include
/// directory of the .proto files is `$PCPU_SYS_PROTO_INCLUDE`, else
/// pkg-config's, else /usr/include. Returns the C files to add and the link
/// lines to print after the library's.
#[cfg(feature = "protobuf")]
fn protobuf(root: &Path, out: &Path, build: &mut cc::Build) -> (Vec<PathBuf>, Vec<String>) {
    println!("cargo:rerun-if-env-changed=PROTOC_C");
    println!("cargo:rerun-if-env-changed=PCPU_SYS_PROTO_INCLUDE");
    let lib = pkg_config::Config::new().cargo_metadata(false).probe("libprotobuf-c").unwrap_or_else(|e| {
        panic!("pcpu-sys (feature `protobuf`): pkg-config found no libprotobuf-c (Debian libprotobuf-c-dev): {e}")
    });
    let include = env::var_os("PCPU_SYS_PROTO_INCLUDE")
        .map(PathBuf::from)
        .or_else(|| pkg_config::get_variable("libprotobuf-c", "includedir").ok().map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/usr/include"));
    let protoc = env::var_os("PROTOC_C").unwrap_or_else(|| "protoc-c".into());
    let gen = out.join("proto");
    fs::create_dir_all(&gen).unwrap();
    let status = std::process::Command::new(&protoc)
        .arg(format!("--c_out={}", gen.display()))
        .arg(format!("--proto_path={}", root.join("src/stats/proto").display()))
        .arg(format!("--proto_path={}", include.display()))
        .arg("metrics.proto")
        .status()
        .unwrap_or_else(|e| {
            panic!("pcpu-sys (feature `protobuf`): cannot run {protoc:?} (Debian protobuf-c-compiler): {e}")
        });
    assert!(
        status.success(),
        "pcpu-sys (feature `protobuf`): {protoc:?} failed on metrics.proto ({status}); it needs \
         protobuf-c/protobuf-c.proto and google/protobuf/descriptor.proto under {} (Debian \
         libprotobuf-c-dev, libprotobuf-dev; PCPU_SYS_PROTO_INCLUDE names another directory)",
        include.display()
    );
    build.define("PCPU_HAVE_PROTOBUF", None).include(&gen);
    for i in &lib.include_paths {
        build.include(i);
    }
    let mut links: Vec<String> =
        lib.link_paths.iter().map(|p| format!("cargo:rustc-link-search=native={}", p.display())).collect();
    links.extend(lib.libs.iter().map(|l| format!("cargo:rustc-link-lib={l}")));
    (vec![root.join("src/stats/expose_protobuf.c"), gen.join("metrics.pb-c.c")], links)
}

#[cfg(not(feature = "protobuf"))]
fn protobuf(_: &Path, _: &Path, _: &mut cc::Build) -> (Vec<PathBuf>, Vec<String>) {
    unreachable!("the `protobuf` feature brings the pkg-config dependency");
}

/// Whether the target's assembler accepts the `R` (SHF_GNU_RETAIN) section
/// flag: GNU as 2.36 and later, LLVM 13 and later. A one-line probe,
/// compiled (not linked) with the same compiler the library is.
fn assembler_retains(out: &Path) -> bool {
    let probe = out.join("retain_probe.c");
    fs::write(&probe, "__asm__(\".pushsection pcpu_retain_probe, \\\"awR\\\"\\n\\t.long 0\\n\\t.popsection\");\n")
        .unwrap();
    cc::Build::new().file(&probe).cargo_metadata(false).try_compile("pcpu_retain_probe").is_ok()
}
