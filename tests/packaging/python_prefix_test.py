# SPDX-License-Identifier: MIT
"""The Python reader after a prefix install, with nothing in the
environment (issue 50: it failed with "libpcpu-stats not found" until
PCPU_LIBRARY was set; docs/install.md says a prefix install needs none).

1. The README's Python commands, as written (the ```sh after-demo-python
   block of README.md, the same in python/README.md), in a shell where
   scripts/demo.sh left a clone -- the build installed into build/prefix --
   but without the export line the demonstration prints (issue 62: after
   `pip install ./python`, `list_segments()` raised ImportError there):

       python3 -m venv ~/.venvs/pcpu && ~/.venvs/pcpu/bin/pip install build/prefix/share/pcpu/python
       ~/.venvs/pcpu/bin/python -c 'import pcpu; print(pcpu.list_segments())'

   with HOME a scratch folder, and PCPU_LIBRARY, LD_LIBRARY_PATH,
   PKG_CONFIG_PATH unset and no pcpustat on PATH: the package loads the
   prefix's libpcpu-stats.so.1, which `cmake --install` recorded in the
   copy it installed (src/pcpu/_installed.py), and lists a live segment.
2. `pip install ./python` (the sources, which record nothing), with
   <prefix>/bin on PATH: the package finds the library beside pcpustat, as
   pcpustat does (RUNPATH $ORIGIN/../lib).
3. The same with neither: the ImportError says what to do.
pip runs offline (offline_pip.py): from PCPU_WHEELHOUSE, not the index.

usage: python_prefix_test.py SOURCE_DIR BUILD_DIR
environment: PCPU_FIXTURE (tests/segment/segment_fixture), PCPU_WHEELHOUSE,
PCPU_PROJECT_VERSION
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

import offline_pip
from offline_pip import run

READ = """
import os, sys, pcpu, pcpu._lib
want = os.path.realpath(sys.argv[1])
got = os.path.realpath(pcpu._lib.lib()._name)
assert got == want, "loaded %s, not %s" % (got, want)
assert pcpu.__version__ == os.environ["PCPU_PROJECT_VERSION"], pcpu.__version__
with pcpu.open_segment("golden") as seg:
    snap = seg.snapshot()
assert snap.family("app_queue_depth").series[0].value == 42
print(got)
"""
BLOCK = "after-demo-python"


def readme_block(path):
    """The ```sh after-demo-python block of PATH, dedented (it may sit in a
    list item); None without one."""
    lines = open(path).read().split("\n")
    for i, line in enumerate(lines):
        m = re.match(r"^(\s*)```sh\s+(.*)$", line)
        if m and BLOCK in m.group(2).split():
            indent = len(m.group(1))
            body = []
            for line in lines[i + 1:]:
                if re.match(r"^\s*```\s*$", line):
                    return "\n".join(body) + "\n"
                body.append(line[indent:])
    return None


