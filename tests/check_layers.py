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
    functions libpcpu-stats.so or libpcpu.so export, never a private one.

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
        "src/core/rseq.c", "src/core/rseq_internal.h", "src/core/slot_walk.*", "src/core/torn64.h", "src/core/environment.c",
        "include/pcpu/worker.h", "src/core/worker.c", "src/core/worker_internal.h",  # slots' owners
        "src/core/fork.*", "src/core/error.*", "src/core/visibility.h", "src/core/version.c",
    ]),
    ("zone", 1, [
        "include/pcpu/zone.h",
        "include/pcpu/common.h",        # compatibility: defs, rseq, version, zone
        "src/core/zone.c", "src/core/zone_shared.c", "src/core/zone_tree.c", "src/core/zone_join.c", "src/core/zone_*.h",
    ]),
    ("counter", 2, [
        "include/pcpu/counter.h", "include/pcpu/counter9.h", "include/pcpu/compat/*",
        "src/core/counter.c", "src/core/counter_internal.h", "src/core/counter_stable_abi.c",
        "src/core/counter_double.c",         # counter words holding doubles
        "src/core/counter9.c", "src/core/striped_lock.*",
    ]),
    ("percpu_sync", 3, [                # the per-CPU/atomic switch (membarrier),
        "include/pcpu/percpu_sync.h", "src/core/percpu_sync.c", "src/core/percpu_sync_internal.h",
        "include/pcpu/percpu_ops.h",    # and the public operations with their fence
    ]),
    ("ref", 4, ["include/pcpu/ref.h", "src/core/ref.c", "src/core/ref_stable_abi.c"]),
    ("hcounter", 4, ["include/pcpu/hcounter.h", "src/core/hcounter.c", "src/core/hcounter_stable_abi.c"]),
    ("flows", 4, ["include/pcpu/flows.h", "src/core/flows.c", "src/core/flows_stable_abi.c"]),
    ("rwlock", 4, ["include/pcpu/rwlock.h", "src/core/rwlock.c", "src/core/rwlock_stable_abi.c",
                   "src/core/rwlock_internal.h", "src/core/rwlock_readers.c"]),
    ("objcache", 4, [
        "include/pcpu/objcache.h",
        "src/core/objcache.c", "src/core/objcache_stable_abi.c", "src/core/objcache_stats_hook.h",
    ]),
    # libpcpu's index for libpcpu-stats (FOLDERS): it includes the seam's
    # headers of every layer of the core, so it sits above them all.
    ("core.index", 4.5, ["src/core/core.h"]),
    # The statistics layer: names, messages and buffers; the metrics; the
    # writers of expositions (which read snapshot structs, pcpu/expose.h);
    # the registry (families, series, snapshots, collectors, merges), which
    # uses them all.
    ("stats.base", 5, [
        "include/pcpu/expose.h",
        "src/stats/stats_internal.h", "src/stats/validate.*", "src/stats/format.*",
        "src/stats/metric_type.c",
        "src/stats/arena.c", "src/stats/hashtab.*", "src/stats/histogram_layout.*",
        "src/stats/histogram_export.c",
    ]),
    ("stats.metrics", 6, [
        "include/pcpu/gauge.h", "include/pcpu/histogram.h", "include/pcpu/group.h",
        "include/pcpu/fraction.h", "src/stats/fraction.c",  # values with fractions
        "src/stats/metrics.h",
        "src/stats/stats_zone.c", "src/stats/gauge.c", "src/stats/histogram.c",
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
                            "src/segment/directory.c", "src/segment/tree.c",
                            "src/segment/tree_index.c", "src/segment/join.c"]),
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
                "hcounter", "flows", "core.index"},
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
#   src/core/core.h: the seam libpcpu-stats is built on (zone, fork, error
#     and tree internals, exported in libpcpu's PCPU_PRIVATE node only);
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
        for kind, name in INCLUDE_RE.findall(text):
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


def nm(obj):
    """nm -P of an object file, once per file and version of it."""
    st = os.stat(obj)
    key = (os.path.realpath(obj), st.st_mtime_ns, st.st_size)
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


def python_calls(src):
    """The C functions the Python reader calls by name (ctypes)."""
    text = open(os.path.join(src, "python", "src", "pcpu", "_lib.py"), encoding="utf-8").read()
    return sorted(set(re.findall(r'^\s*\("(pcpu_[a-z0-9_]+)"', text, re.M)))


# ---- the rules ------------------------------------------------------------------
class BuildMissing(Exception):
    pass


def check(src, build):
    """Every violation in the tree `src` built in `build`: (problems, summary)."""
    problems, unmapped = [], set()
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
