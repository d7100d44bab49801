#!/usr/bin/env python3
"""Documentation code that cannot rot: every C code block of README.md and
of the manual pages' EXAMPLES sections is compiled, and run.

usage: check_snippets.py SOURCE_DIR BUILD_DIR CC CXX [FILE...]
       (default FILEs: README.md and man/man3/*.3 of SOURCE_DIR)

The convention (also in tests/docs/README.md):
  README.md   a fenced block whose info string starts with `c` (```c) is a
              C code block. Further words of the info string, which GitHub
              does not show, adjust the check:
                fragment  statements, not a translation unit: the test wraps
                          them in a function after #include <pcpu/pcpu.h>;
                c-only    not compiled as C++;
                no-run    a main() is compiled and linked but not run.
  man pages   every .EX/.EE block of the EXAMPLES section; the same words
              may be given in a comment line `.\\" doc-test: WORD...` just
              before the block.
README.md's shell blocks whose info string has the word `after-demo`
(```sh after-demo) are the commands a newcomer types after
./scripts/demo.sh: they are run, as written and in order, in one bash, in a
scratch folder set up as the demonstration leaves a clone -- the build tree
installed into build/prefix, where scripts/demo.sh installs it -- with the
first C block of "A first program" saved as app.c. They must build and run
that program (it prints "400000 requests") and `man pcpu` must show pcpu(3).
Every block is compiled as C (gnu11) and, unless c-only, as C++ (c++11),
both with -Wall -Wextra -Werror against the headers of SOURCE_DIR/include.
A block that defines main() is linked with the libraries of BUILD_DIR -- a
block that calls no statistics function with libpcpu alone (-lpcpu, as a
program that only counts links), any other with -lpcpu-stats -lpcpu -- under
AddressSanitizer and UndefinedBehaviorSanitizer, and run: it must exit 0,
leak nothing (LeakSanitizer) and leave no statistics segment behind
(PCPU_SEGMENT_DIR is an empty directory that must stay empty).
"""
import glob
import atexit
import os
import re
import subprocess
import sys
import tempfile

src, build, cc, cxx = sys.argv[1:5]
files = sys.argv[5:] or [os.path.join(src, "README.md")] + sorted(
    glob.glob(os.path.join(src, "man", "man3", "*.3")))
include = os.path.join(src, "include")
work = tempfile.mkdtemp(prefix="pcpu-snippets.")
atexit.register(subprocess.run, ["rm", "-rf", work])
failures = []
KNOWN = {"fragment", "c-only", "no-run"}


# Names of libpcpu-stats' API (registry, metrics, exposition, segment,
# counter(9)'s sysctl binding): a block that uses one links libpcpu-stats.
STATS_NAMES = (r"\bpcpu_(registry|family|gauge|histogram|group|segment|reader|snapshot|stats|format|"
               r"counter9_sysctl|counter9_bind)|\bSYSCTL_COUNTER|\bPCPU_SYSCTL")