def main():
    src, build = sys.argv[1], sys.argv[2]
    if not os.access(os.environ.get("PCPU_FIXTURE", ""), os.X_OK):
        offline_pip.fail("PCPU_FIXTURE is not set to a program")
    wheels = offline_pip.wheelhouse()
    script = readme_block(os.path.join(src, "README.md"))
    if script is None:
        offline_pip.fail("README.md has no ```sh %s block: its Python commands are untested"
                         % BLOCK)
    if readme_block(os.path.join(src, "python", "README.md")) != script:
        offline_pip.fail("python/README.md's ```sh %s block is not README.md's" % BLOCK)
    with tempfile.TemporaryDirectory(prefix="pcpu-pyprefix-") as tmp:
        # Where scripts/demo.sh leaves a clone: its python/, and the build
        # installed into build/prefix.
        clone = os.path.join(tmp, "clone")
        shutil.copytree(os.path.join(src, "python"), os.path.join(clone, "python"),
                        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__",
                                                      ".pytest_cache"))
        prefix = os.path.join(clone, "build", "prefix")
        run(["cmake", "--install", build, "--prefix", prefix])
        libdir = os.path.join(prefix, "lib")
        lib = os.path.join(libdir, "libpcpu-stats.so.1")
        if not os.path.exists(lib):
            offline_pip.fail("the install has no %s" % lib)
        installed = os.path.join(prefix, "share", "pcpu", "python")
        recorded = open(os.path.join(installed, "src", "pcpu", "_installed.py")).read()
        if 'LIBDIR = "%s"' % libdir not in recorded:
            offline_pip.fail("_installed.py does not name %s:\n%s" % (libdir, recorded))

        segdir = os.path.join(tmp, "segments")
        os.mkdir(segdir, 0o700)
        clean = {k: v for k, v in os.environ.items()
                 if k not in ("PCPU_LIBRARY", "LD_LIBRARY_PATH", "PYTHONPATH", "PKG_CONFIG_PATH",
                              "PKG_CONFIG_LIBDIR", "LD_PRELOAD")}
        clean["PCPU_SEGMENT_DIR"] = segdir
        # PATH without any pcpustat: only the route under test may find it.
        clean["PATH"] = os.pathsep.join(
            d for d in os.environ.get("PATH", "").split(os.pathsep)
            if d and not os.path.exists(os.path.join(d, "pcpustat")))

        fixture = subprocess.Popen([os.environ["PCPU_FIXTURE"], "golden", "golden"],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   env=dict(os.environ, PCPU_SEGMENT_DIR=segdir))
        try:
            line = fixture.stdout.readline().decode()
            if not line.startswith("ready "):
                offline_pip.fail("the fixture said %r" % line)
            # 1. The README's commands, in a new shell after the demo.
            home = os.path.join(tmp, "home")
            os.mkdir(home)
            shell = offline_pip.pip_env(clean, HOME=home, PIP_NO_INDEX="1", PIP_FIND_LINKS=wheels,
                                        PIP_NO_CACHE_DIR="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
            r = run(["bash", "-c", "set -euo pipefail\n" + script], check=False, env=shell,
                    cwd=clone)
            if r.returncode != 0 or "'golden'" not in r.stdout:
                offline_pip.fail("README.md's Python commands, in a shell without the demo's "
                                 "export line, did not list segment 'golden' (exit %d):\n%s\n%s%s"
                                 % (r.returncode, script, r.stdout, r.stderr))
            py = os.path.join(home, ".venvs", "pcpu", "bin", "python")
            out = run([py, "-c", READ, lib], env=clean, cwd=tmp).stdout.strip()
            print("ok: README.md's Python commands, nothing in the environment: loaded %s" % out)
            # 2. pip install ./python, PREFIX/bin on PATH: beside pcpustat.
            venv_src = os.path.join(tmp, "venv-source")
            py_src = offline_pip.bare_venv(venv_src)
            offline_pip.pip_install(venv_src, os.path.join(clone, "python"), tmp)
            if os.path.exists(os.path.join(prefix, "bin", "pcpustat")):
                on_path = dict(clean, PATH=os.path.join(prefix, "bin") + os.pathsep + clean["PATH"])
                out = run([py_src, "-c", READ, lib], env=on_path, cwd=tmp).stdout.strip()
                print("ok: pip install ./python, pcpustat on PATH: loaded %s" % out)
            # 3. Neither: the error names the ways out (unless the system
            # loader has a pcpu of its own, a Debian package or /usr install).
            r = run([py_src, "-c", "import pcpu; pcpu.list_segments()"], check=False, env=clean,
                    cwd=tmp)
            if r.returncode == 0:
                print("skipped: the loader finds a libpcpu-stats of the system's")
            elif "share/pcpu/python" not in r.stderr or "PCPU_LIBRARY" not in r.stderr:
                offline_pip.fail("not found, without the ways out:\n" + r.stderr)
            else:
                print("ok: nothing to go on: " + r.stderr.strip().splitlines()[-1][:160])
        finally:
            fixture.stdin.close()
            fixture.wait(timeout=600)
    if fixture.returncode != 0:
        offline_pip.fail("the fixture exited %d" % fixture.returncode)


if __name__ == "__main__":
    main()
