#!/usr/bin/env python3
"""The ABI checks of the C libraries (docs/stability.md, "What checks it").

  abi_check.py baseline SRC BUILD
      ctest abi_baseline: libabigail's abidiff compares the committed ABI
      of this release line (SRC/abi/<soname>.abi, written by
      scripts/dev/abi-baseline.sh) with BUILD's libpcpu and libpcpu-stats.
      Added symbols pass; any other change fails (a removed or changed
      function or variable, a changed public type), except what
      SRC/abi/pcpu.abignore allows, each entry with its reason.
  abi_check.py write-previous SRC BUILD CC
      what scripts/dev/abi-baseline.sh --previous runs: builds the previous
      release's libpcpu (SRC/abi/previous-release names its version and
      commit) from git history into BUILD/abi/previous/ and writes its ABI,
      SRC/abi/<version>/<soname>.abi, committed with it.
  abi_check.py previous SRC BUILD [--pretend-same-soname]
      ctest abi_previous_release: that ABI against BUILD's libraries (no
      git history needed, nothing of the old release built). It reports
      every function the previous release exported that is gone, moved to
      another version node or changed type, and accepts them only where the
      library's SONAME changed. --pretend-same-soname checks that rule
      (ctest abi_previous_release_rule): it must then fail.
  abi_check.py write-baseline SRC BUILD
      what scripts/dev/abi-baseline.sh runs.

The libraries need debug information (a RelWithDebInfo or Debug build):
abidiff reads the types from it. The XML is written without paths or source
locations, so that it does not depend on where the tree or the build is.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

# The C libraries: libpcpu-exporter only where it is built (libmicrohttpd);
# the build's CMake passes --libs=... with those it has.
LIBS = ["libpcpu", "libpcpu-stats", "libpcpu-exporter"]
ABIDIFF_ERROR, ABIDIFF_USAGE, ABIDIFF_CHANGE, ABIDIFF_INCOMPATIBLE = 1, 2, 4, 8


def die(msg):
    print("abi_check: " + msg, file=sys.stderr)
    sys.exit(1)


def run(cmd, **kw):
    # No debuginfod look-ups: the libraries carry their own debug info, and a
    # test never waits on the network.
    env = dict(os.environ, DEBUGINFOD_URLS="")
    return subprocess.run(cmd, env=env, text=True, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, **kw)


def need_tool(name):
    if not shutil.which(name):
        die(f"{name} not found: it is Debian's abigail-tools (scripts/install-deps.sh)")


def soname(lib):
    out = run(["readelf", "-d", "-W", lib]).stdout
    m = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", out)
    if not m:
        die(f"{lib} has no SONAME")
    return m.group(1)


def has_debug_info(lib):
    return ".debug_info" in run(["readelf", "-S", "-W", lib]).stdout


def exports(lib):
    """{name: version node} of the functions and variables lib defines."""
    out = run(["readelf", "--dyn-syms", "-W", lib]).stdout
    syms = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) < 8 or f[3] not in ("FUNC", "OBJECT", "IFUNC", "TLS") or f[6] in ("UND", "ABS"):
            continue
        if f[4] not in ("GLOBAL", "WEAK"):
            continue
        name, _, node = f[7].partition("@")
        default = node.startswith("@")
        node = node.lstrip("@")
        if default or name not in syms:
            syms[name] = node
    return syms


def xml_soname(path):
    m = re.search(r"<abi-corpus [^>]*soname='([^']+)'", open(path).read())
    if not m:
        die(f"{path}: no soname in the ABI corpus")
    return m.group(1)


def xml_exports(path):
    """{name: version node} of the functions and variables an abidw corpus
    lists as defined (what exports() reads from the library itself)."""
    syms = {}
    for m in re.finditer(r"<elf-symbol ([^>]*)/>", open(path).read()):
        a = dict(re.findall(r"([\w-]+)='([^']*)'", m.group(1)))
        if a.get("is-defined") == "yes":
            syms[a["name"]] = a.get("version", "")
    return syms


def build_lib(build, name):
    path = os.path.join(build, name + ".so")
    if not os.path.exists(path):
        die(f"{path} not found: build the libraries first")
    lib = os.path.realpath(path)
    if not has_debug_info(lib):
        die(f"{lib} has no debug information: abidiff needs it (configure with "
            "-DCMAKE_BUILD_TYPE=RelWithDebInfo or Debug)")
    return lib


def suppressions(src):
    return ["--suppressions", os.path.join(src, "abi", "pcpu.abignore")]


# ---- the baseline of this release line -------------------------------------------
def abidw(src, build, lib, out, headers=None):
    """lib's ABI as XML, public types only, with nothing that depends on the
    checkout's or the build's path (ids are hashes of the types).
    --exported-interfaces-only: without it, libabigail 2.2 leaves a function
    without its type where another translation unit declares it before the
    one that defines it (pcpu_zone_alloc), and so never compares its type."""
    r = run(["abidw", "--exported-interfaces-only", "--headers-dir",
             headers or os.path.join(src, "include"), "--drop-private-types",
             "--no-show-locs", "--no-comp-dir-path", "--no-corpus-path", "--no-elf-needed",
             "--type-id-style", "hash", lib])
    if r.returncode != 0:
        die(f"abidw {lib} failed:\n{r.stdout}")
    text = r.stdout
    # The translation units' names: relative to the tree (or the build).
    for root, repl in ((os.path.realpath(build), "BUILD"), (os.path.realpath(src), ".")):
        text = text.replace(f"path='{root}/", f"path='{repl}/")
    if re.search(r"path='/", text):
        die(f"abidw {lib}: an absolute path is left in the XML")
    with open(out, "w") as f:
        f.write(text)


def write_baseline(src, build):
    need_tool("abidw")
    d = os.path.join(src, "abi")
    for old in os.listdir(d):
        if old.endswith(".abi"):
            os.unlink(os.path.join(d, old))
    for name in LIBS:
        lib = build_lib(build, name)
        out = os.path.join(d, soname(lib) + ".abi")
        abidw(src, build, lib, out)
        print(f"abi-baseline: {out} ({len(exports(lib))} symbols)")
        untyped = sorted(set(baseline_symbols(out)) - set(re.findall(
            r"elf-symbol-id='([^'@]+)@", open(out).read())))
        if untyped:
            print(f"abi-baseline: abidw found no type for {' '.join(untyped)}: "
                  "compared by name and node only")


def baseline_symbols(path):
    """{name: version node} of the symbols an abidw XML file lists."""
    return dict(re.findall(r"<elf-symbol name='([^']+)'(?: size='\d+')? version='([^']*)'",
                           open(path).read()))


def check_baseline(src, build):
    need_tool("abidiff")
    d = os.path.join(src, "abi")
    failed = False
    for name in LIBS:
        lib = build_lib(build, name)
        so = soname(lib)
        base = os.path.join(d, so + ".abi")
        if not os.path.exists(base):
            others = [f for f in os.listdir(d) if f.startswith(name + ".so.") and f.endswith(".abi")]
            die(f"no baseline {base} for {so}" +
                (f" (there is {', '.join(others)}: the SONAME changed)" if others else "") +
                ": a new SONAME starts a new baseline, written deliberately by "
                "scripts/dev/abi-baseline.sh, with a CHANGELOG entry under Breaking")
        # The build's ABI written as the baseline was, then the two XML
        # files compared: abidiff of XML against the ELF file misses changes
        # of public types (libabigail 2.2: a member's type in a struct
        # reached through pointers).
        with tempfile.TemporaryDirectory() as tmp:
            cur = os.path.join(tmp, so + ".abi")
            abidw(src, build, lib, cur)
            r = run(["abidiff", "--no-added-syms", *suppressions(src), base, cur])
        if r.returncode & (ABIDIFF_ERROR | ABIDIFF_USAGE):
            die(f"abidiff {base} {lib} failed ({r.returncode}):\n{r.stdout}")
        if r.returncode:
            failed = True
            print(f"FAIL {so}: its ABI differs from abi/{so}.abi by more than additions:\n")
            print(r.stdout)
        else:
            now = exports(lib)
            added = sorted(f"{n}@{v}" for n, v in now.items() if n not in baseline_symbols(base))
            print(f"ok   {so}: the ABI of abi/{so}.abi, nothing removed or changed "
                  f"({len(now)} symbols" + (f"; added: {' '.join(added)})" if added else ")"))
    if failed:
        print("A release of this line only adds (docs/stability.md). If the change is "
              "deliberate -- a new SONAME, a new PCPU_LAYOUT -- announce it in CHANGELOG.md "
              "under Breaking and rewrite the baseline: scripts/dev/abi-baseline.sh")
        sys.exit(1)


# ---- the previous release ------------------------------------------------------
def previous_release(src):
    with open(os.path.join(src, "abi", "previous-release")) as f:
        for line in f:
            line = line.split("#")[0].split()
            if line:
                return line[0], line[1]
    die("abi/previous-release names no release")


def previous_dir(src, build):
    version, commit = previous_release(src)
    return os.path.join(os.path.realpath(build), "abi", "previous", version), version, commit


def previous_abi(src, version):
    """The committed ABI of the previous release's libpcpu."""
    d = os.path.join(src, "abi", version)
    files = sorted(f for f in os.listdir(d) if f.endswith(".abi")) if os.path.isdir(d) else []
    if len(files) != 1:
        die(f"abi/{version}/ holds no single <soname>.abi: scripts/dev/abi-baseline.sh "
            "--previous writes it from the release's commit")
    return os.path.join(d, files[0])


