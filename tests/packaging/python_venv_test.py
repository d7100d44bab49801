# SPDX-License-Identifier: MIT
"""The Python package installed from the sources, as a user does: a
virtual environment, `pip install ./python` into it, then the package
read a live segment.

Debian's system Python refuses `pip install` outside a virtual environment
(PEP 668, "externally-managed-environment"), so python/README.md says, for
a machine with the Debian package libpcpu-stats1:

    python3 -m venv ~/.venvs/pcpu           # Debian: apt-get install python3-venv
    ~/.venvs/pcpu/bin/pip install ./python

This test does the same with the python3 the build found, into
BUILD/python-venv, offline (offline_pip.py): the virtual environment is
bare -- it sees none of the interpreter's packages, and has no wheel --
and pip builds the package in an environment of its own with the
setuptools python/pyproject.toml asks for, from PCPU_WHEELHOUSE (the
wheels scripts/install-deps.sh downloads) instead of the index. Then the
venv's python imports pcpu -- from the venv, not from the sources -- and
reads the segment fixture's known values through libpcpu.

usage: python_venv_test.py SOURCE_DIR BUILD_DIR
environment: PCPU_LIBRARY (libpcpu-stats.so.1 of the build), PCPU_FIXTURE
(tests/segment/segment_fixture), PCPU_WHEELHOUSE, PCPU_PROJECT_VERSION.
"""
import os
import shutil
import subprocess
import sys
import tempfile

import offline_pip


def run(cmd, check=True, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        sys.exit("python_venv_test: %s failed (%d):\n%s%s" %
                 (" ".join(cmd), r.returncode, r.stdout, r.stderr))
    return r if not check else r.stdout


def main():
    src, build = sys.argv[1], sys.argv[2]
    for var in ("PCPU_LIBRARY", "PCPU_FIXTURE"):
        if not os.access(os.environ.get(var, ""), os.R_OK):
            sys.exit("python_venv_test: %s is not set to a file" % var)
    offline_pip.wheelhouse()
    venv = os.path.join(build, "python-venv")
    shutil.rmtree(venv, ignore_errors=True)
    py = offline_pip.bare_venv(venv)
    # Bare: what builds the package is the wheels', never the interpreter's.
    r = run([py, "-c", "import wheel"], check=False)
    if r.returncode == 0:
        sys.exit("python_venv_test: the new virtual environment has wheel: not bare")
    with tempfile.TemporaryDirectory(prefix="pcpu-venv-") as tmp:
        offline_pip.pip_install(venv, os.path.join(src, "python"), tmp)
        segdir = os.path.join(tmp, "segments")
        os.mkdir(segdir, 0o700)
        env = dict(os.environ, PCPU_SEGMENT_DIR=segdir)
        env.pop("PYTHONPATH", None)
        fixture = subprocess.Popen([os.environ["PCPU_FIXTURE"], "golden", "golden"],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        try:
            line = fixture.stdout.readline().decode()
            if not line.startswith("ready "):
                sys.exit("python_venv_test: the fixture said %r" % line)
            out = run([py, "-c", """
import os, sys, pcpu
venv = os.path.realpath(sys.argv[1])
assert os.path.realpath(pcpu.__file__).startswith(venv + os.sep), pcpu.__file__
assert pcpu.__version__ == os.environ["PCPU_PROJECT_VERSION"], pcpu.__version__
assert [(s.name, s.state) for s in pcpu.list_segments()] == [("golden", "live")]
with pcpu.open_segment("golden") as seg:
    snap = seg.snapshot()
assert snap.family("app_queue_depth").series[0].value == 42
print(pcpu.__file__)
""", venv], env=env, cwd=tmp)
        finally:
            fixture.stdin.close()
            fixture.wait(timeout=600)
    if fixture.returncode != 0:
        sys.exit("python_venv_test: the fixture exited %d" % fixture.returncode)
    print("python_venv_test: ok, pcpu imported from %s" % out.strip())


if __name__ == "__main__":
    main()
