#!/usr/bin/env python3
"""The layers hold: every dependency of the library and the tools points down.

usage: check_layers.py SOURCE_DIR BUILD_DIR

pcpu is built in layers (issue 25, docs/layout.md):

    rseq < zone < counter < percpu_sync < {ref, rwlock, objcache}
         < stats < segment < {pcpu/pcpu.h, exporter} < pcpu.hpp < {tools, compat}

and the statistics and segment layers in sub-layers of their own (LAYERS
below). A file may depend on a file of its own layer or of a lower one;
never on a higher one (upward) nor on a different layer of the same rank
(sideways: ref, rwlock and objcache are siblings, and so are the segment's
writer and reader).

Two graphs are read:
  - includes: every #include of src/, tools/, compat/ and include/pcpu/, as
    the compiler resolves it: "x.h" against the including file's folder,
    then src/ (the libraries' include path), then include/; <x.h> against
    src/ and include/ (<pcpu/x.h>: the public headers); libc's and other
    packages' headers are no edge;
  - symbols: for every object file of the library (CMakeFiles/pcpu_static.dir)
    and of the tools (tools/CMakeFiles/*.dir), `nm` says which pcpu_ and
    pcpu__ symbols it defines and which it uses; a use is an edge from the
    user's source file to the definer's.
Besides the order, three more rules:
  - the source tree is laid out by library (issue 53): src/core/ (libpcpu),
    src/stats/ and src/segment/ (libpcpu-stats), src/exporter/
    (libpcpu-exporter). A file outside one of these folders includes
    nothing of it but its index header (FOLDERS below: src/core/core.h, the
    seam libpcpu-stats is built on; src/stats/stats.h, what the segment
    uses of the statistics layer), and that only from the folders the
    index is for; a folder without an index offers nothing;
  - no two files of a layer depend on each other through symbols (a loop:
    neither can be understood, tested or replaced alone);
  - no product file (src/, include/, tools/, compat/, go/, python/src/,
    rust/*/src/, integrations/) is over LINE_LIMIT lines (one subject per
    file), but those in LONG_FILES, each with its reason.

The layers make up products (issue 39), PRODUCTS below: libpcpu (rseq to
objcache), libpcpu-stats (stats and segment), libpcpu-exporter (the
exporter core, src/exporter/), the C++ headers, the tools and the
prometheus-cpp layer (compat/). A product is a shared object of its own,
so an edge between products is a call through the lower one's dynamic
symbols:
  - a symbol one product uses from another must be exported by the shared
    library that defines it (nm -D; a hidden symbol links only statically);
  - libpcpu's private interface (its PCPU_PRIVATE_<n> version node) is for
    libpcpu-stats alone: the tools, compat/ and the C++ headers use public
    API only;
  - the Python reader (python/src/pcpu/_lib.py) calls, by name, only
    functions libpcpu-stats.so or libpcpu.so export, never a private one;
  - the seam is one set: the functions src/core/core.h declares, the names
    of libpcpu.so's private node (src/core/pcpu.map) and the symbols
    libpcpu-stats.so imports from that node (SEAM_HEADER below);
  - each public header belongs to one owner (docs/layout.md's table,
    OWNERS below), which decides the CMake component that installs it and
    what it may include;
  - no architecture #if outside the arch headers (ARCH_SCOPE below);
  - nginx's module, the benchmarks, the examples, the Go reader and the
    Rust crates use the public API only (CONSUMERS below).

Every violation is printed, one per line, and the test fails, unless it is
in ALLOWED below with the reason it is there. Run by ctest (layer_check);
tests/check_layers_planted.py (ctest layer_check_planted) plants each kind
of break in a copy of the tree and checks this test catches it.
"""
import functools
import os
import re
import subprocess
import sys
from fnmatch import fnmatch

# ---- the map: layer -> files (glob patterns, relative to the source tree) -----
# Listed bottom-up; RANK orders them. Layers with the same rank are siblings.
# Every port's arch header (include/pcpu/arch/<arch>.h, and its stack
# sections, arch/<arch>/stack.h), found, so that a port needs no line here.
ARCH_HEADERS = sorted(
    "include/pcpu/arch/" + f
    for f in os.listdir(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                     "..", "include", "pcpu", "arch"))
    if f.endswith(".h")) + ["include/pcpu/arch/*/stack.h"]