def blocks_markdown(path):
    lines = open(path).read().split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^(```+|~~~+)\s*(\S*)\s*(.*)$", lines[i])
        if not m:
            i += 1
            continue
        fence, lang, words = m.group(1), m.group(2), m.group(3).split()
        start = i + 1
        i += 1
        while i < len(lines) and not lines[i].startswith(fence):
            i += 1
        if lang == "c":
            yield start + 1, "\n".join(lines[start:i]) + "\n", words
        i += 1


ROFF = [("\\e", "\\"), ("\\-", "-"), ("\\(aq", "'"), ("\\(dq", '"'), ("\\&", ""),
        ("\\(ti", "~"), ("\\(ha", "^"), ("\\(rs", "\\")]


def unroff(line):
    out, i = [], 0
    while i < len(line):
        for k, v in ROFF:
            if line.startswith(k, i):
                out.append(v)
                i += len(k)
                break
        else:
            out.append(line[i])
            i += 1
    return "".join(out)


def blocks_man(path):
    lines = open(path).read().split("\n")
    in_examples = False
    words = []
    i = 0
    while i < len(lines):
        l = lines[i]
        if l.startswith(".SH"):
            in_examples = l.split(None, 1)[1:] == ["EXAMPLES"]
        m = re.match(r'^\.\\" doc-test:(.*)$', l)
        if m:
            words = m.group(1).split()
        if l.startswith(".EX") and in_examples:
            start = i + 1
            while i < len(lines) and not lines[i].startswith(".EE"):
                i += 1
            yield start + 1, "\n".join(unroff(x) for x in lines[start:i]) + "\n", words
            words = []
        i += 1


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def blocks_after_demo(path):
    """The ```sh after-demo blocks of a markdown file, and the first C block
    under its "## A first program" heading."""
    lines = open(path).read().split("\n")
    shell, first, section, i = [], None, None, 0
    while i < len(lines):
        if lines[i].startswith("## "):
            section = lines[i][3:].strip()
        m = re.match(r"^(```+)\s*(\S*)\s*(.*)$", lines[i])
        if not m:
            i += 1
            continue
        fence, lang, words = m.group(1), m.group(2), m.group(3).split()
        start = i + 1
        i += 1
        while i < len(lines) and not lines[i].startswith(fence):
            i += 1
        body = "\n".join(lines[start:i]) + "\n"
        if lang == "sh" and "after-demo" in words:
            shell.append((start, body))
        elif lang == "c" and section == "A first program" and first is None:
            first = body
        i += 1
    return shell, first


def check_after_demo(readme):
    """Runs the README's after-demo commands where scripts/demo.sh leaves a
    clone: the build tree installed into build/prefix."""
    shell, app = blocks_after_demo(readme)
    if not any("pkg-config" in body for _, body in shell) or \
            not any(re.search(r"^man pcpu$", body, re.M) for _, body in shell):
        failures.append("README.md: the commands that build the first program and run "
                        "`man pcpu` are not in ```sh after-demo blocks: untested")
        return
    if app is None:
        failures.append("README.md: no C block under '## A first program' for app.c")
        return
    demo = open(os.path.join(src, "scripts", "demo.sh")).read()
    if not re.search(r'^prefix=\$PWD/build/prefix$', demo, re.M) or \
            'cmake --install build --prefix "$prefix"' not in demo:
        failures.append("scripts/demo.sh no longer installs into build/prefix: "
                        "the README's after-demo commands assume it does")
        return
    root = os.path.join(work, "after-demo")
    os.makedirs(root)
    r = run(["cmake", "--install", build, "--prefix", os.path.join(root, "build", "prefix")])
    if r.returncode:
        failures.append(f"after-demo: cmake --install {build} failed:\n{r.stdout}{r.stderr}")
        return
    open(os.path.join(root, "app.c"), "w").write(app)
    script = "set -euo pipefail\n" + "".join(body for _, body in shell)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PKG_CONFIG_PATH", "MANPATH", "CMAKE_PREFIX_PATH", "LD_LIBRARY_PATH",
                        "PKG_CONFIG_LIBDIR", "LD_PRELOAD")}
    env.update(MANPAGER="cat", PAGER="cat", MANWIDTH="80", CC=cc)
    try:  # the bound only catches a hang
        r = run(["bash", "-c", script], cwd=root, env=env, timeout=300)
    except subprocess.TimeoutExpired:
        failures.append("README.md: the after-demo commands did not finish in 300 s")
        return
    where = "README.md:" + ",".join(str(line) for line, _ in shell)
    if r.returncode:
        failures.append(f"{where}: the after-demo commands failed ({r.returncode}):\n"
                        f"{script}\n{r.stdout}{r.stderr}")
    elif "400000 requests" not in r.stdout:
        failures.append(f"{where}: the first program did not print '400000 requests':\n{r.stdout}")
    elif not re.search(r"^PCPU\(3\)", r.stdout, re.M) or "NAME" not in r.stdout:
        failures.append(f"{where}: `man pcpu` did not show pcpu(3):\n{r.stdout[-2000:]}{r.stderr}")


n = 0
if not sys.argv[5:]:
    check_after_demo(os.path.join(src, "README.md"))
for path in files:
    gen = blocks_markdown(path) if path.endswith(".md") else blocks_man(path)
    rel = os.path.relpath(path, src)
    for line, code, words in gen:
        n += 1
        where = f"{rel}:{line}"
        bad = set(words) - KNOWN
        if bad:
            failures.append(f"{where}: unknown doc-test word(s) {sorted(bad)}")
            continue
        if "fragment" in words:
            code = ("#include <pcpu/pcpu.h>\n#include <stdio.h>\n#include <stdlib.h>\n"
                    "void doc_fragment(void);\nvoid doc_fragment(void)\n{\n" + code + "}\n")
        base = os.path.join(work, f"b{n}")
        open(base + ".c", "w").write(code)
        has_main = re.search(r"\bint\s+main\s*\(", code) is not None
        uses_stats = re.search(STATS_NAMES, code) is not None
        libs = ["-lpcpu-stats", "-lpcpu"] if uses_stats else ["-lpcpu"]
        flags = ["-Wall", "-Wextra", "-Werror", "-I", include, "-I", os.path.join(build, "include")]
        # As C: linked and run under the sanitizers when it has a main().
        if has_main:
            cmd = [cc, "-std=gnu11", *flags, "-g", "-fsanitize=address,undefined",
                   "-fno-omit-frame-pointer", "-fno-sanitize-recover=all", base + ".c",
                   "-o", base, "-L", build, *libs, "-pthread", f"-Wl,-rpath,{build}"]
        else:
            cmd = [cc, "-std=gnu11", *flags, "-c", base + ".c", "-o", base + ".o"]
        r = run(cmd)
        if r.returncode:
            failures.append(f"{where}: does not compile as C:\n{r.stderr}")
            continue
        if "c-only" not in words:
            r = run([cxx, "-std=c++11", *flags, "-x", "c++", "-fsyntax-only", base + ".c"])
            if r.returncode:
                failures.append(f"{where}: does not compile as C++ (mark it c-only if it is not meant to):\n{r.stderr}")
                continue
        if has_main and "no-run" not in words:
            segdir = base + ".segments"
            os.mkdir(segdir)
            env = dict(os.environ, PCPU_SEGMENT_DIR=segdir,
                       ASAN_OPTIONS="detect_leaks=1:abort_on_error=0",
                       LSAN_OPTIONS="use_stacks=0:use_registers=0")
            env.pop("LD_PRELOAD", None)
            try:  # the bound only catches a hang, however loaded the machine
                r = run([base], env=env, timeout=300)
            except subprocess.TimeoutExpired:
                failures.append(f"{where}: did not finish in 300 s")
                continue
            if r.returncode:
                failures.append(f"{where}: exited {r.returncode}:\n{r.stdout}{r.stderr}")
                continue
            if os.listdir(segdir):
                failures.append(f"{where}: left {os.listdir(segdir)} in the segment directory")
                continue

for f in failures:
    print("FAIL:", f)
if n < 2:
    failures.append(f"only {n} code blocks found: extraction broken?")
    print("FAIL:", failures[-1])
if failures:
    sys.exit(1)
print(f"check_snippets: ok ({n} blocks, and the README's commands after the demonstration)")
