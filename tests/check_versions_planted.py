#!/usr/bin/env python3
"""The version test catches a copy out of step: planted, one at a time, in a copy.

usage: check_versions_planted.py SOURCE_DIR

tests/check_versions.py (ctest versions) holds every copy of a version
number to its one source. A copy it does not read is a copy no test checks
(issue 62: the push delta file's version and the Rust crate's copy of the
inline layout were two). This test copies the files that test reads to a
scratch folder, changes one copy at a time (the source stays), runs
check_versions.check() on the copy and requires a new problem that names
the changed file and what is out of step. Run by ctest (versions_planted).
"""
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_versions  # noqa: E402

# What check_versions reads: these files, and the trees it walks for a
# version of their own and for SOVERSIONs (every CMakeLists.txt).
FILES = ["CMakeLists.txt", "python/src/pcpu/__init__.py", "python/pyproject.toml",
         "debian/changelog", "debian/control", "rust/Cargo.toml", "rust/pcpu-sys/Cargo.toml",
         "rust/pcpu/Cargo.toml", "rust/pcpu-sys/src/lib.rs", "src/segment/format.h",
         "docs/segment-format.md", "go/segment/format.go", "tools/push_delta.c",
         "tests/push/test_push_delta.c"]
TREES = ["include", "src", "tools", "compat", "python/src"]

# (name, file, pattern, replacement, words a new problem must contain): the
# first match of the pattern replaced by the replacement.
PLANTS = [
    ("the Rust crate's copy of the inline layout",
     "rust/pcpu-sys/src/lib.rs", r"(pub const PCPU_INLINE_LAYOUT: u32 = )\d+;", r"\g<1>99;",
     ["rust/pcpu-sys/src/lib.rs", "PCPU_INLINE_LAYOUT 99"]),
    ("the inline layout raised, its Rust copy not",
     "CMakeLists.txt", r"(set\(PCPU_LAYOUT )\d+\)", r"\g<1>99)",
     ["rust/pcpu-sys/src/lib.rs", "PCPU_LAYOUT is 99"]),
    ("the push delta file's version raised, its copies not",
     "tools/push_delta.c", r"(#define DELTA_FILE_VERSION )\d+", r"\g<1>99",
     ["tests/push/test_push_delta.c", "DELTA_FILE_VERSION is 99"]),
    ("the push delta file's magic in its comment",
     "tools/push_delta.c", r'(/\* "PCPUDLT\\)\d+', r"\g<1>98",
     ["tools/push_delta.c: the struct's magic is 98"]),
    ("the push delta test's list of earlier versions",
     "tests/push/test_push_delta.c", r'("PCPUDLT\\1", )', "",
     ["tests/push/test_push_delta.c: the earlier magics are"]),
    ("the Python package's version",
     "python/src/pcpu/__init__.py", r'(__version__ = ")[^"]+"', r'\g<1>9.9.9"',
     ["python/src/pcpu/__init__.py: __version__ 9.9.9"]),
    ("the Go reader's copy of the segment format's major",
     "go/segment/format.go", r"(versionMajor\s*=\s*)\d+", r"\g<1>99",
     ["go/segment/format.go: versionMajor 99"]),
]


def main():
    src = os.path.abspath(sys.argv[1])
    scratch = tempfile.mkdtemp(prefix="pcpu-versions-")
    try:
        for rel in FILES:
            if os.path.exists(os.path.join(src, rel)):
                os.makedirs(os.path.dirname(os.path.join(scratch, rel)), exist_ok=True)
                shutil.copy(os.path.join(src, rel), os.path.join(scratch, rel))
        for rel in TREES:
            shutil.copytree(os.path.join(src, rel), os.path.join(scratch, rel), dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.o"))
        baseline = set(check_versions.check(scratch))
        print("the copy before any plant: %d problem(s)%s" % (
            len(baseline), " (versions fails on the tree itself)" if baseline else ""))
        missed = 0
        for name, rel, pattern, repl, words in PLANTS:
            path = os.path.join(scratch, rel)
            with open(path, encoding="utf-8") as fh:
                old = fh.read()
            new, n = re.subn(pattern, repl, old, count=1)
            if n != 1:
                sys.exit("check_versions_planted: %s: no match for %r in %s" % (name, pattern, rel))
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(new)
            found = [p for p in check_versions.check(scratch) if p not in baseline]
            hits = [p for p in found if all(w in p for w in words)]
            if hits:
                print("caught: %s\n    %s" % (name, hits[0]))
            else:
                missed += 1
                print("MISSED: %s (wanted a problem with %s; new problems: %s)"
                      % (name, words, found or "none"))
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(old)
        print("%d planted mismatches, %d caught, %d missed" % (len(PLANTS), len(PLANTS) - missed,
                                                              missed))
        return 1 if missed else 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
