#!/usr/bin/env python3
"""Documentation code that cannot rot: every C code block of README.md,
docs/counters.md and the manual pages' EXAMPLES sections is compiled, and
run; the README's C and C++ blocks are built by the lines beside them.

usage: check_snippets.py SOURCE_DIR BUILD_DIR CC CXX [FILE...]
       (default FILEs: README.md, docs/counters.md and man/man3/*.3 of
       SOURCE_DIR; the build lines are checked only without FILEs)

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
Build lines (issue 62): in README.md and docs/counters.md, every C and C++
block (```c, ```cpp) is followed by the ```sh after-demo block that builds
it, a line `cc FILE.c $(pkg-config --cflags --libs MODULE) ...` that names
its pkg-config module. The after-demo blocks -- the commands a newcomer
types after ./scripts/demo.sh: the export line, then the build lines --
are run as written, in order, in one bash, in a scratch folder set up as
the demonstration leaves a clone: the build tree installed into
build/prefix, where scripts/demo.sh installs it, and each block saved
under the name its line compiles. So a wrong module fails with the
linker's undefined references. A block without main() is compiled (-c)
by its line, then linked into a program with its modules' --libs. The
first program (the first C block of "A first program", app.c) must print
"400000 requests" and `man pcpu` must show pcpu(3). Every pkg-config
module the README names must be one the project makes (cmake/*.pc.in).
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
import shlex
import subprocess
import sys
import tempfile

src, build, cc, cxx = sys.argv[1:5]
# The files whose C and C++ blocks are built by the line written beside
# them: the README, and the page its owned-slot example moved to.
BUILD_LINE_DOCS = ["README.md", os.path.join("docs", "counters.md")]
files = sys.argv[5:] or [os.path.join(src, d) for d in BUILD_LINE_DOCS] + sorted(
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


def fenced_blocks(path):
    """Every fenced block of a markdown file, in order: (first line of its
    body, language, further words of its info string, body, section)."""
    lines = open(path).read().split("\n")
    section, i = None, 0
    while i < len(lines):
        if lines[i].startswith("## "):
            section = lines[i][3:].strip()
        m = re.match(r"^(```+|~~~+)\s*(\S*)\s*(.*)$", lines[i])
        if not m:
            i += 1
            continue
        fence, lang, words = m.group(1), m.group(2), m.group(3).split()
        start = i + 1
        i += 1
        while i < len(lines) and not lines[i].startswith(fence):
            i += 1
        yield start + 1, lang, words, "\n".join(lines[start:i]) + "\n", section
        i += 1


CODE_LANGS = {"c", "cpp", "c++"}
# A line that compiles a file: cc app.c ..., c++ -std=c++17 hello.cpp ...
COMPILE = re.compile(r"^\s*(?:cc|gcc|clang|c\+\+|g\+\+|clang\+\+)\s[^\n]*?(?<!\S)([\w.-]+\.(?:c|cc|cpp))(?!\S)", re.M)
PKG_CONFIG = re.compile(r"pkg-config((?:\s+--[\w-]+)+)((?:\s+[\w.+-]+)+)")


def pc_modules(text):
    """The modules that the pkg-config calls of text name."""
    return list(dict.fromkeys(mod for m in PKG_CONFIG.finditer(text) for mod in m.group(2).split()))


def build_lines(path):
    """Pairs every C and C++ block of a markdown file with the ```sh
    after-demo block right after it, which builds it: (line, file name the
    build line compiles, code, modules). Appends a failure for a block
    without one."""
    rel = os.path.relpath(path, src)
    blocks = list(fenced_blocks(path))
    out = []
    for k, (line, lang, words, body, _) in enumerate(blocks):
        if lang not in CODE_LANGS:
            continue
        nxt = blocks[k + 1] if k + 1 < len(blocks) else None
        m = COMPILE.search(nxt[3]) if nxt and nxt[1] == "sh" and "after-demo" in nxt[2] else None
        if "fragment" in words or not m or not pc_modules(nxt[3][m.start():].split("\n", 1)[0]):
            failures.append(f"{rel}:{line}: a {lang} block must be a file a reader can build, followed by "
                            f"the ```sh after-demo block that builds it: a line `cc FILE.c "
                            f"$(pkg-config --cflags --libs MODULE) ...` (c++ FILE.cpp for C++)")
            continue
        out.append((line, m.group(1), body, pc_modules(nxt[3][m.start():].split("\n", 1)[0])))
    return out


