# SPDX-License-Identifier: MIT
"""The Python reader after a prefix install, with nothing in the
environment (issue 50: it failed with "libpcpu-stats not found" until
PCPU_LIBRARY was set; docs/install.md says a prefix install needs none).

    cmake --install BUILD --prefix PREFIX       # PREFIX/lib is not the loader's
    python3 -m venv VENV
    VENV/bin/pip install PREFIX/share/pcpu/python

then VENV/bin/python imports pcpu and reads a live segment, with
PCPU_LIBRARY and LD_LIBRARY_PATH unset: the package loads PREFIX's
libpcpu-stats.so.1, which `cmake --install` recorded in the copy it
installed (src/pcpu/_installed.py). Two more routes, from the sources
(`pip install ./python`, which records nothing): with PREFIX/bin on PATH
the package finds the library beside pcpustat, as pcpustat does (RUNPATH
$ORIGIN/../lib); with neither, the ImportError says what to do.
pip runs offline, as in python_venv_test.py (offline_pip.py): bare
virtual environments, the build requirements from PCPU_WHEELHOUSE.

usage: python_prefix_test.py SOURCE_DIR BUILD_DIR
environment: PCPU_FIXTURE (tests/segment/segment_fixture), PCPU_WHEELHOUSE,
PCPU_PROJECT_VERSION
"""
import os
import subprocess
import sys
import tempfile

import offline_pip

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


def run(cmd, check=True, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        sys.exit("python_prefix_test: %s failed (%d):\n%s%s" %
                 (" ".join(cmd), r.returncode, r.stdout, r.stderr))
    return r


def venv_with(tmp, name, package):
    venv = os.path.join(tmp, name)
    py = offline_pip.bare_venv(venv)
    offline_pip.pip_install(venv, package, tmp)
    return py


def main():
    src, build = sys.argv[1], sys.argv[2]
    if not os.access(os.environ.get("PCPU_FIXTURE", ""), os.X_OK):
        sys.exit("python_prefix_test: PCPU_FIXTURE is not set to a program")
    offline_pip.wheelhouse()
    with tempfile.TemporaryDirectory(prefix="pcpu-pyprefix-") as tmp:
        prefix = os.path.join(tmp, "prefix")
        run(["cmake", "--install", build, "--prefix", prefix])
        libdir = os.path.join(prefix, "lib")
        lib = os.path.join(libdir, "libpcpu-stats.so.1")
        if not os.path.exists(lib):
            sys.exit("python_prefix_test: the install has no %s" % lib)
        installed = os.path.join(prefix, "share", "pcpu", "python")
        recorded = open(os.path.join(installed, "src", "pcpu", "_installed.py")).read()
        if 'LIBDIR = "%s"' % libdir not in recorded:
            sys.exit("python_prefix_test: _installed.py does not name %s:\n%s" % (libdir, recorded))

        segdir = os.path.join(tmp, "segments")
        os.mkdir(segdir, 0o700)
        clean = {k: v for k, v in os.environ.items()
                 if k not in ("PCPU_LIBRARY", "LD_LIBRARY_PATH", "PYTHONPATH", "PKG_CONFIG_PATH")}
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
                sys.exit("python_prefix_test: the fixture said %r" % line)
            # 1. pip install PREFIX/share/pcpu/python: the recorded libdir.
            py = venv_with(tmp, "venv-installed", installed)
            out = run([py, "-c", READ, lib], env=clean, cwd=tmp).stdout.strip()
            print("ok: pip install <prefix>/share/pcpu/python: loaded %s" % out)
            # 2. pip install ./python, PREFIX/bin on PATH: beside pcpustat.
            py_src = venv_with(tmp, "venv-source", os.path.join(src, "python"))
            if os.path.exists(os.path.join(prefix, "bin", "pcpustat")):
                on_path = dict(clean, PATH=os.path.join(prefix, "bin") + os.pathsep + clean["PATH"])
                out = run([py_src, "-c", READ, lib], env=on_path, cwd=tmp).stdout.strip()
                print("ok: pip install ./python, pcpustat on PATH: loaded %s" % out)
            # 3. Neither: the error names the ways out (unless the system
            # loader has a pcpu of its own, a Debian package or /usr install).
            r = run([py_src, "-c", "import pcpu; pcpu.list_segments()"], check=False, env=clean, cwd=tmp)
            if r.returncode == 0:
                print("skipped: the loader finds a libpcpu-stats of the system's")
            elif "share/pcpu/python" not in r.stderr or "PCPU_LIBRARY" not in r.stderr:
                sys.exit("python_prefix_test: not found, without the ways out:\n" + r.stderr)
            else:
                print("ok: nothing to go on: " + r.stderr.strip().splitlines()[-1][:160])
        finally:
            fixture.stdin.close()
            fixture.wait(timeout=600)
    if fixture.returncode != 0:
        sys.exit("python_prefix_test: the fixture exited %d" % fixture.returncode)


if __name__ == "__main__":
    main()