def write_previous(src, build, cc):
    out, version, commit = previous_dir(src, build)
    build_previous(src, build, cc)
    lib = os.path.realpath(os.path.join(out, "build", "libpcpu.so"))
    d = os.path.join(src, "abi", version)
    os.makedirs(d, exist_ok=True)
    for old in os.listdir(d):
        if old.endswith(".abi"):
            os.unlink(os.path.join(d, old))
    dest = os.path.join(d, soname(lib) + ".abi")
    abidw(os.path.join(out, "src"), os.path.join(out, "build"), lib, dest,
          os.path.join(out, "src", "include"))
    print(f"abi-baseline: {dest} ({len(exports(lib))} symbols; {version}, commit {commit[:12]})")


def build_previous(src, build, cc):
    out, version, commit = previous_dir(src, build)
    stamp = os.path.join(out, "stamp")
    if os.path.exists(stamp) and open(stamp).read().strip() == commit + " -O0":
        print(f"abi_check: {version}'s libpcpu is built already ({out})")
        return
    r = run(["git", "-C", src, "cat-file", "-e", commit + "^{commit}"])
    if r.returncode != 0:
        die(f"commit {commit} (release {version}) is not in the history of {src}: "
            "its ABI is written from that commit; in a shallow clone, run "
            "git fetch --unshallow")
    shutil.rmtree(out, ignore_errors=True)
    tree = os.path.join(out, "src")
    os.makedirs(tree)
    # Only what the library's build reads: no tests, tools, docs.
    archive = subprocess.run(["git", "-C", src, "archive", commit, "CMakeLists.txt", "cmake",
                              "include", "src"], stdout=subprocess.PIPE, check=True).stdout
    subprocess.run(["tar", "-x", "-C", tree], input=archive, check=True)
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    cfg = ["cmake", "-S", tree, "-B", os.path.join(out, "build"), *gen,
           # The release's configuration, compiled without optimisation
           # (half the time): the types and exported symbols are the same.
           "-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O0 -g",
           f"-DCMAKE_C_COMPILER={cc}",
           "-DPCPU_BUILD_TESTS=OFF", "-DPCPU_BUILD_BENCH=OFF", "-DPCPU_BUILD_EXAMPLES=OFF",
           "-DPCPU_BUILD_TOOLS=OFF", "-DPCPU_BUILD_PROMETHEUS_CPP=OFF"]
    for cmd in (cfg, ["cmake", "--build", os.path.join(out, "build"), "--target", "pcpu"]):
        r = run(cmd)
        if r.returncode != 0:
            die(f"building {version}'s libpcpu failed: {' '.join(cmd)}\n{r.stdout[-4000:]}")
    with open(stamp, "w") as f:
        f.write(commit + " -O0\n")
    print(f"abi_check: built {version}'s libpcpu (commit {commit[:12]}) in {out}")


