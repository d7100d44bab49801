#!/usr/bin/env python3
"""The section 3 manual pages stay in step with the library.

usage: check_man.py SOURCE_DIR BUILD_DIR CC

Installs the build tree into a scratch prefix, then checks:
  1. every function libpcpu.so, libpcpu-stats.so and libpcpu-exporter.so
     (where built) export (nm -D
     --defined-only, ' T pcpu_',
     internal pcpu__ names aside) and every public inline function of the
     installed headers has an installed page, man3/<name>.3, that `man`
     finds; a link page (.so) leads to a page whose NAME lists the function;
  2. every name a page's NAME section lists is such a function (a page for a
     function that no longer exists fails), and is declared in its SYNOPSIS;
  3. each SYNOPSIS compiles and links as C against the installed headers and
     library, with -Wall -Werror: a prototype whose types drifted from the
     header is a conflicting declaration, a function that does not exist is
     an undefined reference;
  4. every page renders without a warning, with groff -ww and with
     `man --warnings` (what lintian runs);
  5. each page's LIBRARY section names the library its functions are in
     (issue 39): libpcpu (-lpcpu, pkg-config pcpu, CMake pcpu::pcpu) or
     libpcpu-stats (-lpcpu-stats -lpcpu, pkg-config pcpu-stats, CMake
     pcpu::stats) or libpcpu-exporter (-lpcpu-exporter, pkg-config
     pcpu-exporter, CMake pcpu::exporter; issue 51), and its SYNOPSIS links
     with that library alone.
"""
import atexit
import os
import re
import subprocess
import sys
import tempfile

src, build, cc = sys.argv[1], sys.argv[2], sys.argv[3]
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


work = tempfile.mkdtemp(prefix="pcpu-man.")
atexit.register(subprocess.run, ["rm", "-rf", work])
prefix = os.path.join(work, "prefix")
r = run(["cmake", "--install", build, "--prefix", prefix])
if r.returncode:
    sys.exit("cmake --install failed:\n" + r.stdout + r.stderr)
mandir = os.path.join(prefix, "share", "man")
man3 = os.path.join(mandir, "man3")
incdir = os.path.join(prefix, "include")
libdir = next(os.path.join(prefix, d) for d in os.listdir(prefix) if d.startswith("lib"))


# ---- what must be documented ---------------------------------------------------
def exports(name):
    nm = run(["nm", "-D", "--defined-only", os.path.join(libdir, name)]).stdout
    names = {l.split()[2].split("@")[0] for l in nm.splitlines()
             if len(l.split()) == 3 and l.split()[1] == "T" and l.split()[2].startswith("pcpu_")}
    return {n for n in names if not n.startswith("pcpu__")}


core_exported = exports("libpcpu.so")
stats_exported = exports("libpcpu-stats.so")
exporter_exported = (exports("libpcpu-exporter.so")
                     if os.path.exists(os.path.join(libdir, "libpcpu-exporter.so")) else set())
exported = core_exported | stats_exported | exporter_exported
# The headers of libpcpu-stats: their inline functions need that library.
STATS_HEADERS = {"stats.h", "expose.h", "gauge.h", "histogram.h", "group.h", "reader.h",
                 "segment.h", "segment_dir.h", "counter9_sysctl.h"}
inline = set()
stats_inline = set()
for root, _, files in os.walk(os.path.join(incdir, "pcpu")):
    for f in files:
        text = open(os.path.join(root, f)).read()
        # Inline operations are named directly or through PCPU__INLINE_OP(name)
        # (the stable tier's switch, pcpu/counter.h).
        for m in re.finditer(r"static\s+inline\s+[^;{(]*?\b(?:PCPU__INLINE_OP\(\s*)?(pcpu_[a-z0-9_]+)\s*\)?\s*\(", text):
            if not m.group(1).startswith("pcpu__"):
                inline.add(m.group(1))
                if f in STATS_HEADERS:
                    stats_inline.add(m.group(1))
functions = exported | inline
in_stats = stats_exported | stats_inline
if len(exported) < 50 or len(inline) < 10:
    sys.exit(f"found only {len(exported)} exported and {len(inline)} inline functions: parsing broken?")


def render_ascii(path, cwd=None):
    r = run(["groff", "-man", "-Tascii", "-P-cbou", "-rLL=200n", path], cwd=cwd)
    return r.stdout


def section(text, name):
    m = re.search(r"^%s\n(.*?)(?=^[A-Z][A-Z ]+\n|\Z)" % name, text, re.S | re.M)
    return m.group(1) if m else ""


def name_list(page_text):
    """Names before '\\-' in the NAME section of a page's source."""
    m = re.search(r"^\.SH NAME\n(.*?)\\-", page_text, re.S | re.M)
    if not m:
        return None
    return [n.strip() for n in m.group(1).replace("\n", " ").split(",") if n.strip()]


# ---- 1. every function has a page man finds ------------------------------------
pages = {}  # real pages: file name -> source text
for f in sorted(os.listdir(man3)):
    text = open(os.path.join(man3, f)).read()
    if not text.startswith(".so "):
        pages[f] = text