LAYERS = [
    # (layer, rank, patterns)
    ("rseq", 0, [                      # knowing the CPU: rseq, process init,
        "include/pcpu/defs.h",          # and what every layer uses: fork
        "include/pcpu/rseq.h",          # handlers, error messages, visibility
        "include/pcpu/arch.h",
        "include/pcpu/arch/common.h", "include/pcpu/arch/pseudocode.h",
        "include/pcpu/arch/generic.h",
    ] + ARCH_HEADERS + [
        "include/pcpu/runtime_version.h", "include/pcpu/version.h.in",
        "src/core/core.h",              # the seam libpcpu-stats is built on (FOLDERS)
        "src/core/rseq.c", "src/core/rseq_internal.h", "src/core/slot_walk.*", "src/core/torn64.h", "src/core/environment.c",
        "include/pcpu/worker.h", "src/core/worker.c", "src/core/worker_internal.h",  # slots' owners
        "src/core/fork.c", "src/core/version.c",
    ]),
    ("zone", 1, [
        "include/pcpu/zone.h",
        "include/pcpu/common.h",        # compatibility: defs, rseq, version, zone
        "src/core/zone.c", "src/core/zone_shared.c", "src/core/zone_tree.c", "src/core/zone_join.c", "src/core/zone_*.h",
    ]),
    ("counter", 2, [
        "include/pcpu/counter.h", "include/pcpu/counter9.h", "include/pcpu/compat/*",
        "src/core/counter.c", "src/core/counter_stable_abi.c",
        "src/core/counter_double.c",         # counter words holding doubles
        "src/core/counter9.c", "src/core/striped_lock.*",
    ]),
    ("percpu_sync", 3, [                # the per-CPU/atomic switch (membarrier),
        "include/pcpu/percpu_sync.h", "src/core/percpu_sync.c", "src/core/percpu_sync_internal.h",
        "include/pcpu/percpu_ops.h",    # and the public operations with their fence
    ]),
    ("ref", 4, ["include/pcpu/ref.h", "src/core/ref.c", "src/core/ref_stable_abi.c"]),
    ("hcounter", 4, ["include/pcpu/hcounter.h", "src/core/hcounter.c", "src/core/hcounter_stable_abi.c"]),
    ("flows", 4, ["include/pcpu/flows.h", "src/core/flows.c", "src/core/flows_life.c",
                  "src/core/flows_internal.h", "src/core/flows_stable_abi.c"]),
    ("rwlock", 4, ["include/pcpu/rwlock.h", "src/core/rwlock.c", "src/core/rwlock_stable_abi.c",
                   "src/core/rwlock_internal.h", "src/core/rwlock_readers.c"]),
    ("objcache", 4, [
        "include/pcpu/objcache.h",
        "src/core/objcache.c", "src/core/objcache_stable_abi.c",
    ]),
    # The statistics layer: names, messages and buffers; the metrics; the
    # writers of expositions (which read snapshot structs, pcpu/expose.h);
    # the registry (families, series, snapshots, collectors, merges), which
    # uses them all.
    ("stats.base", 5, [
        "include/pcpu/expose.h",
        "src/stats/stats_internal.h", "src/stats/validate.*", "src/stats/format.*",
        "src/stats/error.*",            # the layers' error messages, by domain
        "src/stats/metric_type.c",
        "src/stats/arena.c", "src/stats/hashtab.*", "src/stats/histogram_layout.*",
        "src/stats/histogram_export.c",
    ]),
    ("stats.metrics", 6, [
        "include/pcpu/gauge.h", "include/pcpu/histogram.h", "include/pcpu/group.h",
        "include/pcpu/fraction.h", "src/stats/fraction.c",  # values with fractions
        "src/stats/metrics.h",
        "src/stats/stats_zone.c", "src/stats/gauge.c", "src/stats/histogram.c",
        "src/stats/histogram_sparse.c", "src/stats/histogram_quantile.c",
        "src/stats/group.c", "src/stats/group_read.c", "src/stats/group_lanes.h",
        "src/stats/stable_abi.c",
    ]),
    ("stats.exposition", 7, [
        "src/stats/expose.c", "src/stats/expose_protobuf.c", "src/stats/negotiate.c",
        "src/stats/histogram_export.c", "proto/*",
    ]),
    ("stats.registry", 8, [
        "include/pcpu/stats.h", "include/pcpu/counter9_sysctl.h",
        "src/stats/registry.h", "src/stats/registry.c", "src/stats/registry_*",
        "src/stats/snapshot.c",
        "src/stats/collector.c", "src/stats/process_collector.c", "src/stats/hcounter_gauge.c",
        "src/stats/counter9_sysctl.c", "src/stats/merge.c",
        "src/stats/objcache_stats.*",
    ]),
    # The statistics layer's index for the segment (FOLDERS), above the
    # headers it includes (the registry's observer interface among them).
    ("stats.index", 8.5, ["src/stats/stats.h"]),
    # The segment: its format and shared helpers, then writer and reader.
    ("segment.base", 9, [
        "include/pcpu/segment_dir.h",
        "src/segment/format.h", "src/segment/segment_internal.h",
        "src/segment/backing.*", "src/segment/error.c", "src/segment/names.c",
        "src/segment/dirs.c", "src/segment/safe_open.c", "src/segment/liveness.c",
    ]),
    ("segment.writer", 10, ["include/pcpu/segment.h", "src/segment/writer.*",
                            "src/segment/directory.c", "src/segment/directory_tree.c", "src/segment/tree.c",
                            "src/segment/tree_index.c", "src/segment/tree_relabel.c", "src/segment/tree_blobs.c", "src/segment/tree_relog.c", "src/segment/join.c",
                            "src/segment/flows.c"]),
    ("segment.reader", 10, ["include/pcpu/reader.h", "src/segment/reader*"]),
    ("umbrella", 11, ["include/pcpu/pcpu.h"]),  # the whole API, for programs
    # The exporter core (issue 51): HTTP serving of expositions, beside the
    # umbrella (pcpu.h does not include it: another library, with
    # libmicrohttpd and friends), below the tools and compat/ that use it.
    ("exporter", 11, ["include/pcpu/exporter.h", "src/exporter/*"]),
    ("cxx", 12, ["include/pcpu/pcpu.hpp", "include/pcpu/sync.hpp", "include/pcpu/stats.hpp"]),  # the C++ API
    ("tools", 13, ["tools/*"]),
    ("compat", 13, ["compat/*"]),  # prometheus-cpp's API on pcpu (and pcpu/exposer.hpp)
]

