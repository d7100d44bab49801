#!/usr/bin/env python3
"""Lay out src/ by library: libpcpu's files go to src/core/ (issue 53, section 1).

usage: scripts/dev/relayout.py [REPO]     (REPO: default, this checkout)

`git status` / `git diff` show what it did; `git reset --hard` undoes it.

The mechanical part of the layout, written as a script so that it can be
run again on a tree that changed meanwhile (a merge of branches written
against the old layout): it is idempotent, and on a tree already laid out
it changes nothing and says so. It prints every move and every rewrite.

1. Moves every plain file directly under src/ (libpcpu's sources, private
   headers and its version script src/pcpu.map; a file added later, such as
   a new src/fraction.c, too) into src/core/, with `git mv` where git tracks
   it. src/stats/, src/segment/, src/exporter/ stay where they are.
2. Rewrites the quoted includes (#include "...") of every C and C++ file of
   the tree (src/, include/, tests/, tools/, bench/, examples/,
   integrations/, compat/, rust/, python/, go/) whose target moved: an
   include is resolved as the compiler resolved it before the move (against
   the including file's old folder, then against src/, which the library
   and some tests have on their include path) and rewritten relative to the
   file's new folder; an include that still resolves is left alone.
3. Rewrites the path references `src/NAME` of a moved file to
   `src/core/NAME` in every other text file git tracks (CMake lists,
   cmake/*.cmake, shell and Python tests, rust/pcpu-sys/build.rs, docs,
   comments), except CHANGELOG.md (history); and the two globs of
   rust/pcpu-sys/build.rs that name the core's folder.
4. Where a library folder has its index header (src/<lib>/<lib>.h, e.g.
   src/stats/stats.h: the one header of the folder a higher layer may
   include, tests/check_layers.py), a file of another src/ folder that
   includes a header the index includes gets the index instead (once).
   src/core/core.h includes no header of its folder (it declares the seam
   itself): an include of a core header it replaced (fork.h, zone_backing.h
   and the like, gone since) is left for the compiler to point out.
"""
import os
import re
from fnmatch import fnmatch
import subprocess
import sys

CORE = "src/core"
C_EXT = (".c", ".h", ".cc", ".cpp", ".hpp", ".h.in", ".inc")
C_TOPS = ("src", "include", "tests", "tools", "bench", "examples", "integrations", "compat",
          "rust", "python", "go")
SKIP_TEXT = {"CHANGELOG.md", "scripts/dev/relayout.py"}
GLOB_RE = re.compile(r"(?<![\w.-])src/((?:\w*\*\w*\.\w+|\w+\.\*))(?![\w/*])")
INCLUDE_RE = re.compile(r'^(\s*#\s*include\s*)"([^"]+)"(.*)$')