def check_previous(src, build, pretend_same_soname):
    need_tool("abidiff")
    version, _ = previous_release(src)
    old = previous_abi(src, version)
    old_so, old_syms = xml_soname(old), xml_exports(old)
    new = {}
    for name in LIBS:
        lib = build_lib(build, name)
        so = soname(lib)
        if pretend_same_soname and name == "libpcpu":
            so = old_so
        new[name] = (lib, so, exports(lib))
    print(f"{version} ({old_so}, {len(old_syms)} symbols) against this build: " +
          ", ".join(f"{so} ({len(s)} symbols)" for _, so, s in new.values()))

    private = re.compile(r"^PCPU_PRIVATE_")
    # A program built against the old libpcpu records its SONAME and finds
    # its functions there: whatever is no longer in the new libpcpu (gone, or
    # moved to another library) breaks it, as does another version node or
    # another type. All of it counts against libpcpu's SONAME.
    breaks = []
    lib_syms = new["libpcpu"][2]
    moved = {}
    for n in sorted(old_syms):
        if private.match(old_syms[n]) or n in lib_syms:
            continue
        home = [so for _, so, s in new.values() if n in s]
        if home:
            moved.setdefault(home[0], []).append(n)
        else:
            breaks.append(f"removed: {n}@{old_syms[n]}")
    for so, names in moved.items():
        breaks.append(f"moved to {so} ({len(names)}), which a program of {version} does not "
                      f"load: " + " ".join(names))
    for name, (lib, so, syms) in new.items():
        common = [n for n in old_syms if n in syms and not private.match(old_syms[n])]
        # Another version node: a program linked against the old one fails
        # to start (a PCPU_LAYOUT_n change does this on purpose).
        for n in sorted(common):
            if syms[n] != old_syms[n]:
                breaks.append(f"version node: {n}@{old_syms[n]} is {n}@{syms[n]} in {so}")
        # Types: abidiff on the functions both export (the rest dropped).
        drop = sorted(n for n in old_syms if n not in syms)
        # Both written by abidw, as the baseline is (see check_baseline).
        args = ["abidiff", "--no-added-syms", "--ignore-soname", *suppressions(src)]
        with tempfile.TemporaryDirectory() as tmp:
            old_xml, new_xml = old, os.path.join(tmp, "new.abi")
            abidw(src, build, lib, new_xml)
            if drop:  # (abidiff's --drop leaves ELF symbols in: a suppression drops them)
                rx = "^(" + "|".join(map(re.escape, drop)) + ")$"
                sup = os.path.join(tmp, "moved.abignore")
                with open(sup, "w") as f:
                    for kind in ("function", "variable"):
                        f.write(f"[suppress_{kind}]\n  symbol_name_regexp = {rx}\n  drop = yes\n")
                args += ["--suppressions", sup]
            r = run(args + [old_xml, new_xml])
        if r.returncode & (ABIDIFF_ERROR | ABIDIFF_USAGE):
            die(f"abidiff {old} {lib} failed ({r.returncode}):\n{r.stdout}")
        if r.returncode:
            breaks.append(f"types of the functions {version}'s {old_so} and {so} both export "
                          f"(abidiff):\n" + "\n".join("    " + l for l in r.stdout.rstrip().splitlines()))

    new_so = new["libpcpu"][1]
    if not breaks:
        print(f"ok: every function {version} exported is in {new_so}, in the same node, "
              "with the same types")
        return
    same = new_so == old_so
    print(("\nFAIL: ABI break without a new SONAME" if same else
           f"\naccepted because the SONAME changed ({old_so} -> {new_so})") +
          f": {len(breaks)} changes of {version}'s ABI:")
    for w in breaks:
        print("  " + w)
    if same:
        print(f"\nA symbol is removed, or changes meaning, only with a new SONAME "
              "(docs/stability.md).")
        sys.exit(1)


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    for a in [a for a in argv if a.startswith("--libs=")]:
        LIBS[:] = a[len("--libs="):].split(",")
        argv.remove(a)
    cmd, src, build = argv[0], os.path.realpath(argv[1]), argv[2]
    if cmd == "baseline":
        check_baseline(src, build)
    elif cmd == "write-baseline":
        write_baseline(src, build)
    elif cmd == "write-previous" and len(argv) == 4:
        write_previous(src, build, argv[3])
    elif cmd == "previous":
        check_previous(src, build, "--pretend-same-soname" in argv[3:])
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv[1:])