# The products: which shared object (or program) each layer is part of.
PRODUCTS = {
    "libpcpu": {"rseq", "zone", "counter", "percpu_sync", "ref", "rwlock", "objcache",
                "hcounter", "flows"},
    "libpcpu-stats": {"stats.base", "stats.metrics", "stats.exposition", "stats.registry",
                      "stats.index",
                      "segment.base", "segment.writer", "segment.reader"},
    "libpcpu-exporter": {"exporter"},
    "headers": {"umbrella", "cxx"},
    "tools": {"tools"},
    "compat": {"compat"},
}
# The shared object each library product is, in the build tree.
PRODUCT_LIBRARY = {"libpcpu": "libpcpu.so", "libpcpu-stats": "libpcpu-stats.so",
                   "libpcpu-exporter": "libpcpu-exporter.so"}

# The library folders: folder -> (its index header, the folders that may
# include it). Every other file of a folder is private to it.
#   src/core/core.h: the seam libpcpu-stats is built on (fork, zone, tree
#     and counter internals, exported in libpcpu's PCPU_PRIVATE node only),
#     declared there itself (seam_problems() below);
#   src/stats/stats.h: what the segment takes of the statistics layer (the
#     one hash table, the registry's observer interface instead of its
#     structs, the rules a reader applies to untrusted input exactly as the
#     registry does, the histogram layouts).
# The exporter, tools/, compat/ and the public headers use public API only.
FOLDERS = {
    "src/core/": ("src/core/core.h", ("src/stats/", "src/segment/")),
    "src/stats/": ("src/stats/stats.h", ("src/segment/",)),
    "src/segment/": (None, ()),
    "src/exporter/": (None, ()),
}

# One subject per file: no product file over LINE_LIMIT lines ...
LINE_LIMIT = 900
PRODUCT_TREES = ["src", "include", "tools", "compat", "go", "python/src", "integrations"]
SOURCE_SUFFIXES = (".c", ".h", ".h.in", ".cc", ".cpp", ".hpp", ".rs", ".go", ".py", ".sh",
                   ".proto", ".cmake")
# ... but these, each with the reason it is not split yet (issue 53).
LONG_FILES = {
}

# ---- edges that stay, each with its reason ------------------------------------
# (from file, to file, kind): kind "include", "symbol NAME", or "loop".
ALLOWED = {
    # Source compatibility: the rwlock was declared in pcpu/ref.h before it
    # had a header of its own; programs that include ref.h for it still build.
    ("include/pcpu/ref.h", "include/pcpu/rwlock.h", "include"),
}

# ---- reading the tree ---------------------------------------------------------
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


@functools.lru_cache(maxsize=None)
def includes_of(text):
    """The (kind, name) of every #include in a file's text (the planted
    test runs check() once per plant on a tree of which one file changed)."""
    return tuple(INCLUDE_RE.findall(text))


@functools.lru_cache(maxsize=None)
def layer_of(path):
    for name, rank, patterns in LAYERS:
        if any(fnmatch(path, p) for p in patterns):
            return name, rank
    return None


def product_of(layer):
    for product, layers in PRODUCTS.items():
        if layer in layers:
            return product
    return None


def source_files(src):
    for top in ("src", "tools", "include/pcpu", "compat"):
        for root, _, files in os.walk(os.path.join(src, top)):
            for f in files:
                if f.endswith((".c", ".h", ".h.in", ".cc", ".cpp", ".hpp")):
                    yield os.path.relpath(os.path.join(root, f), src)


def resolve_include(src, path, kind, name):
    """The file an include names, as the compiler finds it, or None."""
    if kind == "<" and name.startswith("pcpu/"):
        target = "include/" + name
        if name == "pcpu/exposer.hpp":
            target = "compat/prometheus-cpp/include/" + name
        if not os.path.exists(os.path.join(src, target)):
            target += ".in"  # pcpu/version.h: generated
        return target
    # "x.h": beside the including file first; both forms then through the
    # include path (src/ for the libraries, include/).
    bases = ([os.path.dirname(path)] if kind == '"' else []) + ["src", "include"]
    for base in bases:
        target = os.path.normpath(os.path.join(base, name))
        if not target.startswith("..") and os.path.isfile(os.path.join(src, target)):
            return target
    return None  # libc, other packages, generated (protobuf)


