#!/usr/bin/env python3
"""One source for each version number, and everything else in step with it.

pcpu has five numbers, each with one source:
  - the project's version, `project(pcpu VERSION x.y.z)` in CMakeLists.txt:
    pcpu/version.h and pcpu_version() are generated from it, pcpustat
    prints it; the Python package (pcpu.__version__, which pyproject.toml
    reads) and the Debian changelog's top entry must equal it;
    the Rust crates' version (rust/Cargo.toml's workspace.package, which
    pcpu-sys and pcpu inherit; pcpu's pin on pcpu-sys) must equal it too;
  - the C libraries' ABI major number, `set(PCPU_SOVERSION n)` in
    CMakeLists.txt: the SOVERSION of libpcpu, libpcpu-stats and
    libpcpu-exporter is ${PCPU_SOVERSION}, and their Debian runtime packages
    are named with it (libpcpu<n>, libpcpu-stats<n>, libpcpu-exporter<n>);
    the C++ libraries of the prometheus-cpp layer, whose ABI may change with
    any minor release, have the release's major.minor instead
    (PCPU_PROMETHEUS_ABI in compat/prometheus-cpp/CMakeLists.txt: their
    SOVERSION and symbol node), and so do their packages
    (libpcpu-prometheus<major.minor>, -pull, -push: Debian Policy 8.1);
    every debian/<package>.<file> (symbols, lintian overrides) names a
    package of debian/control;
  - the segment format's version, PCPU__SEG_VERSION_MAJOR/MINOR in
    src/segment/format.h: docs/segment-format.md's layout and its
    version_minor row say the same, and its versions table has a row for it;
    the Go reader's copy (go/segment/format.go) has the same major and the
    same header flag, entry flag and scheme bits;
  - the inline hot path's layout, `set(PCPU_LAYOUT n)` in CMakeLists.txt
    (pcpu/version.h's PCPU__LAYOUT is generated from it, CMake checks the
    version maps' PCPU_LAYOUT_<n> node): the Rust crate's copy, pcpu-sys'
    PCPU_INLINE_LAYOUT (the layout its inline add is written for), must
    equal it;
  - the version of `pcpustat push`'s delta state file, DELTA_FILE_VERSION
    in tools/push_delta.c: the magic and the version its comments
    describe, and test_push_delta.c's earlier magics (1 .. n-1), its later
    one (n+1) and the message it expects, say the same.
No other file may state a version of its own (a `#define X_VERSION "..."`,
"since libpcpu N.M").

Usage: check_versions.py SOURCE_DIR [PCPUSTAT]  (with PCPUSTAT, also
checks that `pcpustat --version` prints the project's version.) Prints
every mismatch; exit status 1 if any. tests/check_versions_planted.py
(ctest versions_planted) plants a mismatch of each kind in a copy and
checks that this test reports it.
"""
import os
import re
import subprocess
import sys


def read(root, path):
    with open(os.path.join(root, path), encoding="utf-8") as f:
        return f.read()


def one(pattern, text, what, problems):
    m = re.search(pattern, text, re.M)
    if not m:
        problems.append("%s: not found (%s)" % (what, pattern))
        return None
    return m.group(1)


