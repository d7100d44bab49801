#!/usr/bin/env python3
"""Average words per sentence of Markdown prose (issue 39: the README read
at 40 words per sentence; liburcu's reads at 22).

usage: sentence_length.py FILE.md...

Fenced code, tables and headings are left out. A paragraph or a list item
is one run of text; it is split into sentences after `.`, `!` or `?`
followed by a space and a capital, a backquote, `(`, `*` or `[`
("e.g." and the like do not end one). Words are runs of non-space
characters, so `pcpu_counter_add(c, v)` counts as two. With
--no-lists, list items (and so a contents list) are left out too.
"""
import re
import sys


def prose(text, lists=True):
    out, para, fence = [], [], False
    for line in text.split("\n"):
        if re.match(r"^(```|~~~)", line):
            fence = not fence
            continue
        s = line.strip()
        if fence:
            continue
        if not s or s.startswith(("#", "|")):
            if para:
                out.append(" ".join(para))
                para = []
            continue
        if re.match(r"^([-*]|\d+\.)\s", s) and para:
            out.append(" ".join(para))
            para = []
        para.append(s)
    if para:
        out.append(" ".join(para))
    if not lists:
        out = [p for p in out if not re.match(r"^([-*]|\d+\.)\s", p)]
    return out


def sentence_lengths(paras):
    lengths = []
    for p in paras:
        p = re.sub(r"\b(e\.g|i\.e|etc|vs|cf)\.", r"\1", p)
        for s in re.split(r"(?<=[.!?])\s+(?=[A-Z`(*\[])", p):
            if s.split():
                lengths.append(len(s.split()))
    return lengths


def main():
    args = [a for a in sys.argv[1:] if a != "--no-lists"]
    lists = "--no-lists" not in sys.argv
    for path in args:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        n = sentence_lengths(prose(text, lists))
        print("%s: %d lines, %d sentences, %d words, %.1f words per sentence"
              % (path, len(text.splitlines()), len(n), sum(n), sum(n) / max(len(n), 1)))


if __name__ == "__main__":
    main()
