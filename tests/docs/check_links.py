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
3. The manual pages (man/man3/*.3, tools/pcpustat.1; issue 50):
   - every reference to a page of pcpu's -- `name(3)` with a name that
     starts with pcpu, `pcpustat(1)` -- in a page, README.md, docs/,
     python/README.md, bench/*.md and the code's comments names a page
     that exists: a page's file name or a name its NAME section lists (the
     installed link pages); other pages' references are check_man.py's;
   - pcpu(3), the overview, lists every page of man/man3 in its
     DESCRIPTION;
   - a version of pcpu a page (its .TH line or its text), README.md,
     docs/ or python/README.md states is the project's, project() in
     CMakeLists.txt;
   - a figure a page gives as "N times" (or "N to M times") is in
     bench/README.md's index, as the README's figures are (2.).
4. A citation of a README's section by name -- README.md, "Guarantees";
   the README's "Figures"; python/README.md, "Finding libpcpu-stats";
   bench/README.md, "group add2" -- anywhere in the tree names a heading
   of that file (or a heading it starts: "Set-up" for "Set-up: two
   commands"). bench/README.md's also name a heading of a topic file of
   bench/, or a name its table "Where older references point" lists.
5. README.md has at most README_MAX_LINES lines (issue 62): a newcomer's
   page, with the reference material in docs/.
6. The Debian packages (debian/control; issue 62):
   - docs/install.md's package table has a row for each package, and no
     other;
   - a manual page that refers to a page of pcpu's installed by another
     package -- one its own package does not depend on, such as
     pcpu(3) in libpcpu-dev referring to libpcpu-stats-dev's pages -- names
     that package in the same paragraph (or list, under its heading), so
     that a reader who has only its package knows what to install. A page's
     package is its library's development package (its LIBRARY section's
     first line, as cmake/pcpuManLinks.cmake decides; the component's
     package in debian/rules), pcpustat(1)'s pcpu-tools.
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


# ---- 3. manual pages -------------------------------------------------------------
MAN3 = os.path.join(src, "man", "man3")
MAN1 = [os.path.join(src, "tools", "pcpustat.1")]


def page_sources():
    """(path, text) of every page written in the tree (link pages aside)."""
    out = []
    for path in sorted(glob.glob(os.path.join(MAN3, "*.3"))) + MAN1:
        text = read(path)
        if not text.startswith(".so "):
            out.append((path, text))
    return out


def roff_plain(line):
    """A source line with fonts and quotes gone and macro arguments joined
    (`.BR name (3),` -> `name(3),`)."""
    line = re.sub(r"\\f(?:\[[A-Z]*\]|\(..|.)", "", line)
    line = line.replace("\\-", "-").replace("\\(en", "-").replace("\\(em", "-").replace("\\&", "")
    if line.startswith("."):
        line = re.sub(r"^\.[A-Za-z]+\s*", "", line).replace('"', "")
        line = re.sub(r"\s+\((\d)", r"(\1", line)
    return line


def roff_text_lines(text):
    """(line number, text) of a page's source, roff_plain, with code
    (SYNOPSIS, .EX/.EE, .nf/.fi) and comments left out."""
    for block in roff_blocks(text, headings=False):
        yield from block


def roff_blocks(text, headings=True):
    """The page's text (roff_text_lines) by paragraph: a block starts at
    each .SH, .SS, .PP, .P and .LP, with the heading's text when headings;
    .TP and .IP entries stay in the block of the paragraph that leads
    their list."""
    section, code, block = "", False, []
    for n, line in enumerate(text.split("\n"), 1):
        if re.match(r"^\.(SH|SS|PP|P|LP)\b", line):
            if block:
                yield block
            block = []
            if line.startswith(".SH"):
                section = line[3:].strip().strip('"')
                code = False
            if headings and section != "SYNOPSIS" and line.startswith((".SH", ".SS")):
                block.append((n, roff_plain(line)))
            continue
        if line.startswith((".EX", ".nf")):
            code = True
        elif line.startswith((".EE", ".fi")):
            code = False
        if code or section == "SYNOPSIS" or line.startswith(('.\\"', "'\\\"")):
            continue
        block.append((n, roff_plain(line)))
    if block:
        yield block


def documented_pages():
    """{(name, section)} of the pages an install has: every page, and every
    name a man3 page's NAME section lists (its link page)."""
    names = {("pcpustat", "1")}
    for path, text in page_sources():
        if path.endswith(".3"):
            names.add((os.path.basename(path)[:-2], "3"))
            m = re.search(r"^\.SH NAME\n(.*?)\\-", text, re.S | re.M)
            if m:
                for n in m.group(1).replace("\n", " ").split(","):
                    if n.strip():
                        names.add((n.strip(), "3"))
    return names


# A command's page is section 1 (pcpustat(1)); a function's, section 3:
# `pcpu_counter_alloc_array(1)` in code is a call, not a reference.
def page_refs(line):
    for m in re.finditer(r"(?<![\w.])(pcpustat|pcpu)\((1)\)|(?<![\w.])(pcpu[a-z0-9_]*)\((3)\)", line):
        name, sec = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        yield name, sec


def check_page_references(documented):
    for path, text in page_sources():
        for n, line in roff_text_lines(text):
            for name, sec in page_refs(line):
                if (name, sec) not in documented:
                    problems.append("%s:%d: %s(%s): no such page" % (os.path.relpath(path, src), n, name, sec))
    others = [os.path.join(src, "README.md"), os.path.join(src, "python", "README.md")]
    others += glob.glob(os.path.join(src, "docs", "*.md")) + glob.glob(os.path.join(src, "bench", "*.md"))
    for sub in ("include", "src", "tools", "examples", "compat", "python/src"):
        for dirpath, _, fs in os.walk(os.path.join(src, sub)):
            others += [os.path.join(dirpath, f) for f in fs
                       if f.endswith((".h", ".c", ".cc", ".hpp", ".cpp", ".py"))]
    for path in sorted(others):
        for n, line in enumerate(read(path).split("\n"), 1):
            for name, sec in page_refs(line):
                if not name.startswith("pcpu__") and (name, sec) not in documented:
                    problems.append("%s:%d: %s(%s): no such page" % (os.path.relpath(path, src), n, name, sec))


def check_overview_index():
    overview = read(os.path.join(MAN3, "pcpu.3"))
    desc = overview.split("\n.SH DESCRIPTION\n", 1)[-1].split("\n.SH ", 1)[0]
    listed = set(re.findall(r"^\.BR (pcpu_[a-z0-9_]+) \(3\)", desc, re.M))
    for path, _ in page_sources():
        name = os.path.basename(path)
        if name.endswith(".3") and name != "pcpu.3" and name[:-2] not in listed:
            problems.append("man/man3/pcpu.3: DESCRIPTION does not list %s(3)" % name[:-2])


def project_version():
    m = re.search(r"^project\(pcpu VERSION (\d+\.\d+\.\d+)", read(os.path.join(src, "CMakeLists.txt")), re.M)
    return m.group(1) if m else None


# "pcpu 0.2.0", "libpcpu 0.2", "pcpustat version 0.2.0", "pcpu v0.2"
PCPU_VERSION = re.compile(r"\b(?:lib)?pcpu(?:stat|-stats|-prometheus)?(?: version)? v?(\d+\.\d+(?:\.\d+)?)\b(?![.\d])")


def check_versions(version):
    if not version:
        problems.append("CMakeLists.txt: no project(pcpu VERSION x.y.z)")
        return
    texts = [(p, read(p)) for p, _ in page_sources()]
    texts += [(p, read(p)) for p in [os.path.join(src, "README.md"), os.path.join(src, "python", "README.md")]
              + sorted(glob.glob(os.path.join(src, "docs", "*.md")))]
    for path, text in texts:
        for n, line in enumerate(text.split("\n"), 1):
            if line.startswith(".TH "):
                fields = re.findall(r'"[^"]*"|\S+', line)
                source = fields[4].strip('"') if len(fields) > 4 else ""
                m = re.search(r"\d+\.\d+(?:\.\d+)?", source)
                if m and m.group(0) not in (version, version.rsplit(".", 1)[0]):
                    problems.append("%s:%d: .TH says %r, the project is %s" %
                                    (os.path.relpath(path, src), n, source, version))
                continue
            for m in PCPU_VERSION.finditer(line.replace("\\-", "-")):
                if m.group(1) not in (version, version.rsplit(".", 1)[0]):
                    problems.append("%s:%d: %r: the project is %s" %
                                    (os.path.relpath(path, src), n, m.group(0), version))


def check_page_figures():
    index_nums = numbers(read(os.path.join(src, "bench", "README.md")))
    for path, text in page_sources():
        for n, line in roff_text_lines(text):
            for m in re.finditer(r"(\d+\.\d+)(?:\s*(?:-|to)\s*(\d+\.\d+))?\s+times\b", line):
                figure = m.group(1) + ("-" + m.group(2) if m.group(2) else "")
                if not recorded(figure, index_nums):
                    problems.append("%s:%d: %s times is not in bench/README.md's index" %
                                    (os.path.relpath(path, src), n, figure))


# ---- 4. citations of README sections ------------------------------------------------
CITATION = re.compile(r'((?:[\w.-]+/)*)README(?:\.md)?(?:\'s)?[,:]?\s+(?:section\s+)?\(?"([^"\n]+)"')


def headings(path):
    out = []
    for _, line in lines_outside_code(read(path)):
        m = re.match(r"^#+ (.*)$", line)
        if m:
            out.append(m.group(1).replace("`", "").strip())
    return out


def names_a_heading(name, heads):
    name = name.replace("`", "").strip().lower()
    for h in heads:
        h = h.lower()
        if h == name or any(h.startswith(name + sep) for sep in (":", " (", " -", " \u2014", ",")):
            return True
    return False


def check_citations():
    bench = os.path.normpath(os.path.join(src, "bench"))
    bench_heads = [h for p in glob.glob(os.path.join(bench, "*.md")) for h in headings(p)]
    redirect = read(os.path.join(bench, "README.md")).split("## Where older references point", 1)[-1]
    redirect_names = []
    for row in re.findall(r"^\| ([^|]+) \|", redirect, re.M):
        redirect_names += [x.strip() for x in row.split(";")]
    tree = []
    for dirpath, dirnames, fs in os.walk(src):
        dirnames[:] = [d for d in dirnames if not d.startswith((".", "build", "_install", "target"))]
        tree += [os.path.join(dirpath, f) for f in fs
                 if f.endswith((".h", ".c", ".cc", ".hpp", ".cpp", ".py", ".md", ".sh", ".1", ".3",
                                ".txt", ".cmake", ".rs", ".go", ".toml", ".in"))]
    for path in sorted(tree):
        try:
            text = read(path)
        except UnicodeDecodeError:
            continue
        for n, line in enumerate(text.split("\n"), 1):
            for m in CITATION.finditer(line):
                target = os.path.normpath(os.path.join(src, m.group(1), "README.md"))
                name = m.group(2)
                if not os.path.exists(target):
                    problems.append("%s:%d: cites %sREADME, which does not exist" %
                                    (os.path.relpath(path, src), n, m.group(1)))
                    continue
                ok = names_a_heading(name, headings(target))
                if not ok and target == os.path.join(bench, "README.md"):
                    ok = names_a_heading(name, bench_heads) or '"%s"' % name in redirect or \
                        names_a_heading(name, redirect_names)
                if not ok:
                    problems.append('%s:%d: cites %s, "%s": no such section' %
                                    (os.path.relpath(path, src), n, os.path.relpath(target, src), name))


# ---- 5. the README's length ------------------------------------------------------------
README_MAX_LINES = 500


def check_readme_length():
    n = read(os.path.join(src, "README.md")).count("\n")
    if n > README_MAX_LINES:
        problems.append("README.md: %d lines, over %d: move reference material into docs/ "
                        "and link to it" % (n, README_MAX_LINES))


# ---- 6. the Debian packages ------------------------------------------------------
def debian_packages():
    """{package: itself and the packages of debian/control it depends on,
    directly or not}."""
    deps = {}
    for stanza in re.split(r"\n\s*\n", read(os.path.join(src, "debian", "control"))):
        m = re.search(r"^Package: (\S+)$", stanza, re.M)
        if not m:
            continue
        d = re.search(r"^Depends:(.*(?:\n[ \t].*)*)", stanza, re.M)
        names = re.sub(r"\([^)]*\)|\$\{[^}]*\}", "", d.group(1)) if d else ""
        deps[m.group(1)] = set(re.findall(r"[a-z0-9][a-z0-9+.-]+", names))
    closure = {}
    for p in deps:
        seen, todo = {p}, [p]
        while todo:
            for r in deps[todo.pop()]:
                if r in deps and r not in seen:
                    seen.add(r)
                    todo.append(r)
        closure[p] = seen
    return closure


def page_packages():
    """{(name, section): package} for every page an install has: a man3
    page's is its library's -dev component's package (debian/rules'
    COMPONENTS), by its LIBRARY section's first line as
    cmake/pcpuManLinks.cmake decides; pcpustat(1)'s the tools component's."""
    rules = read(os.path.join(src, "debian", "rules"))
    m = re.search(r"^COMPONENTS = ((?:.*\\\n)*.*)$", rules, re.M)
    component = dict(re.findall(r"([a-z][a-z0-9-]*):(\S+)", m.group(1))) if m else {}
    out = {}
    for path, text in page_sources():
        if path.endswith(".1"):
            out[(os.path.basename(path)[:-2], "1")] = component.get("tools")
            continue
        lib = re.search(r"\n\.SH LIBRARY\n(.*)", text)
        lib = lib.group(1).strip() if lib else ""
        pkg = component.get({"pcpu statistics library": "stats-dev",
                             "pcpu exporter library": "exporter-dev"}.get(lib, "pcpu-dev"))
        names = [os.path.basename(path)[:-2]]
        m = re.search(r"^\.SH NAME\n(.*?)\\-", text, re.S | re.M)
        if m:
            names += [n.strip() for n in m.group(1).replace("\n", " ").split(",") if n.strip()]
        for name in names:
            out[(name, "3")] = pkg
    return out


def check_page_packages(closure):
    where = page_packages()
    for key, pkg in sorted(where.items(), key=lambda kv: kv[0]):
        if pkg not in closure:
            problems.append("%s(%s): its package %s is not in debian/control" % (key[0], key[1], pkg))
    for path, text in page_sources():
        name = os.path.basename(path).rsplit(".", 1)
        own = where.get((name[0], name[1]))
        if own not in closure:
            continue
        for block in roff_blocks(text):
            words = " ".join(line for _, line in block)
            for n, line in block:
                for ref in page_refs(line):
                    pkg = where.get(ref)
                    if pkg is None or pkg in closure[own]:
                        continue
                    if not re.search(r"(?<![\w.+-])%s(?![\w.+-])" % re.escape(pkg), words):
                        problems.append("%s:%d: %s(%s) is installed by %s, which %s does not depend on: "
                                        "name the package beside the reference" %
                                        (os.path.relpath(path, src), n, ref[0], ref[1], pkg, own))


def check_install_packages(closure):
    lines = read(os.path.join(src, "docs", "install.md")).split("\n")
    head = [i for i, line in enumerate(lines) if re.match(r"^\| package \|", line)]
    if len(head) != 1:
        problems.append("docs/install.md: %d tables headed '| package |', not one" % len(head))
        return
    listed = []
    for line in lines[head[0] + 2:]:
        if not line.startswith("|"):
            break
        listed += re.findall(r"`([^`]+)`", line.strip("|").split("|")[0])
    for p in sorted(set(closure) - set(listed)):
        problems.append("docs/install.md: the package table has no row for %s (debian/control)" % p)
    for p in sorted(set(listed) - set(closure)):
        problems.append("docs/install.md: the package table names %s, which debian/control does not build" % p)
    for p in sorted({p for p in listed if listed.count(p) > 1}):
        problems.append("docs/install.md: the package table names %s twice" % p)


files = [os.path.join(src, "README.md"), os.path.join(src, "python", "README.md"),
         os.path.join(src, "tests", "docs", "README.md")]
files += sorted(glob.glob(os.path.join(src, "docs", "*.md")))
files += sorted(glob.glob(os.path.join(src, "bench", "*.md")))
for path in files:
    if os.path.exists(path):
        check_links(path)
check_figures()
check_page_references(documented_pages())
check_overview_index()
check_versions(project_version())
check_page_figures()
check_citations()
check_readme_length()
packages = debian_packages()
check_install_packages(packages)
check_page_packages(packages)
for p in problems:
    print("FAIL:", p)
print("check_links: %d file(s), %d problem(s)" % (len(files), len(problems)))
sys.exit(1 if problems else 0)
