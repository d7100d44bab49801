# SPDX-License-Identifier: MIT
"""Fixtures: live writers publishing segments in a private directory.

The paths come from the environment (pcpu's ctest sets them; by hand, point
them into a pcpu build):
  PCPU_LIBRARY       libpcpu-stats.so.1 the module loads
  PCPU_FORWARDER     examples/pcpu_example_forwarder (a live data plane)
  PCPU_PREFORK       examples/pcpu_example_prefork (a master and workers on a
                     shared registry)
  PCPU_FIXTURE       tests/segment/segment_fixture (fixed, known statistics)
  PCPU_LAYOUT_PROBE  the layout probe built from tests/layout_probe.c
A missing one fails the tests that need it, with this message: nothing is
skipped silently.
"""
import os
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))


def tool(var):
    path = os.environ.get(var)
    if not path or not os.access(path, os.X_OK):
        pytest.fail(f"{var} is not set to an executable ({path!r}): see tests/conftest.py")
    return path


@pytest.fixture
def segdir(tmp_path, monkeypatch):
    d = tmp_path / "segments"
    d.mkdir(mode=0o700)
    monkeypatch.setenv("PCPU_SEGMENT_DIR", str(d))
    return str(d)


# Waits here only catch a writer that never gets there: generous, since a
# loaded machine may be slow to start one.
def wait_for(path, proc, seconds=120.0):
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        if proc.poll() is not None:
            pytest.fail(f"writer exited {proc.returncode} before publishing {path}")
        if time.monotonic() > deadline:
            pytest.fail(f"{path} did not appear in {seconds} s")
        time.sleep(0.01)


@pytest.fixture
def forwarder(segdir):
    """The forwarder example running, publishing segment "forwarder"."""
    proc = subprocess.Popen([tool("PCPU_FORWARDER"), "--seconds", "1800", "--workers", "1",
                             "--flows", "8", "--name", "forwarder"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=dict(os.environ, PCPU_SEGMENT_DIR=segdir))
    wait_for(os.path.join(segdir, f"pcpu.{proc.pid}.forwarder"), proc)
    # Published right after the registry is created: wait for its families
    # and for traffic.
    import pcpu
    deadline = time.monotonic() + 120
    while True:
        try:
            with pcpu.open_segment(proc.pid) as seg:
                snap = seg.snapshot()
            if (snap.family("fwd_rx_packets").series[0].value > 0 and
                    snap.family("fwd_latency_seconds").series[0].value.count > 0):
                break
        except (OSError, KeyError, IndexError):
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail("the forwarder did not get going")
        time.sleep(0.02)
    yield proc
    proc.terminate()
    out = proc.communicate(timeout=30)[0].decode()
    assert proc.returncode == 0, out


def start_fixture(segdir, *args):
    proc = subprocess.Popen([tool("PCPU_FIXTURE"), *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env=dict(os.environ, PCPU_SEGMENT_DIR=segdir))
    line = proc.stdout.readline().decode()
    assert line.startswith("ready "), line
    return proc


@pytest.fixture
def golden(segdir):
    """segment_fixture golden: fixed statistics of every kind, as "golden"."""
    proc = start_fixture(segdir, "golden", "golden")
    yield proc
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0