def check_after_demo():
    """Runs the after-demo commands of BUILD_LINE_DOCS where scripts/demo.sh
    leaves a clone: the build tree installed into build/prefix, every C and
    C++ block saved under the name its build line compiles."""
    readme = os.path.join(src, "README.md")
    shell = [(f"README.md:{line}", body) for line, lang, words, body, _ in fenced_blocks(readme)
             if lang == "sh" and "after-demo" in words]
    if not any("pkg-config" in body for _, body in shell) or \
            not any(re.search(r"^man pcpu$", body, re.M) for _, body in shell):
        failures.append("README.md: the commands that build the first program and run "
                        "`man pcpu` are not in ```sh after-demo blocks: untested")
        return
    first = next((body for _, lang, _, body, section in fenced_blocks(readme)
                  if lang == "c" and section == "A first program"), None)
    built = {}  # file name -> (where, code, modules)
    for doc in BUILD_LINE_DOCS:
        for line, name, code, modules in build_lines(os.path.join(src, doc)):
            if name in built:
                failures.append(f"{doc}:{line}: {name} is built by another block's line too ({built[name][0]})")
            built[name] = (f"{doc}:{line}", code, modules)
    if first is None or built.get("app.c", (None, None))[1] != first:
        failures.append("README.md: the first C block under '## A first program' is not the app.c "
                        "its after-demo commands build")
        return
    demo = open(os.path.join(src, "scripts", "demo.sh")).read()
    if not re.search(r'^prefix=\$PWD/build/prefix$', demo, re.M) or \
            'cmake --install build --prefix "$prefix"' not in demo:
        failures.append("scripts/demo.sh no longer installs into build/prefix: "
                        "the README's after-demo commands assume it does")
        return
    root = os.path.join(work, "after-demo")
    os.makedirs(os.path.join(root, "segments"))
    r = run(["cmake", "--install", build, "--prefix", os.path.join(root, "build", "prefix")])
    if r.returncode:
        failures.append(f"after-demo: cmake --install {build} failed:\n{r.stdout}{r.stderr}")
        return
    for name, (_, code, _) in built.items():
        open(os.path.join(root, name), "w").write(code)
    # Every doc's after-demo blocks, the README's first (its export line).
    for doc in BUILD_LINE_DOCS[1:]:
        shell += [(f"{doc}:{line}", body) for line, lang, words, body, _ in
                  fenced_blocks(os.path.join(src, doc)) if lang == "sh" and "after-demo" in words]
    # Each command line as written; one that fails stops the script (set -e
    # alone would not stop at `cc x.c ... && ./x`: a failure inside an &&
    # list is not fatal).
    script = "set -uo pipefail\n"
    for where_block, body in shell:
        for cmd in re.sub(r"\\\n", " ", body).split("\n"):
            if cmd.strip() and not cmd.strip().startswith("#"):
                script += (f"{{ {cmd}\n}} || {{ echo 'after-demo: failed ({where_block}): '{shlex.quote(cmd)} >&2; "
                           f"exit 1; }}\n")
    # A block without main() is compiled (-c) by its line; linked into a
    # program with the --libs of the modules its line names, it must
    # resolve every symbol: the module named is the one the code needs.
    open(os.path.join(root, "stub_main.c"), "w").write("int main(void) { return 0; }\n")
    for name, (where, code, modules) in built.items():
        if re.search(r"\bint\s+main\s*\(", code):
            continue
        obj = os.path.splitext(name)[0] + ".o"
        script += (f"test -f {obj} || {{ echo '{where}: its build line left no {obj}'; exit 1; }}\n"
                   f"cc stub_main.c {obj} -o {obj}.linked $(pkg-config --libs {' '.join(modules)}) "
                   f"|| {{ echo '{where}: {obj} does not link with pkg-config --libs "
                   f"{' '.join(modules)}'; exit 1; }}\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PKG_CONFIG_PATH", "MANPATH", "CMAKE_PREFIX_PATH", "LD_LIBRARY_PATH",
                        "PKG_CONFIG_LIBDIR", "LD_PRELOAD")}
    env.update(MANPAGER="cat", PAGER="cat", MANWIDTH="80", CC=cc,
               PCPU_SEGMENT_DIR=os.path.join(root, "segments"))
    try:  # the bound only catches a hang
        r = run(["bash", "-c", script], cwd=root, env=env, timeout=300)
    except subprocess.TimeoutExpired:
        failures.append("README.md: the after-demo commands did not finish in 300 s")
        return
    where = "after-demo commands (" + ", ".join(w for w, _ in shell) + ")"
    if r.returncode:
        failures.append(f"{where}: the after-demo commands failed ({r.returncode}):\n"
                        f"{r.stderr}\n(the end of their output:)\n{r.stdout[-2000:]}")
    elif "400000 requests" not in r.stdout:
        failures.append(f"{where}: the first program did not print '400000 requests':\n{r.stdout}")
    elif not re.search(r"^PCPU\(3\)", r.stdout, re.M) or "NAME" not in r.stdout:
        failures.append(f"{where}: `man pcpu` did not show pcpu(3):\n{r.stdout[-2000:]}{r.stderr}")
    elif os.listdir(os.path.join(root, "segments")):
        failures.append(f"{where}: left {os.listdir(os.path.join(root, 'segments'))} in the segment directory")


def check_modules():
    """Every pkg-config module the README names is one the project makes
    (cmake/<module>.pc.in): a table's or a line's, with or without a
    snippet beside it."""
    text = open(os.path.join(src, "README.md")).read()
    named = set(pc_modules(text)) | set(re.findall(r"^\|[^|\n]*\| `(pcpu[\w-]*)` \|", text, re.M))
    for mod in sorted(named):
        if not os.path.exists(os.path.join(src, "cmake", mod + ".pc.in")):
            failures.append(f"README.md: pkg-config module {mod!r} is not one the project makes "
                            f"(no cmake/{mod}.pc.in)")


n = 0
if not sys.argv[5:]:
    check_after_demo()
    check_modules()
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
