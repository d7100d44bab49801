#!/usr/bin/env python3
"""One source for each version number, and everything else in step with it.

pcpu has three numbers, each with one source:
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
    same header flag, entry flag and scheme bits.
No other file may state a version of its own (a `#define X_VERSION "..."`,
"since libpcpu N.M").

Usage: check_versions.py SOURCE_DIR [PCPUSTAT]  (with PCPUSTAT, also
checks that `pcpustat --version` prints the project's version.) Prints
every mismatch; exit status 1 if any.
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


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
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

    if len(sys.argv) > 2 and version:
        out = subprocess.run([sys.argv[2], "--version"], capture_output=True, text=True).stdout
        if not out.startswith("pcpustat %s " % version) or "(libpcpu %s)" % version not in out:
            problems.append("pcpustat --version printed %r, the project is %s" % (out.strip(), version))

    for p in problems:
        print("FAIL:", p)
    print("check_versions: %d problem(s)" % len(problems))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
