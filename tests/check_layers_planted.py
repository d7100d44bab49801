#!/usr/bin/env python3
"""The layer test catches each kind of break: planted, one at a time, in a copy.

usage: check_layers_planted.py SOURCE_DIR BUILD_DIR [CC]

tests/check_layers.py (ctest layer_check) guards the layers, the library
folders' boundaries and the files' length. A guard that misses a kind of
break is worse than none (issue 53: the test before it caught 6 of 11
planted breaks; it missed every include of a core-private header and of the
statistics folder's headers). This test copies the product trees to a
scratch folder, plants each break below in the copy (an include, a call
between object files, a long file, a file in no layer, a private function
called from Python), runs check_layers.check() on it, and requires a new
problem that names the planted edge and the rule it breaks. The copy's own
problems before any plant (if layer_check fails on the tree itself) are
left out of the comparison, so that each plant is judged alone.

Calls are planted as extra object files, compiled with CC (default cc):
one that defines a function in the name of a lower layer's file and calls
a higher layer's, beside the real objects of a scratch build folder made of
links to BUILD_DIR's. Run by ctest (layer_check_planted).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_layers  # noqa: E402

COPIED = ["src", "include", "tools", "compat", "go", "integrations", "python/src", "bench",
          "examples"]
COPIED_FILES = ["CMakeLists.txt", "docs/layout.md"]
IGNORED = shutil.ignore_patterns("target", "__pycache__", "testdata", "*.o", ".git")


def include_plant(path, line):
    return ("append", path, "\n" + line + "\n")


# (name, edits, words a new problem must contain). An edit: ("append", file,
# text), ("create", file, text), ("resub", file, pattern, replacement): the
# first match of a regular expression replaced, or ("object", source,
# defines, calls): an object file of `source` that defines function
# `defines` and calls `calls` ("defined-in:FILE": a function that file's
# object defines; "private": one of libpcpu's private interface; "hidden":
# one the libraries define and do not export).
PLANTS = [
    ("stats includes a core-private header",
     [include_plant("src/stats/gauge.c", '#include "../core/zone_internal.h"')],
     ["src/stats/gauge.c -> src/core/zone_internal.h", "private to src/core/"]),
    ("stats includes a core-private header through the include path (-I src)",
     [include_plant("src/stats/histogram.c", '#include "core/zone_mirror.h"')],
     ["src/stats/histogram.c -> src/core/zone_mirror.h", "private to src/core/"]),
    ("stats includes a core-private header with <>",
     [include_plant("src/stats/merge.c", "#include <core/slot_walk.h>")],
     ["src/stats/merge.c -> src/core/slot_walk.h", "private to src/core/"]),
    ("segment includes a stats-private header",
     [include_plant("src/segment/reader_parse.c", '#include "../stats/registry.h"')],
     ["src/segment/reader_parse.c -> src/stats/registry.h", "private to src/stats/"]),
    ("segment includes a header the stats index offers, not the index",
     [include_plant("src/segment/names.c", '#include "../stats/hashtab.h"')],
     ["src/segment/names.c -> src/stats/hashtab.h", "private to src/stats/"]),
    ("core includes a stats header",
     [include_plant("src/core/zone.c", '#include "../stats/stats_internal.h"')],
     ["src/core/zone.c -> src/stats/stats_internal.h", "upward"]),
    ("core includes the stats index",
     [include_plant("src/core/counter.c", '#include "../stats/stats.h"')],
     ["src/core/counter.c -> src/stats/stats.h", "upward"]),
    ("core includes a segment header",
     [include_plant("src/core/worker.c", '#include "../segment/format.h"')],
     ["src/core/worker.c -> src/segment/format.h", "private to src/segment/"]),
    ("the exporter includes the core's index (libpcpu-stats' alone)",
     [include_plant("src/exporter/gzip.c", '#include "../core/core.h"')],
     ["src/exporter/gzip.c -> src/core/core.h", "index for"]),
    ("a tool includes a segment-private header",
     [include_plant("tools/pcpustat.c", '#include "../src/segment/segment_internal.h"')],
     ["tools/pcpustat.c -> src/segment/segment_internal.h", "private to src/segment/"]),
    ("a public header includes a private one",
     [include_plant("include/pcpu/gauge.h", '#include "../../src/core/zone_internal.h"')],
     ["include/pcpu/gauge.h -> src/core/zone_internal.h", "private to src/core/"]),
    ("the core includes a higher layer's public header",
     [include_plant("src/core/rseq.c", "#include <pcpu/stats.h>")],
     ["src/core/rseq.c -> include/pcpu/stats.h", "upward"]),
    ("an upward call: the core calls the registry",
     [("object", "src/core/version.c", "pcpu_planted_up", "defined-in:src/stats/registry.c")],
     ["src/core/version.c -> src/stats/registry.c (symbol", "upward"]),
    ("a sideways call: ref calls rwlock",
     [("object", "src/core/ref.c", "pcpu_planted_side", "defined-in:src/core/rwlock.c")],
     ["src/core/ref.c -> src/core/rwlock.c (symbol", "sideways"]),
    ("two files that call each other",
     [("object", "src/stats/gauge.c", "pcpu_planted_loop_g", "pcpu_planted_loop_h"),
      ("object", "src/stats/histogram.c", "pcpu_planted_loop_h", "pcpu_planted_loop_g")],
     ["src/stats/gauge.c -> src/stats/histogram.c (loop)", "call each other"]),
    ("a tool calls libpcpu's private interface",
     [("object", "tools/pcpustat.c", "pcpu_planted_tool", "private")],
     ["tools/pcpustat.c -> src/core/", "private interface"]),
    ("the Python reader calls a private function",
     [("append", "python/src/pcpu/_lib.py", '\n_PLANTED = [\n    ("pcpu__zone_tree_adopt", None, []),\n]\n')],
     ["python/src/pcpu/_lib.py -> pcpu__zone_tree_adopt", "private function"]),
    ("a file over the line limit",
     [("append", "src/stats/merge.c", "/* planted */\n" * (check_layers.LINE_LIMIT + 10))],
     ["src/stats/merge.c:", "over %d" % check_layers.LINE_LIMIT]),
    ("a new core file in no layer",
     [("create", "src/core/fraction.c", '#include "core.h"\n')],
     ["src/core/fraction.c: in no layer"]),
    # The seam: core.h's declarations, the private node, libpcpu-stats' imports.
    ("the seam: core.h declares a function the private node does not export",
     [("append", "src/core/core.h", "PCPU_PRIVATE int pcpu__planted_declared(void);\n")],
     ["src/core/core.h declares pcpu__planted_declared", "does not export"]),
    ("the seam: the private node exports a function core.h does not declare",
     [("resub", "src/core/pcpu.map", r"(PCPU_PRIVATE_\S* \{\s*global:\n)",
       r"\1    pcpu__planted_exported;\n")],
     ["exports pcpu__planted_exported", "core.h does not declare"]),
    ("the seam: libpcpu-stats imports a private function core.h does not declare",
     [("resub", "src/core/core.h", r"PCPU_PRIVATE uint32_t pcpu__worker_claims_held\(void\);", "")],
     ["libpcpu-stats.so imports pcpu__worker_claims_held", "core.h does not declare"]),
    # Who owns each public header (docs/layout.md's table).
    ("a libpcpu header includes a libpcpu-stats header",
     [include_plant("include/pcpu/counter.h", "#include <pcpu/gauge.h>")],
     ["include/pcpu/counter.h:", "(libpcpu) includes include/pcpu/gauge.h (libpcpu-stats)"]),
    ("CMake installs a header with another package than its owner's",
     [("resub", "CMakeLists.txt", r"(set\(PCPU_STATS_PUBLIC_HEADERS[^)]*?) fraction\.h", r"\1")],
     ["include/pcpu/fraction.h:", "CMake installs it with pcpu-dev"]),
    ("a public header in no row of the owners' table",
     [("create", "include/pcpu/planted.h", "/* planted */\n")],
     ["include/pcpu/planted.h: no row"]),
    # A port is its header.
    ("an architecture #if outside the arch headers",
     [("append", "src/core/torn64.h", "#if defined(__aarch64__)\n#endif\n")],
     ["src/core/torn64.h:", "architecture #if (__aarch64__)"]),
    # The consumers use the public API.
    ("nginx's module includes a library-private header",
     [include_plant("integrations/nginx/ngx_http_pcpu_module.c", '#include "../../src/core/core.h"')],
     ["integrations/nginx/ngx_http_pcpu_module.c -> src/core/core.h", "private header"]),
    ("a benchmark includes a library-private header",
     [include_plant("bench/incr.c", '#include "../src/stats/registry.h"')],
     ["bench/incr.c -> src/stats/registry.h", "private header"]),
    ("an example includes a library-private header through -I src",
     [include_plant("examples/counters.c", "#include <segment/format.h>")],
     ["examples/counters.c -> src/segment/format.h", "private header"]),
    ("a benchmark built from a library's source",
     [("append", "bench/CMakeLists.txt",
       "target_sources(pcpu_bench PRIVATE ${PROJECT_SOURCE_DIR}/src/core/zone.c)\n")],
     ["bench/CMakeLists.txt:", "libraries' sources"]),
    ("a benchmark calls libpcpu's private interface",
     [("object", "bench/incr.c", "pcpu_planted_bench", "private")],
     ["bench/incr.c -> pcpu__", "private interface"]),
    ("an example calls a function the libraries hide",
     [("object", "examples/counters.c", "pcpu_planted_example", "hidden")],
     ["examples/counters.c -> pcpu_", "a library internal"]),
    ("nginx's module calls libpcpu's private interface",
     [("object", "integrations/nginx/ngx_http_pcpu_tree.c", "pcpu_planted_ngx", "private")],
     ["integrations/nginx/ngx_http_pcpu_tree.c -> pcpu__", "private interface"]),
    ("a Rust crate declares libpcpu's private function",
     [("append", "rust/pcpu/src/registry.rs",
       'extern "C" {\n    fn pcpu__zone_is_tree(zone: *const u8) -> i32;\n}\n')],
     ["rust/pcpu/src/registry.rs -> pcpu__zone_is_tree", "private interface"]),
    ("a Rust crate declares a function the libraries hide",
     [("append", "rust/pcpu-bench/src/lib.rs",
       'extern "C" {\n    fn pcpu_default_zone() -> *mut u8;\n}\n')],
     ["rust/pcpu-bench/src/lib.rs -> pcpu_default_zone", "a library internal"]),
    ("the Go reader uses cgo",
     [("append", "go/segment/format.go", '\nimport "C"\n')],
     ['go/segment/format.go: imports "C"']),
]


def link_build(build, into):
    """A scratch build folder: links to BUILD's objects and shared objects."""
    bases = [os.path.join("CMakeFiles", d) for d in
             ("pcpu_static.dir", "pcpu_stats_static.dir", "pcpu_exporter.dir")]
    bases += ["tools/CMakeFiles", "compat/prometheus-cpp/CMakeFiles"]
    for base in bases:
        for root, _, files in os.walk(os.path.join(build, base)):
            for f in files:
                if f.endswith(".o"):
                    full = os.path.join(root, f)
                    dest = os.path.join(into, os.path.relpath(full, build))
                    os.makedirs(os.path.dirname(dest), exist_ok=True)
                    os.symlink(full, dest)
    for full, _ in check_layers.consumer_objects(build):
        dest = os.path.join(into, os.path.relpath(full, build))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        os.symlink(full, dest)
    for lib in check_layers.PRODUCT_LIBRARY.values():
        os.symlink(os.path.join(build, lib), os.path.join(into, lib))