def include_edges(src):
    for path in source_files(src):
        with open(os.path.join(src, path), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        for kind, name in includes_of(text):
            target = resolve_include(src, path, kind, name)
            if target is not None and target != path:
                yield path, target, "include"


def folder_problem(a, b):
    """Why an include a -> b crosses a library folder's boundary, or None."""
    for folder, (index, users) in FOLDERS.items():
        if not b.startswith(folder) or a.startswith(folder):
            continue
        if b != index:
            return "a header private to %s (%s)" % (
                folder, "its index is %s" % index if index else "which offers no header")
        if not a.startswith(users):
            return "%s is the index for %s alone" % (index, ", ".join(users))
    return None


def long_files(src):
    """Product files over LINE_LIMIT lines: (path, lines)."""
    tops = list(PRODUCT_TREES)
    rust = os.path.join(src, "rust")
    if os.path.isdir(rust):
        tops += ["rust/%s/src" % c for c in sorted(os.listdir(rust))]
    for top in tops:
        for root, dirs, files in os.walk(os.path.join(src, top)):
            dirs[:] = [d for d in dirs if d not in ("target", "__pycache__", "testdata")]
            for f in files:
                full = os.path.join(root, f)
                if not f.endswith(SOURCE_SUFFIXES) or os.path.islink(full):
                    continue
                with open(full, "rb") as fh:
                    lines = fh.read().count(b"\n")
                if lines > LINE_LIMIT:
                    yield os.path.relpath(full, src), lines


def object_files(build):
    lib = os.path.join(build, "CMakeFiles", "pcpu_static.dir")
    stats = os.path.join(build, "CMakeFiles", "pcpu_stats_static.dir")
    exporter = os.path.join(build, "CMakeFiles", "pcpu_exporter.dir")
    tools = os.path.join(build, "tools", "CMakeFiles")
    compat = os.path.join(build, "compat", "prometheus-cpp", "CMakeFiles")
    for base, prefix in ((lib, ""), (stats, ""), (exporter, ""), (tools, "tools/"),
                         (compat, "compat/prometheus-cpp/")):
        for root, _, files in os.walk(base):
            for f in files:
                if not f.endswith(".o"):
                    continue
                full = os.path.join(root, f)
                rel = os.path.relpath(full, base)
                # A build tree from before the split (issue 39) keeps the
                # statistics' old objects under pcpu_static.dir: libpcpu's
                # objects are src/core/*.c's alone.
                if base == lib and rel.startswith(("src/stats", "src/segment", "proto")):
                    continue
                if prefix:  # tools/CMakeFiles/<target>.dir/<file>.o
                    rel = rel.split(os.sep, 1)[1]
                yield full, prefix + rel[:-2]


_NM = {}  # nm's output by file and version of it (check() runs again in one process)


def dynamic_symbols(build, library):
    """Defined dynamic symbols of a shared object: name -> version node."""
    path = os.path.join(build, library)
    if not os.path.exists(path):
        return {}
    st = os.stat(path)
    key = ("-D", os.path.realpath(path), st.st_mtime_ns, st.st_size)
    if key not in _NM:
        _NM[key] = subprocess.run(["nm", "-D", "--defined-only", "--with-symbol-versions", path],
                                  capture_output=True, text=True).stdout
    out = _NM[key]
    names = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2].startswith("pcpu_"):
            name, _, node = parts[2].partition("@")
            names[name] = node.lstrip("@")
    return names


def _nm_key(obj):
    st = os.stat(obj)
    return (os.path.realpath(obj), st.st_mtime_ns, st.st_size)


def nm_prefetch(objs):
    """nm -P of many object files in a few runs of nm (one each is most of
    the test's time), into nm()'s cache."""
    todo = sorted({_nm_key(o) for o in objs if os.path.exists(o)} - set(_NM))
    for i in range(0, len(todo), 256):
        batch = todo[i:i + 256]
        out = subprocess.run(["nm", "-P", "-A"] + [k[0] for k in batch],
                             capture_output=True, text=True).stdout
        lines = {k[0]: [] for k in batch}
        for line in out.splitlines():
            path, sep, rest = line.partition(": ")
            if sep and path in lines:
                lines[path].append(rest)
        for k in batch:
            _NM[k] = "\n".join(lines[k[0]])


def nm(obj):
    """nm -P of an object file, once per file and version of it."""
    key = _nm_key(obj)
    if key not in _NM:
        _NM[key] = subprocess.run(["nm", "-P", obj], capture_output=True, text=True).stdout
    return _NM[key]


def symbol_edges(src, build):
    defined, used = {}, []
    for obj, source in object_files(build):
        if not os.path.exists(os.path.join(src, source)) and not source.startswith("proto/"):
            continue  # a stale object of a file that is gone
        out = nm(obj)
        for line in out.splitlines():
            parts = line.split()
            if len(parts) < 2 or not parts[0].startswith("pcpu_"):
                continue
            name, kind = parts[0], parts[1]
            if kind in ("U", "w", "v"):
                used.append((source, name))
            elif kind.isupper():
                defined[name] = source
    for source, name in used:
        if name in defined and defined[name] != source:
            yield source, defined[name], "symbol " + name


def library_definitions(build):
    """Every pcpu_ symbol the libraries' objects define: name -> source file."""
    defined = {}
    for obj, source in object_files(build):
        if source.startswith(("tools/", "compat/")):
            continue
        for line in nm(obj).splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[0].startswith("pcpu_") and parts[1] in "TDBRV":
                defined.setdefault(parts[0], source)
    return defined


def python_calls(src):
    """The C functions the Python reader calls by name (ctypes)."""
    text = open(os.path.join(src, "python", "src", "pcpu", "_lib.py"), encoding="utf-8").read()
    return sorted(set(re.findall(r'^\s*\("(pcpu_[a-z0-9_]+)"', text, re.M)))


# ---- the seam: what core.h declares, the private node exports, libpcpu-stats imports
# src/core/core.h is the interface libpcpu-stats is built on: it declares
# exactly the functions of libpcpu.so's private version node (pcpu.map's
# PCPU_PRIVATE_<release>), and those are exactly what libpcpu-stats.so
# imports from that node. Three lists, one set.
SEAM_HEADER = "src/core/core.h"
SEAM_MAP = "src/core/pcpu.map"
SEAM_LIBRARY = "libpcpu-stats.so"


def strip_comments(text):
    return re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)


def read_text(src, rel):
    with open(os.path.join(src, rel), encoding="utf-8", errors="replace") as fh:
        return fh.read()


