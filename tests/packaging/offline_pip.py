# SPDX-License-Identifier: MIT
"""`pip install` of the Python package as a user runs it, offline, for
python_venv_test.py and python_prefix_test.py.

A user's `pip install ./python` builds the package in an environment of
pip's own (build isolation) with what python/pyproject.toml's
[build-system] requires, from the package index. The tests do the same
from a folder of wheels instead of the index: PCPU_WHEELHOUSE, which
scripts/install-deps.sh fills from that very line (ctest sets it). So the
install depends on no interpreter's own packages -- not on which python3
comes first on PATH, nor on a setuptools or wheel installed there by hand
(issue 62: a pyenv python3 without wheel failed with "invalid command
'bdist_wheel'") -- and a requirement the wheels do not meet fails here.
The virtual environments are bare (no --system-site-packages), and pip's
configuration is the command line's alone (PIP_* and pip.conf ignored).
"""
import glob
import os
import shutil
import subprocess
import sys


def fail(msg):
    sys.exit("%s: %s" % (os.path.basename(sys.argv[0]), msg))


def wheelhouse():
    """The folder of build wheels (PCPU_WHEELHOUSE), checked."""
    w = os.environ.get("PCPU_WHEELHOUSE", "")
    if not glob.glob(os.path.join(w, "setuptools-*.whl")):
        fail("PCPU_WHEELHOUSE (%r) holds no setuptools wheel: scripts/install-deps.sh "
             "downloads the wheels python/pyproject.toml's [build-system] requires" % w)
    return w


def pip_env(base=None, **extra):
    """An environment for pip: no PIP_* settings, no configuration file."""
    env = {k: v for k, v in (base or os.environ).items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, **extra)
    return env


def run(cmd, check=True, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        fail("%s failed (%d):\n%s%s" % (" ".join(cmd), r.returncode, r.stdout, r.stderr))
    return r


def bare_venv(path):
    """A virtual environment of this interpreter's base, seeing none of its
    packages; its python."""
    run([sys.executable, "-m", "venv", path])
    return os.path.join(path, "bin", "python")


def pip_install(venv, package, tmp):
    """`pip install PACKAGE` into VENV, offline, building from a copy
    (setuptools writes build/ and *.egg-info beside the sources)."""
    copy = os.path.join(tmp, os.path.basename(venv) + "-src")
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns(
        "build", "*.egg-info", "__pycache__", ".pytest_cache", "tests"))
    run([os.path.join(venv, "bin", "python"), "-m", "pip", "install", "--quiet", "--no-index",
         "--find-links", wheelhouse(), "--no-cache-dir", "--disable-pip-version-check", copy],
        env=pip_env())
