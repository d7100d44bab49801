# SPDX-License-Identifier: MIT
"""`pip install ./python` works: the package metadata builds, and the
installed module is the one imported."""
import os
import shutil
import subprocess
import sys


def test_pip_install(tmp_path):
    # From a copy: setuptools writes build/ and *.egg-info next to the sources.
    here = tmp_path / "python"
    shutil.copytree(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), here,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__",
                                                  ".pytest_cache"))
    target = tmp_path / "site"
    # No network needed: the build backend (setuptools) comes from this
    # Python, and the package has no dependency.
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                        "--no-build-isolation", "--disable-pip-version-check", "--no-cache-dir",
                        "--target", str(target), str(here)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([sys.executable, "-c", "import pcpu, pcpu.prometheus; print(pcpu.__file__, pcpu.__version__)"],
                       env=dict(os.environ, PYTHONPATH=str(target)), capture_output=True,
                       text=True, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    path, version = r.stdout.split()
    # The installed package's version is the source's (pyproject takes it
    # from pcpu.__version__).
    src = (here / "src" / "pcpu" / "__init__.py").read_text()
    assert path.startswith(str(target)) and f'__version__ = "{version}"' in src