def planted_object(fake, source):
    """Where a planted object of `source` goes: beside the real objects of
    its kind, where check_layers finds them and names them after `source`."""
    if source.startswith(("bench/", "examples/")):
        top, rest = source.split("/", 1)
        return os.path.join(fake, top, "CMakeFiles", "pcpu_planted.dir", rest + ".o")
    if source.startswith("integrations/nginx/"):
        return os.path.join(fake, "integrations", "nginx", "work", "ngx", "objs", "addon", "nginx",
                            os.path.basename(source)[:-2] + ".o")
    # pcpu_exporter.dir's objects are named by their source path, whatever
    # the folder.
    return os.path.join(fake, "CMakeFiles", "pcpu_exporter.dir", source + ".o")


def symbol_of(build, source, private=False, hidden=False):
    """A function the objects of `source` define (or, private: one of
    libpcpu's private interface; hidden: one the libraries define and do
    not export), to call from a planted object."""
    if private:
        nodes = check_layers.dynamic_symbols(build, "libpcpu.so")
        return sorted(n for n, v in nodes.items() if v.startswith("PCPU_PRIVATE"))[0]
    if hidden:
        exported = set()
        for lib in check_layers.PRODUCT_LIBRARY.values():
            exported |= set(check_layers.dynamic_symbols(build, lib))
        defined = check_layers.library_definitions(build)
        return sorted(n for n in defined if n not in exported)[0]
    for obj, src in check_layers.object_files(build):
        if src == source:
            for line in check_layers.nm(obj).splitlines():
                parts = line.split()
                if len(parts) >= 2 and parts[1] == "T" and parts[0].startswith("pcpu_"):
                    return parts[0]
    raise SystemExit("check_layers_planted: no function defined in %s's object" % source)