def seam_declared(src):
    """The functions core.h declares (its static inline helpers are not)."""
    text = strip_comments(read_text(src, SEAM_HEADER))
    text = re.sub(r"^\s*#(?:[^\n]*\\\n)*[^\n]*", " ", text, flags=re.M)  # preprocessor lines
    top, depth = [], 0  # bodies and member lists out: one statement per ';'
    for ch in text:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                top.append(";")
        elif depth == 0:
            top.append(ch)
    names = set()
    for statement in "".join(top).split(";"):
        m = re.search(r"\b(pcpu_\w+)\s*\(", statement)
        if m and not re.search(r"\b(static|typedef)\b", statement):
            names.add(m.group(1))
    return names


def seam_exported(src):
    """The names the private node of src/core/pcpu.map lists."""
    text = strip_comments(read_text(src, SEAM_MAP))
    m = re.search(r"\bPCPU_PRIVATE_\S*\s*\{(.*?)\}", text, re.S)
    return set(re.findall(r"\b(pcpu_\w+)\s*;", m.group(1))) if m else set()


def undefined_symbols(build, library):
    """Undefined dynamic symbols of a shared object: name -> version node."""
    path = os.path.join(build, library)
    if not os.path.exists(path):
        return {}
    st = os.stat(path)
    key = ("-Du", os.path.realpath(path), st.st_mtime_ns, st.st_size)
    if key not in _NM:
        _NM[key] = subprocess.run(["nm", "-D", "--undefined-only", "--with-symbol-versions", path],
                                  capture_output=True, text=True).stdout
    names = {}
    for line in _NM[key].splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].startswith("pcpu_"):
            name, _, node = parts[1].partition("@")
            names[name] = node.lstrip("@")
    return names


def seam_problems(src, build, core_exports):
    declared, listed = seam_declared(src), seam_exported(src)
    built = {n for n, node in core_exports.items() if node.startswith("PCPU_PRIVATE")}
    imported = {n for n, node in undefined_symbols(build, SEAM_LIBRARY).items()
                if node.startswith("PCPU_PRIVATE")}
    out = []
    if not declared or not listed:
        return ["seam: no declaration in %s or no private node in %s" % (SEAM_HEADER, SEAM_MAP)]
    for n in sorted(declared - listed):
        out.append("seam: %s declares %s, which %s's private node does not export"
                   % (SEAM_HEADER, n, SEAM_MAP))
    for n in sorted(listed - declared):
        out.append("seam: %s's private node exports %s, which %s does not declare"
                   % (SEAM_MAP, n, SEAM_HEADER))
    for n in sorted(imported - declared):
        out.append("seam: %s imports %s from the private node, which %s does not declare"
                   % (SEAM_LIBRARY, n, SEAM_HEADER))
    for n in sorted(declared - imported):
        out.append("seam: %s declares %s, which %s does not import: the seam is wider than "
                   "its use (remove it)" % (SEAM_HEADER, n, SEAM_LIBRARY))
    for n in sorted(listed - built):
        out.append("seam: %s lists %s, which libpcpu.so does not export (no definition, or a "
                   "stale build)" % (SEAM_MAP, n))
    return out


# ---- who owns each public header: docs/layout.md's table ----------------------------
# include/pcpu/ holds the headers of four products. The table in
# docs/layout.md ("Who owns each public header") names each header's owner;
# the owner says which CMake component installs it (so which -dev package
# ships it) and which headers it may include: its own product's and those of
# the products below it, never a sibling's or a higher one's, but under
# `#if __has_include(...)` (pcpu.h takes libpcpu-stats' headers where they
# are installed).
LAYOUT_DOC = "docs/layout.md"
HEADER_TABLE = "## Who owns each public header"
OWNERS = {  # owner: (rank, the CMake component that installs its headers)
    "libpcpu": (0, "pcpu-dev"),
    "libpcpu-stats": (1, "stats-dev"),
    "the C++ API": (2, "stats-dev"),
    "libpcpu-exporter": (2, "exporter-dev"),
}


DIRECTIVE_RE = re.compile(r"^[ \t]*#[ \t]*(\w+)(.*)$", re.M)
PUBLIC_INCLUDE_RE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*<pcpu/([^>]+)>", re.M)


def public_headers(src):
    """include/pcpu's headers, as installed (pcpu/version.h from its .in)."""
    base = os.path.join(src, "include", "pcpu")
    for root, _, files in os.walk(base):
        for f in files:
            if f.endswith((".h", ".hpp", ".h.in")):
                yield os.path.relpath(os.path.join(root, f), base)


