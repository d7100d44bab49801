#!/usr/bin/env python3
"""Every public function states its thread safety and its cost.

Reads the public headers (include/pcpu/*.h and include/pcpu/compat/*.h; the
arch headers are implementation, not API) and finds each public function:
a PCPU_API declaration, or a file-scope `static inline` definition (also
under PCPU__INLINE_OP(), the inline tier's spelling) whose name starts with
`pcpu_` (not the internal `pcpu__`) or, in the counter(9) layer, `counter_`.
Its documentation is the comment that ends right above it, or above the run
of declarations it belongs to (one comment may document a group, e.g. the
fixed-width variants of one operation); where a function is declared in
several places (the stable tier's declaration and the inline definition),
one of them must pass.

A documentation passes when it says
  - thread safety: "Thread-safe", "Not thread-safe", "Thread safety" or
    "MT-safe" (any case), and
  - cost: "Cost" (any case),
or when it says the function behaves "as pcpu_other()" (or "like") and that function's
documentation passes (a convenience wrapper inherits its model's contract).

Prints every function that fails with what it lacks; exit status 1 if any.
Usage: check_public_docs.py [SOURCE_DIR]
"""
import os
import re
import sys

THREAD = re.compile(r"thread[- ]safe|thread safety|mt-safe", re.I)
COST = re.compile(r"\bcost", re.I)
AS_OTHER = re.compile(r"\b(?:as|like)\s+(?:\*\s+)?((?:pcpu|counter)_[a-z0-9_]+)\(\)", re.I)

# A public function's name at the start of a declaration or definition.
DECL = re.compile(r"^(?:PCPU_API\b[^;{(]*?|static\s+inline\b[^;{(]*?|"
                  r"__attribute__\(\(.*?\)\)\s*static\s+inline\b[^;{(]*?)"
                  r"(?:\bPCPU__INLINE_OP\()?"
                  r"\b((?:pcpu|counter)_[A-Za-z0-9_]+)\)?\s*\(")


def headers(root):
    out = []
    for sub in ("include/pcpu", "include/pcpu/compat"):
        d = os.path.join(root, sub)
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            if name.endswith(".h"):
                out.append(os.path.join(d, name))
    return out


def functions(path):
    """Yields (name, line number, documentation or None)."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    is_counter9 = os.path.basename(path).startswith("counter9")
    for i, line in enumerate(lines):
        m = DECL.match(line)
        if not m:
            continue
        name = m.group(1)
        if name.startswith("pcpu__"):
            continue
        if name.startswith("counter_") and not is_counter9:
            continue
        yield name, i + 1, doc_above(lines, i)


def doc_above(lines, i):
    """The comment that ends above line i, skipping the declarations of the
    same group (lines that are neither blank nor a comment end) and the
    conditionals that choose a tier; None if a blank line, a closing brace
    or another preprocessor line comes first."""
    j = i - 1
    while j >= 0:
        s = lines[j].strip()
        if s.endswith("*/"):
            k = j
            while k >= 0 and "/*" not in lines[k]:
                k -= 1
            if k < 0:
                return None
            text = "\n".join(lines[k:j + 1])
            # A trailing member comment (`int x; /**< ... */`) is no doc.
            if lines[k].split("/*")[0].strip():
                return None
            return text
        if s.startswith("#if") or s.startswith("#else") or s.startswith("#endif"):
            j -= 1  # the tiers of one function (PCPU_NO_INLINE or inline)
            continue
        if not s or s.startswith("#") or s.startswith("}"):
            return None
        j -= 1
    return None


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..")
    found = {}
    for path in headers(root):
        rel = os.path.relpath(path, root)
        for name, line, doc in functions(path):
            # Every place a function is declared or defined (the stable
            # tier's declaration and the inline definition, say); one
            # documentation that passes is enough.
            found.setdefault(name, []).append((rel, line, doc))
    if not found:
        print("check_public_docs: no public function found (wrong root?)")
        return 1

    def verdict(name, seen=()):
        best = None
        for _, _, doc in found[name]:
            lack = verdict_of(name, doc, seen)
            if best is None or len(lack) < len(best):
                best = lack
        return best

    def verdict_of(name, doc, seen):
        if doc is None:
            return ["no documentation comment"]
        lack = []
        if not THREAD.search(doc):
            lack.append("thread safety")
        if not COST.search(doc):
            lack.append("cost")
        if lack:
            for other in AS_OTHER.findall(doc):
                if other in found and other != name and other not in seen:
                    if not verdict(other, seen + (name,)):
                        return []
        return lack

    bad = 0
    for name in sorted(found, key=lambda n: found[n][0][:2]):
        lack = verdict(name)
        if lack:
            bad += 1
            rel, line, _ = found[name][0]
            print(f"{rel}:{line}: {name}(): lacks {', '.join(lack)}")
    print(f"check_public_docs: {len(found)} public functions, {bad} lacking")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
