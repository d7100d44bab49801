#!/usr/bin/env python3
"""Documentation links and figures that cannot rot.

usage: check_links.py SOURCE_DIR

1. Every relative link of README.md, docs/*.md, bench/*.md, python/README.md
   and tests/docs/README.md points to a file that exists, and a `#anchor`
   to a heading of that file (GitHub's rule: lower case, punctuation but
   `-` and `_` dropped, spaces as `-`, a repeated heading numbered -1, -2).
2. Every figure of the README's "Figures" table is in bench/README.md's
   index, and every figure of that index is in the file its row links to:
   a figure quoted to users is one a benchmark printed and bench/ records.
   A figure is a number with a decimal point or a range (`0.96-1.05`,
   `16.27`, `2.58`), or a whole number of three digits or more (`307`).
   A range summarises several runs or rows, so each of its ends must be
   there; a number is there when the file has it, or has a number with
   more decimals that rounds to it (a table's 1.82 for a summary's 1.8).
Prints every problem; exit status 1 if any.
"""
import glob
import os
import re
import sys

src = sys.argv[1] if len(sys.argv) > 1 else "."
problems = []


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def lines_outside_code(text):
    fence = False
    for n, line in enumerate(text.split("\n"), 1):
        if re.match(r"^(```|~~~)", line):
            fence = not fence
            continue
        if not fence:
            yield n, line


def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path):
    seen, out = {}, set()
    for _, line in lines_outside_code(read(path)):
        m = re.match(r"^#+ (.*)$", line)
        if m:
            s = slug(m.group(1))
            k = seen.get(s, 0)
            seen[s] = k + 1
            out.add(s if k == 0 else "%s-%d" % (s, k))
    return out


def check_links(path):
    rel = os.path.relpath(path, src)
    for n, line in lines_outside_code(read(path)):
        for m in re.finditer(r"\]\(([^)\s]+)\)", line):
            url = m.group(1)
            if re.match(r"^[a-z]+:", url):
                continue
            target, _, anchor = url.partition("#")
            full = os.path.normpath(os.path.join(os.path.dirname(path), target)) if target else path
            if not os.path.exists(full):
                problems.append("%s:%d: %s: no such file" % (rel, n, url))
            elif anchor and full.endswith(".md") and anchor not in anchors(full):
                problems.append("%s:%d: %s: no such heading in %s" % (rel, n, url, os.path.relpath(full, src)))


FIGURE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)+|\d+\.\d+|\d{3,})(?!\.?\d)")
NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")


def numbers(text):
    return {n.replace(",", "") for n in NUMBER.findall(text)}


def recorded(figure, nums):
    """Every end of `figure` is one of `nums`, or rounds from one of them."""
    for end in figure.split("-"):
        d = len(end.partition(".")[2])
        if end in nums:
            continue
        if not any(len(n.partition(".")[2]) > d and "%.*f" % (d, float(n)) == end for n in nums):
            return False
    return True


def figures(cell):
    cell = re.sub(r"`[^`]*`", "", cell)      # names, not figures (pcpu_bench, 10^6 in code)
    cell = re.sub(r"10\^\d+", "", cell)      # magnitudes in words ("10^6 counters")
    return [f for f in FIGURE.findall(cell)]


def table_after(text, heading):
    """The rows of the first table after `heading`, as lists of cells."""
    i = text.find("\n" + heading + "\n")
    if i < 0:
        return None
    rows, started = [], False
    for line in text[i + len(heading) + 2:].split("\n"):
        if line.startswith("|"):
            started = True
            if not re.match(r"^\|[-| :]+\|$", line):
                rows.append([c.strip() for c in line.strip("|").split("|")])
        elif started or line.startswith("#"):
            break
    return rows[1:]  # without the header row


def check_figures():
    readme, index_path = os.path.join(src, "README.md"), os.path.join(src, "bench", "README.md")
    index = read(index_path)
    index_nums = numbers(index)
    rows = table_after(read(readme), "## Figures")
    if not rows:
        problems.append("README.md: no table under '## Figures'")
        return
    nfig = 0
    for row in rows:
        for f in figures(" ".join(row)):
            nfig += 1
            if not recorded(f, index_nums):
                problems.append("README.md, Figures: %s (%s) is not in bench/README.md's index" % (f, row[0]))
    if nfig < 10:
        problems.append("README.md, Figures: only %d figures found: extraction broken?" % nfig)
    irows = table_after(index, "## Figures and where they come from")
    if not irows:
        problems.append("bench/README.md: no table under '## Figures and where they come from'")
        return
    for row in irows:
        m = re.search(r"\]\(([^)#]+)", row[1]) if len(row) > 1 else None
        if not m:
            problems.append("bench/README.md: row %r links no file" % row[0])
            continue
        path = os.path.join(src, "bench", m.group(1))
        if not os.path.exists(path):
            continue  # reported by the link check
        nums = numbers(read(path))
        for f in figures(row[0]):
            if not recorded(f, nums):
                problems.append("bench/README.md: %s (%s) is not in %s" % (f, row[0], m.group(1)))


files = [os.path.join(src, "README.md"), os.path.join(src, "python", "README.md"),
         os.path.join(src, "tests", "docs", "README.md")]
files += sorted(glob.glob(os.path.join(src, "docs", "*.md")))
files += sorted(glob.glob(os.path.join(src, "bench", "*.md")))
for path in files:
    if os.path.exists(path):
        check_links(path)
check_figures()
for p in problems:
    print("FAIL:", p)
print("check_links: %d file(s), %d problem(s)" % (len(files), len(problems)))
sys.exit(1 if problems else 0)
