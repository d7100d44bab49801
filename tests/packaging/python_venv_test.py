# SPDX-License-Identifier: MIT
"""The README's Python route, as a user takes it: a virtual environment,
`pip install ./python` into it, then the package read a live segment.

Debian's system Python refuses `pip install` outside a virtual environment
(PEP 668, "externally-managed-environment"), so README.md and
python/README.md say:

    python3 -m venv ~/.venvs/pcpu           # Debian: apt-get install python3-venv
    ~/.venvs/pcpu/bin/pip install ./python  # or ./python[prometheus]

This test does the same with the python3 the build found, into
BUILD/python-venv, offline: the venv sees the interpreter's own packages
(--system-site-packages) so that pip builds with their setuptools and wheel
(--no-build-isolation; scripts/install-deps.sh installs both) instead of
downloading them; --no-deps, as the package has no dependency. Then the
venv's python imports pcpu -- from the venv, not from the sources -- and
reads the segment fixture's known values through libpcpu.

usage: python_venv_test.py SOURCE_DIR BUILD_DIR
environment: PCPU_LIBRARY (libpcpu-stats.so.1 of the build), PCPU_FIXTURE
(tests/segment/segment_fixture).
"""
import os
import shutil
import subprocess
import sys
import tempfile


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit("python_venv_test: %s failed (%d):\n%s%s" %
                 (" ".join(cmd), r.returncode, r.stdout, r.stderr))
    return r.stdout


def main():
    src, build = sys.argv[1], sys.argv[2]
    for var in ("PCPU_LIBRARY", "PCPU_FIXTURE"):
        if not os.access(os.environ.get(var, ""), os.R_OK):
            sys.exit("python_venv_test: %s is not set to a file" % var)
    venv = os.path.join(build, "python-venv")
    shutil.rmtree(venv, ignore_errors=True)
    run([sys.executable, "-m", "venv", "--system-site-packages", venv])
    py = os.path.join(venv, "bin", "python")
    with tempfile.TemporaryDirectory(prefix="pcpu-venv-") as tmp:
        # From a copy: setuptools writes build/ and *.egg-info beside the
        # sources.
        copy = os.path.join(tmp, "python")
        shutil.copytree(os.path.join(src, "python"), copy,
                        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__",
                                                      ".pytest_cache"))
        run([os.path.join(venv, "bin", "pip"), "install", "--quiet", "--no-deps",
             "--no-build-isolation", "--no-index", "--disable-pip-version-check",
             "--no-cache-dir", copy])
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