env = dict(os.environ, MANPATH=mandir, MANWIDTH="80", LC_ALL="C.UTF-8")
for fn in sorted(functions):
    path = os.path.join(man3, fn + ".3")
    if not os.path.exists(path):
        fail(f"{fn}: no manual page ({os.path.relpath(path, prefix)} not installed)")
        continue
    text = open(path).read()
    target = fn + ".3"
    if text.startswith(".so "):
        target = os.path.basename(text.split()[1])
        if target not in pages:
            fail(f"{fn}.3 links to {text.split()[1]}, which is not installed")
            continue
    names = name_list(pages[target]) or []
    if fn not in names:
        fail(f"{fn}: its page {target} does not list it in NAME")
    r = run(["man", "-w", fn], env=env)
    if r.returncode or not r.stdout.strip().startswith(man3):
        fail(f"man -w {fn}: {r.stdout.strip()} {r.stderr.strip()}")

# ---- 2. and 3. NAME, SYNOPSIS ----------------------------------------------------
known_non_functions = {"pcpu"}  # the overview page pcpu(3)
for page, text in sorted(pages.items()):
    names = name_list(text)
    if names is None:
        fail(f"{page}: no NAME section ending in '\\-'")
        continue
    for n in names:
        if n not in functions and n not in known_non_functions:
            fail(f"{page}: NAME lists {n}, which is neither exported by libpcpu.so, libpcpu-stats.so or libpcpu-exporter.so nor an inline function of the headers")
    synopsis = section(render_ascii(os.path.join(man3, page)), "SYNOPSIS")
    code = "\n".join(l[7:] if l.startswith("       ") else l.strip() for l in synopsis.splitlines())
    declared = set(re.findall(r"\b([a-z_][a-z0-9_]*)\s*\(", code)) - {"void"}
    for n in names:
        if n not in known_non_functions and n not in declared:
            fail(f"{page}: {n} is in NAME but not in SYNOPSIS")
    for n in declared:
        if n.startswith("pcpu_") and n not in names:
            fail(f"{page}: SYNOPSIS declares {n}, which NAME does not list")
    if not declared:
        continue
    # 5. The library the page names, and its link line alone.
    library = section(render_ascii(os.path.join(man3, page)), "LIBRARY")
    needs_stats = any(n in in_stats for n in names)
    needs_exporter = any(n in exporter_exported for n in names)
    if needs_exporter:
        wants = ["libpcpu-exporter", "-lpcpu-exporter", "pkg-config --cflags --libs pcpu-exporter",
                 "pcpu::exporter"]
    elif page == "pcpu.3":
        wants = ["-lpcpu", "-lpcpu-stats", "pkg-config --cflags --libs pcpu-stats", "pcpu::stats"]
    elif needs_stats:
        wants = ["libpcpu-stats", "-lpcpu-stats -lpcpu", "pkg-config --cflags --libs pcpu-stats", "pcpu::stats"]
    elif page == "pcpu_counter9_alloc.3":  # <sys/counter.h>: the overlay's names
        wants = ["libpcpu", "-lpcpu", "pkg-config pcpu-counter9", "pcpu::counter9"]
    else:
        wants = ["libpcpu", "-lpcpu", "pkg-config --cflags --libs pcpu", "pcpu::pcpu"]
    flat = " ".join(library.split())
    for w in wants:
        if w not in flat:
            fail(f"{page}: LIBRARY does not say {w!r} ({flat!r})")
    if not needs_stats and not needs_exporter and page != "pcpu.3" and "stats" in flat:
        fail(f"{page}: LIBRARY names libpcpu-stats, but its functions are libpcpu's ({flat!r})")
    link = (["-lpcpu-exporter", "-lpcpu-stats", "-lpcpu"] if needs_exporter else
            ["-lpcpu-stats", "-lpcpu"] if needs_stats else ["-lpcpu"])
    refs = "\n".join(f"    p = (void *)&{n};" for n in sorted(declared))
    prog = f"{code}\n\nint main(void)\n{{\n    void *volatile p;\n{refs}\n    (void)p;\n    return 0;\n}}\n"
    c = os.path.join(work, page + ".synopsis.c")
    open(c, "w").write(prog)
    r = run([cc, "-std=gnu11", "-Wall", "-Werror", "-I", incdir, c, "-o", c + ".out",
             "-L", libdir] + link + ["-pthread"])
    if r.returncode:
        fail(f"{page}: SYNOPSIS does not compile against the headers:\n{prog}\n{r.stderr}")

# ---- 4. rendering ----------------------------------------------------------------
for page in sorted(pages):
    path = os.path.join(man3, page)
    r = run(["groff", "-man", "-ww", "-z", "-Tutf8", path])
    if r.stderr.strip():
        fail(f"{page}: groff warnings:\n{r.stderr}")
    r = run(["man", "--warnings", "-E", "UTF-8", "-l", "-Tutf8", "-Z", path], env=env)
    if r.returncode or r.stderr.strip():
        fail(f"{page}: man --warnings:\n{r.stderr}")

if failures:
    print(f"check_man: {len(failures)} problem(s)")
    sys.exit(1)
print(f"check_man: ok ({len(functions)} functions, {len(pages)} pages)")