def header_table(src):
    """[(patterns, owner)] of docs/layout.md's table, or None."""
    text = read_text(src, LAYOUT_DOC)
    at = text.find("\n" + HEADER_TABLE)
    if at < 0:
        return None
    rows, body = [], False
    for line in text[at + 1:].split("\n")[1:]:
        if line.startswith("#"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not line.startswith("|"):
            continue
        if set(cells[0]) <= set("-: "):
            body = True  # the rows under the heading row
        elif body:
            rows.append((re.findall(r"`([^`]+)`", cells[0]), cells[1]))
    return rows


def header_components(src):
    """header -> the CMake components that install it."""
    cmake = read_text(src, "CMakeLists.txt")
    exporter = read_text(src, "src/exporter/exporter.cmake")
    m = re.search(r"^set\(PCPU_STATS_PUBLIC_HEADERS\s+([^)]*)\)", cmake, re.M)
    stats = set(m.group(1).split()) if m else set()
    exp = set(re.findall(r"install\(FILES include/pcpu/(\S+)[^)]*COMPONENT exporter-dev\)", exporter))
    m = re.search(r"install\(DIRECTORY include/pcpu\b([^)]*)COMPONENT (\S+)\s*\n?([^)]*)\)", cmake)
    excluded, dir_comp = set(), None
    if m:
        dir_comp = m.group(2)
        excluded = set(re.findall(r'PATTERN\s+"?([\w.*]+)"?\s+EXCLUDE', m.group(1) + m.group(3)))
        if "${_pcpu_stats_header_excludes}" in m.group(1) + m.group(3):
            excluded |= stats
    generated = re.findall(r"install\(FILES \$\{CMAKE_CURRENT_BINARY_DIR\}/include/pcpu/(\S+)\s+"
                           r"DESTINATION[^)]*COMPONENT (\S+)\)", cmake)
    comps = {}
    for h in public_headers(src):
        name = os.path.basename(h)
        got = []
        if h.endswith(".in"):
            got += [c for g, c in generated if g == h[:-3]]
        elif dir_comp and not any(fnmatch(name, p) for p in excluded):
            got.append(dir_comp)
        if h in stats:
            got.append("stats-dev")
        if h in exp:
            got.append("exporter-dev")
        comps[h] = got
    return comps


def optional_includes(text):
    """Offsets of the #includes inside an `#if` that asks __has_include."""
    stack, out = [], set()
    for m in DIRECTIVE_RE.finditer(text):
        kind, rest = m.group(1), m.group(2)
        if kind in ("if", "ifdef", "ifndef"):
            stack.append("__has_include" in rest)
        elif kind == "endif" and stack:
            stack.pop()
        elif kind in ("elif", "else") and stack:
            stack[-1] = stack[-1] or "__has_include" in rest
        elif kind == "include" and any(stack):
            out.add(m.start())
    return out


def header_problems(src):
    rows = header_table(src)
    if rows is None:
        return ["%s: no table under '%s'" % (LAYOUT_DOC, HEADER_TABLE)]
    out, owner = [], {}
    headers = sorted(public_headers(src))
    for patterns, who in rows:
        if who not in OWNERS:
            out.append("%s: header table: owner '%s' is none of %s" % (LAYOUT_DOC, who, sorted(OWNERS)))
            continue
        for p in patterns:
            hits = [h for h in headers if fnmatch(h, p) or fnmatch(h, p + ".in")]
            if not hits:
                out.append("%s: header table: `%s` names no header of include/pcpu/" % (LAYOUT_DOC, p))
            for h in hits:
                if h in owner and owner[h] != who:
                    out.append("include/pcpu/%s: two owners in %s's table (%s, %s)"
                               % (h, LAYOUT_DOC, owner[h], who))
                owner.setdefault(h, who)
    comps = header_components(src)
    for h in headers:
        if h not in owner:
            out.append("include/pcpu/%s: no row of %s's header table owns it" % (h, LAYOUT_DOC))
            continue
        want = OWNERS[owner[h]][1]
        if comps.get(h) != [want]:
            out.append("include/pcpu/%s: %s says %s (component %s), CMake installs it with %s"
                       % (h, LAYOUT_DOC, owner[h], want, ", ".join(comps.get(h)) or "nothing"))
    for h in headers:
        path = "include/pcpu/" + h
        text = read_text(src, path)
        if "<pcpu/" not in text:
            continue
        optional = optional_includes(text)
        for m in PUBLIC_INCLUDE_RE.finditer(text):
            if m.start() in optional or h not in owner:
                continue
            n = text.count("\n", 0, m.start()) + 1
            t = m.group(1)
            t = t if t in owner else t + ".in"
            if t not in owner:
                continue
            (ra, a), (rb, b) = (OWNERS[owner[h]][0], owner[h]), (OWNERS[owner[t]][0], owner[t])
            if rb > ra or (rb == ra and a != b):
                out.append("%s:%d (%s) includes include/pcpu/%s (%s): a header includes only its "
                           "own product's and lower ones' (%s)" % (path, n, a, t, b, LAYOUT_DOC))
    return out


# ---- a port is its header: no architecture test outside the arch headers ------
# The target's differences live in include/pcpu/arch/<arch>.h (generic.h:
# the default); include/pcpu/arch.h picks it. A conditional on a target's
# macro anywhere else in the products is a port spread over the tree. The
# benchmarks are left out: what they measure is the target itself (its
# cycle counter, its instructions).
ARCH_SCOPE = ["src", "include", "tools", "compat", "integrations", "examples"]
ARCH_HOME = ("include/pcpu/arch.h", "include/pcpu/arch/")
COND_RE = re.compile(r"^[ \t]*#[ \t]*(?:if|elif|ifdef|ifndef)\b(.*)$", re.M)
ARCH_MACRO_RE = re.compile(
    r"\b(__x86_64__|__amd64__|__i[3-6]86__|__aarch64__|__AARCH64E[LB]__|__arm__|__ARME[LB]__|"
    r"__ARM_ARCH\w*|__thumb\w*|__riscv\w*|__powerpc\w*|__ppc\w*|__PPC\w*|__s390\w*|__mips\w*|"
    r"__loongarch\w*|__sparc\w*|_M_X64|_M_IX86|_M_ARM\w*)\b")


@functools.lru_cache(maxsize=None)
def arch_conditions(text):
    """(line, macro) of each conditional on a target's macro in a file's text."""
    out = []
    for m in COND_RE.finditer(text):
        hit = ARCH_MACRO_RE.search(strip_comments(m.group(1)))
        if hit:
            out.append((text.count("\n", 0, m.start()) + 1, hit.group(1)))
    return tuple(out)


def arch_problems(src):
    out = []
    for top in ARCH_SCOPE:
        for root, dirs, files in os.walk(os.path.join(src, top)):
            dirs[:] = [d for d in dirs if d not in ("tests", "testdata", "target")]
            for f in files:
                if not f.endswith((".c", ".h", ".h.in", ".cc", ".cpp", ".hpp")):
                    continue
                rel = os.path.relpath(os.path.join(root, f), src)
                if rel.startswith(ARCH_HOME):
                    continue
                for n, macro in arch_conditions(read_text(src, rel)):
                    out.append("%s:%d: an architecture #if (%s) outside the arch headers: the "
                               "port's difference goes into include/pcpu/arch/<arch>.h "
                               "(generic.h: the default)" % (rel, n, macro))
    return out


# ---- the consumers: nginx's module, PostgreSQL's extension, the benchmarks, the examples, Go, Rust
# They use the libraries as a user does: public headers, exported public
# symbols. None includes a file of src/, none is built from src/'s files,
# none calls libpcpu's private interface or a symbol the libraries hide.
# The Go reader reads the segment file by its documented format
# (docs/segment-format.md): no cgo. The Rust crates declare (extern "C")
# only functions the libraries export publicly; pcpu-sys compiles the
# libraries from src/ (its build.rs), as CMake does, and uses them as any
# program does.
CONSUMERS = ["integrations", "bench", "examples", "go"]
CONSUMER_BUILDS = ["bench/CMakeLists.txt", "examples/CMakeLists.txt",
                   "integrations/nginx/CMakeLists.txt", "integrations/nginx/config",
                   "integrations/postgresql/CMakeLists.txt", "integrations/postgresql/Makefile"]
SRC_PATH_RE = re.compile(r"(?:\$\{(?:PROJECT_SOURCE_DIR|CMAKE_SOURCE_DIR)\}|\.\.)/src(?:/|\b)")


def consumer_files(src, suffixes):
    for top in CONSUMERS:
        for root, dirs, files in os.walk(os.path.join(src, top)):
            dirs[:] = [d for d in dirs if d not in ("target", "__pycache__", "work")]
            for f in files:
                if f.endswith(suffixes):
                    yield os.path.relpath(os.path.join(root, f), src)


def consumer_objects(build):
    """(object, source) of the benchmarks', examples', nginx module's and
    PostgreSQL extension's objects."""
    for top in ("bench", "examples"):
        base = os.path.join(build, top, "CMakeFiles")
        for root, _, files in os.walk(base):
            for f in files:
                if f.endswith(".o"):
                    rel = os.path.relpath(os.path.join(root, f), base).split(os.sep, 1)[1]
                    yield os.path.join(root, f), top + "/" + rel[:-2]
    ngx = os.path.join(build, "integrations", "nginx", "work", "ngx", "objs", "addon", "nginx")
    for f in sorted(os.listdir(ngx)) if os.path.isdir(ngx) else []:
        if f.endswith(".o"):
            yield os.path.join(ngx, f), "integrations/nginx/" + f[:-2] + ".c"
    pg = os.path.join(build, "integrations", "postgresql")
    for f in sorted(os.listdir(pg)) if os.path.isdir(pg) else []:
        if f.endswith(".o"):
            yield os.path.join(pg, f), "integrations/postgresql/" + f[:-2] + ".c"


def rust_externs(src):
    """(file, C name) of every function or static a crate declares extern "C"."""
    rust = os.path.join(src, "rust")
    for crate in sorted(os.listdir(rust)) if os.path.isdir(rust) else []:
        for root, _, files in os.walk(os.path.join(rust, crate, "src")):
            for f in sorted(files):
                if not f.endswith(".rs"):
                    continue
                rel = os.path.relpath(os.path.join(root, f), src)
                for block in re.findall(r'extern\s+"C"\s*\{(.*?)\n\}', read_text(src, rel), re.S):
                    for name in re.findall(r"\b(?:fn|static(?:\s+mut)?)\s+(\w+)", block):
                        yield rel, re.sub(r"^__(real|wrap)_", "", name)


def consumer_problems(src, build, exports, hidden):
    """hidden: symbols the libraries' objects define that no library exports."""
    out = []

    def symbol(user, name, how):
        node = exports["libpcpu"].get(name, "")
        if node.startswith("PCPU_PRIVATE"):
            out.append("%s -> %s (%s): libpcpu's private interface (%s), which is libpcpu-stats' "
                       "alone: consumers use the public API" % (user, name, how, node))
        elif name in hidden and not any(name in e for e in exports.values()):
            out.append("%s -> %s (%s): a library internal (%s, hidden): consumers use the public "
                       "API" % (user, name, how, hidden[name]))

    for rel in consumer_files(src, (".c", ".h", ".cc", ".cpp", ".hpp")):
        for kind, name in includes_of(read_text(src, rel)):
            target = None
            if kind == '"':
                target = os.path.normpath(os.path.join(os.path.dirname(rel), name))
            elif name.split("/")[0] in ("core", "stats", "segment", "exporter"):
                target = "src/" + name  # through -I src, which no consumer has
            if target and target.startswith("src/") and os.path.isfile(os.path.join(src, target)):
                out.append("%s -> %s (include): a consumer includes a library's private header: "
                           "public headers only (include/pcpu/)" % (rel, target))
    for rel in CONSUMER_BUILDS:
        if not os.path.exists(os.path.join(src, rel)):
            continue
        for n, line in enumerate(read_text(src, rel).split("\n"), 1):
            if not line.lstrip().startswith("#") and SRC_PATH_RE.search(line):
                out.append("%s:%d: a consumer built with the libraries' sources (src/): it links "
                           "the libraries instead" % (rel, n))
    for rel in consumer_files(src, (".go",)):
        if re.search(r'^\s*(?:import\s+)?"C"\s*$', read_text(src, rel), re.M):
            out.append('%s: imports "C" (cgo): the Go reader reads the segment file by its '
                       "documented format (docs/segment-format.md), never the C library" % rel)
    for obj, source in consumer_objects(build):
        if not os.path.exists(os.path.join(src, source)):
            continue  # a stale object of a file that is gone
        for line in nm(obj).splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[1] in ("U", "w") and parts[0].startswith("pcpu_"):
                symbol(source, parts[0], "symbol")
    for rel, name in rust_externs(src):
        if name.startswith("pcpu_"):
            symbol(rel, name, 'extern "C"')
    return out


# ---- the rules ------------------------------------------------------------------
class BuildMissing(Exception):
    pass


def check(src, build):
    """Every violation in the tree `src` built in `build`: (problems, summary)."""
    problems, unmapped = [], set()
    nm_prefetch([o for o, _ in object_files(build)] + [o for o, _ in consumer_objects(build)])
    edges = list(include_edges(src)) + list(symbol_edges(src, build))
    if not any(k.startswith("symbol") for _, _, k in edges):
        raise BuildMissing("no object files under %s: build first" % build)
    allowed = set(ALLOWED)
    used_allowed = set()

    def report(a, b, kind, why):
        key = (a, b, kind)
        if key in allowed:
            used_allowed.add(key)
            return
        problems.append("%s -> %s (%s): %s" % (a, b, kind, why))

    sym_pairs = set()
    for a, b, kind in edges:
        la, lb = layer_of(a), layer_of(b)
        for f, l in ((a, la), (b, lb)):
            if l is None:
                unmapped.add(f)
        if kind == "include":
            why = folder_problem(a, b)  # whatever the layers
            if why:
                report(a, b, kind, why)
        if la is None or lb is None:
            continue
        if kind.startswith("symbol"):
            sym_pairs.add((a, b))
        if lb[1] > la[1]:
            report(a, b, kind, "upward, %s uses %s" % (la[0], lb[0]))
        elif lb[1] == la[1] and lb[0] != la[0]:
            report(a, b, kind, "sideways, %s uses its sibling %s" % (la[0], lb[0]))
    # Between products: through the lower product's dynamic symbols.
    exports = {p: dynamic_symbols(build, lib) for p, lib in PRODUCT_LIBRARY.items()}
    if not all(exports.values()):
        raise BuildMissing("no libpcpu.so / libpcpu-stats.so under %s: build first" % build)
    for a, b, kind in edges:
        la, lb = layer_of(a), layer_of(b)
        if not kind.startswith("symbol") or la is None or lb is None:
            continue
        pa, pb = product_of(la[0]), product_of(lb[0])
        if pa == pb or pb not in exports:
            continue
        name = kind.split()[1]
        node = exports[pb].get(name)
        if node is None:
            report(a, b, kind, "%s uses a symbol %s does not export" % (pa, PRODUCT_LIBRARY[pb]))
        elif node.startswith("PCPU_PRIVATE") and pa != "libpcpu-stats":
            report(a, b, kind, "%s uses libpcpu's private interface (%s), which is "
                   "libpcpu-stats' alone" % (pa, node))
    problems.extend(seam_problems(src, build, exports["libpcpu"]))
    problems.extend(header_problems(src))
    problems.extend(arch_problems(src))
    problems.extend(consumer_problems(src, build, exports, library_definitions(build)))
    for name in python_calls(src):
        node = exports["libpcpu-stats"].get(name) or exports["libpcpu"].get(name)
        if node is None:
            report("python/src/pcpu/_lib.py", name, "ctypes",
                   "neither libpcpu-stats.so nor libpcpu.so exports it")
        elif node.startswith("PCPU_PRIVATE") or name.startswith("pcpu__"):
            report("python/src/pcpu/_lib.py", name, "ctypes", "a private function (%s)" % node)
    for a, b in sorted(sym_pairs):
        if a < b and (b, a) in sym_pairs:
            report(a, b, "loop", "these two files call each other")
            report(b, a, "loop", "these two files call each other")
    for f in sorted(unmapped):
        problems.append("%s: in no layer (add it to LAYERS in tests/check_layers.py)" % f)
    for key in sorted(allowed - used_allowed):
        problems.append("allowed edge %s -> %s (%s) no longer exists: remove it from "
                        "tests/check_layers.py" % key)
    long = dict(long_files(src))
    for f, n in sorted(long.items()):
        if f not in LONG_FILES:
            problems.append("%s: %d lines, over %d: split it by subject" % (f, n, LINE_LIMIT))
    for f in sorted(set(LONG_FILES) - set(long)):
        problems.append("%s is in LONG_FILES but not over %d lines: remove it from "
                        "tests/check_layers.py" % (f, LINE_LIMIT))
    summary = "%d include and %d symbol edges, %d allowed, %d long files allowed, %d problems" % (
        sum(1 for e in edges if e[2] == "include"),
        sum(1 for e in edges if e[2] != "include"), len(used_allowed),
        len(set(long) & set(LONG_FILES)), len(problems))
    return problems, summary


def main():
    try:
        problems, summary = check(sys.argv[1], sys.argv[2])
    except BuildMissing as e:
        sys.exit(str(e))
    for p in problems:
        print("FAIL:", p)
    print(summary)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