def check(root, pcpustat=None):
    """Every mismatch in the tree `root` (and in PCPUSTAT's --version)."""
    problems = []
    cmake = read(root, "CMakeLists.txt")
    version = one(r"^project\(pcpu VERSION (\d+\.\d+\.\d+)", cmake, "CMakeLists.txt project()", problems)
    soversion = one(r"^set\(PCPU_SOVERSION (\d+)\)", cmake, "CMakeLists.txt PCPU_SOVERSION", problems)

    py = one(r'^__version__ = "([^"]+)"', read(root, "python/src/pcpu/__init__.py"),
             "python/src/pcpu/__init__.py __version__", problems)
    if version and py and py != version:
        problems.append("python/src/pcpu/__init__.py: __version__ %s, the project is %s" % (py, version))
    pyproject = read(root, "python/pyproject.toml")
    if not re.search(r'^dynamic = \["version"\]', pyproject, re.M) or \
            'version = {attr = "pcpu.__version__"}' not in pyproject:
        problems.append("python/pyproject.toml: the version must come from pcpu.__version__ (dynamic)")

    deb = one(r"^pcpu \(([^)-]+)(?:-[^)]*)?\)", read(root, "debian/changelog"),
              "debian/changelog top entry", problems)
    if version and deb and deb != version:
        problems.append("debian/changelog: top entry %s, the project is %s" % (deb, version))

    # The Rust crates (rust/): one workspace version, inherited, equal to
    # the project's; pcpu depends on exactly that pcpu-sys.
    if os.path.exists(os.path.join(root, "rust/Cargo.toml")):
        ws = read(root, "rust/Cargo.toml")
        rv = one(r'^\[workspace\.package\]\n(?:[^\[]*\n)?version = "([^"]+)"', ws,
                 "rust/Cargo.toml workspace.package version", problems)
        if version and rv and rv != version:
            problems.append("rust/Cargo.toml: version %s, the project is %s" % (rv, version))
        for crate in ("pcpu-sys", "pcpu"):
            toml = read(root, "rust/%s/Cargo.toml" % crate)
            if not re.search(r"^version\.workspace = true$", toml, re.M):
                problems.append("rust/%s/Cargo.toml: the version must be version.workspace = true" % crate)
        dep = one(r'^pcpu-sys = \{ version = "=([^"]+)"', read(root, "rust/pcpu/Cargo.toml"),
                  "rust/pcpu/Cargo.toml pcpu-sys dependency", problems)
        if version and dep and dep != version:
            problems.append("rust/pcpu/Cargo.toml: depends on pcpu-sys =%s, the project is %s" % (dep, version))

    # Every shared object's SOVERSION is one of the two variables: the C
    # libraries' PCPU_SOVERSION, the C++ layer's PCPU_PROMETHEUS_ABI (in
    # its own CMakeLists.txt only).
    cxx_cmake = "compat/prometheus-cpp/CMakeLists.txt"
    for dirpath, dirnames, files in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith((".", "build", "_install", "obj-"))]
        for f in files:
            if f != "CMakeLists.txt" and not f.endswith(".cmake"):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, root)
            allowed = {"${PCPU_SOVERSION}"} | ({"${PCPU_PROMETHEUS_ABI}"} if rel == cxx_cmake else set())
            for n, line in enumerate(open(path, encoding="utf-8"), 1):
                m = re.search(r"\bSOVERSION\s+(\S+)", line)
                if m and m.group(1) not in allowed:
                    problems.append("%s:%d: SOVERSION %s, not %s" % (rel, n, m.group(1), " or ".join(sorted(allowed))))
    cxx_abi_set = r"^set\(PCPU_PROMETHEUS_ABI \$\{PROJECT_VERSION_MAJOR\}\.\$\{PROJECT_VERSION_MINOR\}\)$"
    if not re.search(cxx_abi_set, read(root, cxx_cmake), re.M):
        problems.append("%s: PCPU_PROMETHEUS_ABI must be ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}"
                        % cxx_cmake)
    control = read(root, "debian/control")
    packages = re.findall(r"^Package: (\S+)$", control, re.M)
    cxx_abi = ".".join(version.split(".")[:2]) if version else None
    for pkg, number in (("libpcpu", soversion), ("libpcpu-stats", soversion), ("libpcpu-exporter", soversion),
                        ("libpcpu-prometheus", cxx_abi), ("libpcpu-prometheus-pull", cxx_abi),
                        ("libpcpu-prometheus-push", cxx_abi)):
        if number is None:
            continue
        names = [p for p in packages if re.match(r"^%s\d[\d.]*$" % re.escape(pkg), p)]
        if names != [pkg + number]:
            problems.append("debian/control: runtime package %s, its SONAME's number is %s (%s%s)" %
                            (names or "(none)", number, pkg, number))
    for f in sorted(os.listdir(os.path.join(root, "debian"))):
        m = re.match(r"^(.+)\.(symbols|shlibs|lintian-overrides|install|links|docs|postinst|prerm)$", f)
        if m and m.group(1) not in packages:
            problems.append("debian/%s: no package %s in debian/control" % (f, m.group(1)))

    # The segment format.
    fmt = read(root, "src/segment/format.h")
    major = one(r"#define PCPU__SEG_VERSION_MAJOR (\d+)", fmt, "format.h major", problems)
    minor = one(r"#define PCPU__SEG_VERSION_MINOR (\d+)", fmt, "format.h minor", problems)
    if major and minor:
        doc = read(root, "docs/segment-format.md")
        seg = "%s.%s" % (major, minor)
        if not re.search(r"^## Layout \(version %s\)$" % re.escape(seg), doc, re.M):
            problems.append("docs/segment-format.md: the layout heading is not 'version %s'" % seg)
        if not re.search(r"\| version_minor \| %s;" % minor, doc):
            problems.append("docs/segment-format.md: the version_minor row does not say %s" % minor)
        if not re.search(r"^\| %s \|" % re.escape(seg), doc, re.M):
            problems.append("docs/segment-format.md: no row for %s in the versions table" % seg)
        # The Go reader's copy (go/segment/format.go, written from the
        # document): the same major, and the same bits for the header
        # flags, entry flags and histogram scheme bits it knows.
        gofmt = read(root, "go/segment/format.go")
        gomajor = one(r"^\s*versionMajor\s*=\s*(\d+)", gofmt, "go/segment/format.go versionMajor", problems)
        if gomajor and gomajor != major:
            problems.append("go/segment/format.go: versionMajor %s, format.h says %s" % (gomajor, major))
        for cname, goname in (("PCPU__SEG_F_CLOSED", "FlagClosed"), ("PCPU__SEG_F_INCOMPLETE", "FlagIncomplete"),
                              ("PCPU__SEG_F_NOSPACE", "FlagNoSpace"), ("PCPU__SEG_F_TREE", "FlagTree"),
                              ("PCPU__SEG_F_TREE_WRLOCK", "FlagTreeWrlock"), ("PCPU__SEG_E_HAS_HELP", "eHasHelp"),
                              ("PCPU__SEG_E_INFO", "eInfo"), ("PCPU__SEG_E_NANOS", "eNanos"),
                              ("PCPU__SEG_HIST_PAIRS", "schemePairs"), ("PCPU__SEG_HIST_WIDE", "schemeWide")):
            cv = one(r"^#define %s ((?:0x)?[0-9a-fA-F]+)u?\b" % cname, fmt, "format.h " + cname, problems)
            gv = one(r"^\s*%s\s*=\s*((?:0x)?[0-9a-fA-F]+)\b" % goname, gofmt, "go/segment/format.go " + goname,
                     problems)
            if cv and gv and int(cv, 0) != int(gv, 0):
                problems.append("go/segment/format.go: %s = %s, format.h's %s is %s" % (goname, gv, cname, cv))

    # The inline layout: the Rust crate's copy.
    layout = one(r"^set\(PCPU_LAYOUT (\d+)\)", cmake, "CMakeLists.txt PCPU_LAYOUT", problems)
    sys_rs = "rust/pcpu-sys/src/lib.rs"
    if os.path.exists(os.path.join(root, sys_rs)):
        rl = one(r"^pub const PCPU_INLINE_LAYOUT: u32 = (\d+);", read(root, sys_rs),
                 sys_rs + " PCPU_INLINE_LAYOUT", problems)
        if layout and rl and rl != layout:
            problems.append("%s: PCPU_INLINE_LAYOUT %s, CMakeLists.txt's PCPU_LAYOUT is %s"
                            % (sys_rs, rl, layout))

    # The push delta state file (tools/push_delta.c) and its test's copies.
    delta = read(root, "tools/push_delta.c")
    dv = one(r"^#define DELTA_FILE_VERSION (\d+)$", delta, "tools/push_delta.c DELTA_FILE_VERSION",
             problems)
    if dv:
        n = int(dv)
        test = read(root, "tests/push/test_push_delta.c")
        copies = [
            ("tools/push_delta.c", "the struct's magic",
             r'char magic\[8\];\s*/\* "PCPUDLT\\(\d+)" \*/', delta, n),
            ("tools/push_delta.c", "the version its comment describes",
             r"^ \* the header\)\. Version (\d+):", delta, n),
            ("tests/push/test_push_delta.c", "the message it expects",
             r"this one reads version (\d+)\)", test, n),
            ("tests/push/test_push_delta.c", "the later magic",
             r'fwrite\("PCPUDLT\\(\d+)"', test, n + 1),
            ("tests/push/test_push_delta.c", "the saved and loaded file's version",
             r"loaded state file \(version (\d+)\)", test, n),
            ("tests/push/test_push_delta.c", "the number of earlier versions its loop tries",
             r"for \(v = 0; v < (\d+); v\+\+\)", test, n - 1),
        ]
        for path, what, pattern, text, want in copies:
            got = one(pattern, text, "%s: %s" % (path, what), problems)
            if got and int(got) != want:
                problems.append("%s: %s is %s, want %d (DELTA_FILE_VERSION is %d)"
                                % (path, what, got, want, n))
        m = re.search(r"magic\[\] = \{([^}]*)\}", test)
        earlier = [int(v) for v in re.findall(r'"PCPUDLT\\(\d+)"', m.group(1))] if m else None
        if earlier != list(range(1, n)):
            problems.append("tests/push/test_push_delta.c: the earlier magics are %s, want 1 .. %d "
                            "(DELTA_FILE_VERSION is %d)" % (earlier, n - 1, n))

    # No other file states a version of its own.
    for sub in ("include", "src", "tools", "compat", "python/src"):
        for dirpath, _, files in os.walk(os.path.join(root, sub)):
            for f in files:
                if not f.endswith((".h", ".c", ".cc", ".hpp", ".py", ".in")):
                    continue
                path = os.path.join(dirpath, f)
                text = open(path, encoding="utf-8").read()
                for m in re.finditer(r'#define\s+\w*VERSION\w*\s+"\d[^"]*"|since libpcpu \d', text):
                    problems.append("%s: a version of its own: %s" % (os.path.relpath(path, root), m.group(0)))

    if pcpustat and version:
        out = subprocess.run([pcpustat, "--version"], capture_output=True, text=True).stdout
        if not out.startswith("pcpustat %s " % version) or "(libpcpu %s)" % version not in out:
            problems.append("pcpustat --version printed %r, the project is %s" % (out.strip(), version))
    return problems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    problems = check(root, sys.argv[2] if len(sys.argv) > 2 else None)
    for p in problems:
        print("FAIL:", p)
    print("check_versions: %d problem(s)" % len(problems))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