args = sys.argv[1:]
ROOT = os.path.abspath(args[0] if args else
                       os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
changes = 0


def say(msg):
    global changes
    changes += 1
    print(msg)


def exists(rel):
    return os.path.isfile(os.path.join(ROOT, rel))


def tracked(rel):
    return subprocess.run(["git", "-C", ROOT, "ls-files", "--error-unmatch", rel],
                          capture_output=True).returncode == 0


def write(rel, text):
    with open(os.path.join(ROOT, rel), "w", encoding="utf-8", errors="surrogateescape") as fh:
        fh.write(text)


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8", errors="surrogateescape") as fh:
        return fh.read()


# ---- 1. the moves -----------------------------------------------------------------
def move_core():
    os.makedirs(os.path.join(ROOT, CORE), exist_ok=True)
    for name in sorted(os.listdir(os.path.join(ROOT, "src"))):
        old = "src/" + name
        if not os.path.isfile(os.path.join(ROOT, old)) or os.path.islink(os.path.join(ROOT, old)):
            continue
        new = CORE + "/" + name
        if exists(new):
            sys.exit("relayout: both %s and %s exist: merge them by hand first" % (old, new))
        say("move     %s -> %s" % (old, new))
        if tracked(old):
            subprocess.run(["git", "-C", ROOT, "mv", old, new], check=True)
        else:
            os.rename(os.path.join(ROOT, old), os.path.join(ROOT, new))


def core_names():
    """Every file of src/core/ (a moved one, now or by an earlier run)."""
    d = os.path.join(ROOT, CORE)
    return {n for n in os.listdir(d) if os.path.isfile(os.path.join(d, n))} if os.path.isdir(d) else set()


def files_under(tops, exts=None):
    out = subprocess.run(["git", "-C", ROOT, "ls-files", "-co", "--exclude-standard", "--"] + list(tops),
                         capture_output=True, text=True, check=True).stdout.split("\n")
    for rel in sorted(set(out)):
        if rel and exists(rel) and not os.path.islink(os.path.join(ROOT, rel)):
            if exts is None or rel.endswith(exts):
                yield rel


# ---- 2. the includes ------------------------------------------------------------------
def old_location(rel, names):
    """Where a file was before the move (src/core/X was src/X)."""
    if rel.startswith(CORE + "/") and rel[len(CORE) + 1:] in names:
        return "src/" + rel[len(CORE) + 1:]
    return rel


def new_location(rel, names):
    """Where a file of the old layout is now (src/X is src/core/X)."""
    if rel.startswith("src/") and rel.count("/") == 1 and rel[4:] in names:
        return CORE + "/" + rel[4:]
    return rel


def rewrite_includes(names):
    for rel in files_under(C_TOPS, C_EXT):
        text = read(rel)
        here = os.path.dirname(rel)
        was = os.path.dirname(old_location(rel, names))
        lines, changed = text.split("\n"), False
        for i, line in enumerate(lines):
            m = INCLUDE_RE.match(line)
            if not m:
                continue
            name = m.group(2)
            if exists(os.path.normpath(os.path.join(here, name))):
                continue  # resolves as it is
            # As the compiler found it before the move: beside the file, then src/.
            target = None
            for base in (was, "src"):
                old = os.path.normpath(os.path.join(base, name))
                new = new_location(old, names)
                if exists(new):
                    target = new
                    break
            if target is None:
                continue  # generated, or found through another include path
            if base == "src" and not rel.startswith("src/"):
                repl = os.path.relpath(target, "src")  # through -I src, as before
            else:
                repl = os.path.relpath(target, here)
            if repl == name:
                continue
            lines[i] = '%s"%s"%s' % (m.group(1), repl, m.group(3))
            changed = True
            say("include  %s: \"%s\" -> \"%s\"" % (rel, name, repl))
        if changed:
            write(rel, "\n".join(lines))


# ---- 3. the path references ---------------------------------------------------------
def rewrite_paths(names):
    if not names:
        return
    alt = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    # src/NAME, not a longer name (src/fork.hpp) nor a word's tail (csrc/...).
    ref = re.compile(r"(?<![\w.-])src/(%s)(?!\w|\.\w)" % alt)
    buildrs = "rust/pcpu-sys/build.rs"
    for rel in files_under(["."]):
        if rel in SKIP_TEXT:
            continue
        try:
            text = read(rel)
        except (UnicodeDecodeError, IsADirectoryError):
            continue
        if "\0" in text:
            continue
        new = text
        # A path under another src/ (compat/prometheus-cpp/src/, python/src/,
        # rust/*/src/) is not the repository's.
        new = ref.sub(lambda m: m.group(0) if _foreign(m) else "src/core/" + m.group(1), new)
        # A glob of core files: src/zone_*.h, src/fork.*, src/*_stable_abi.c.
        new = GLOB_RE.sub(lambda m: m.group(0) if _foreign(m) or not any(
            fnmatch(n, m.group(1)) for n in names) else "src/core/" + m.group(1), new)
        if rel == buildrs:
            new = new.replace('c_files(&root.join("src"), &[])', 'c_files(&root.join("src/core"), &[])')
        if new != text:
            count = sum(1 for a, b in zip(text.split("\n"), new.split("\n")) if a != b)
            say("paths    %s: %d line(s)" % (rel, count))
            write(rel, new)


def _foreign(m):
    """Whether the src/ matched is another tree's (compat/prometheus-cpp/src/...)."""
    s, start = m.string, m.start()
    if start == 0 or s[start - 1] != "/":
        return False
    # The path segment before /src: a variable (${PROJECT_SOURCE_DIR}, $SRC,
    # $src, ROOT) or `csrc`/`..` means the repository's root; a word such as
    # prometheus-cpp, python or pcpu means another tree.
    before = re.search(r"([\w.${}-]*)/$", s[max(0, start - 80):start]).group(1)
    return not (before.startswith("$") or before.endswith("}") or before in ("csrc", "..", ".", "")
                or before.isupper())


# ---- 4. the index headers ---------------------------------------------------------------
def rewrite_to_index():
    for lib in sorted(os.listdir(os.path.join(ROOT, "src"))):
        folder = "src/" + lib
        index = "%s/%s.h" % (folder, lib)
        if not exists(index):
            continue
        members = {index}
        for line in read(index).split("\n"):
            m = INCLUDE_RE.match(line)
            if m:
                members.add(os.path.normpath(os.path.join(folder, m.group(2))))
        for rel in files_under(["src"], C_EXT):
            if rel.startswith(folder + "/"):
                continue
            here = os.path.dirname(rel)
            lines, out, have, changed = read(rel).split("\n"), [], False, False
            for line in lines:
                m = INCLUDE_RE.match(line)
                target = m and os.path.normpath(os.path.join(here, m.group(2)))
                if target in members:
                    repl = os.path.relpath(index, here)
                    if have:
                        say("index    %s: \"%s\" dropped (%s is included)" % (rel, m.group(2), repl))
                        changed = True
                        continue
                    have = True
                    if m.group(2) != repl:
                        say("index    %s: \"%s\" -> \"%s\"" % (rel, m.group(2), repl))
                        line = '%s"%s"' % (m.group(1), repl)
                        changed = True
                out.append(line)
            if changed:
                write(rel, "\n".join(out))


def main():
    move_core()
    names = core_names()
    rewrite_includes(names)
    rewrite_paths(names)
    rewrite_to_index()
    print("relayout: %s" % ("%d change(s)" % changes if changes
                            else "nothing to do: the tree is laid out"))


if __name__ == "__main__":
    main()