def main():
    src, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    cc = sys.argv[3] if len(sys.argv) > 3 else "cc"
    scratch = tempfile.mkdtemp(prefix="pcpu-planted-")
    try:
        tree, fake = os.path.join(scratch, "tree"), os.path.join(scratch, "build")
        for d in COPIED:
            if os.path.isdir(os.path.join(src, d)):
                shutil.copytree(os.path.join(src, d), os.path.join(tree, d), ignore=IGNORED,
                                symlinks=True)
        for f in COPIED_FILES:
            os.makedirs(os.path.dirname(os.path.join(tree, f)) or tree, exist_ok=True)
            shutil.copy(os.path.join(src, f), os.path.join(tree, f))
        rust = os.path.join(src, "rust")
        for crate in sorted(os.listdir(rust)) if os.path.isdir(rust) else []:
            if os.path.isdir(os.path.join(rust, crate, "src")):
                shutil.copytree(os.path.join(rust, crate, "src"),
                                os.path.join(tree, "rust", crate, "src"), ignore=IGNORED)
        link_build(build, fake)
        try:
            baseline = set(check_layers.check(tree, fake)[0])
        except check_layers.BuildMissing as e:
            sys.exit(str(e))
        print("the copy before any plant: %d problem(s)%s" % (
            len(baseline), " (layer_check fails on the tree itself)" if baseline else ""))
        missed = 0
        for name, edits, words in PLANTS:
            undo = []
            for edit in edits:
                if edit[0] in ("append", "create", "resub"):
                    path = os.path.join(tree, edit[1])
                    old = open(path, encoding="utf-8").read() if edit[0] != "create" else None
                    undo.append((path, old, None))
                    if edit[0] == "resub":
                        new, n = re.subn(edit[2], edit[3], old, count=1)
                        if n != 1:
                            sys.exit("check_layers_planted: %s: no match for %r in %s"
                                     % (name, edit[2], edit[1]))
                    else:
                        new = (old or "") + edit[2]
                    with open(path, "w", encoding="utf-8") as fh:
                        fh.write(new)
                else:
                    _, source, defines, calls = edit
                    if calls in ("private", "hidden"):
                        calls = symbol_of(build, None, **{calls: True})
                    elif calls.startswith("defined-in:"):
                        calls = symbol_of(build, calls.split(":", 1)[1])
                    c = os.path.join(scratch, defines + ".c")
                    with open(c, "w") as fh:
                        fh.write("extern void %s(void);\nvoid %s(void) { %s(); }\n"
                                 % (calls, defines, calls))
                    obj = planted_object(fake, source)
                    os.makedirs(os.path.dirname(obj), exist_ok=True)
                    # A link to a real object there is put back after, never
                    # written through.
                    link = os.readlink(obj) if os.path.islink(obj) else None
                    if link:
                        os.remove(obj)
                    subprocess.run([cc, "-c", "-o", obj, c], check=True)
                    undo.append((obj, None, link))
            new = [p for p in check_layers.check(tree, fake)[0] if p not in baseline]
            hits = [p for p in new if all(w in p for w in words)]
            if hits:
                print("caught: %s\n    %s" % (name, hits[0]))
            else:
                missed += 1
                print("MISSED: %s (wanted a problem with %s; new problems: %s)" % (
                    name, words, new or "none"))
            for path, old, link in reversed(undo):
                if old is None:
                    os.remove(path)
                    if link:
                        os.symlink(link, path)
                else:
                    with open(path, "w", encoding="utf-8") as fh:
                        fh.write(old)
        print("%d planted breaks, %d caught, %d missed" % (len(PLANTS), len(PLANTS) - missed,
                                                          missed))
        return 1 if missed else 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
