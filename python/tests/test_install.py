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
    # pip builds in an environment of its own with what pyproject.toml's
    # [build-system] requires, as for a user: from the index, or offline
    # from the wheels PCPU_WHEELHOUSE names (pcpu's ctest sets it to those
    # scripts/install-deps.sh downloads), never with this Python's own
    # setuptools or wheel. The package has no dependency.
    offline = []
    if os.environ.get("PCPU_WHEELHOUSE"):
        offline = ["--no-index", "--find-links", os.environ["PCPU_WHEELHOUSE"]]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", *offline,
                        "--disable-pip-version-check", "--no-cache-dir",
                        "--target", str(target), str(here)], capture_output=True, text=True,
                       env=env)
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
