# SPDX-License-Identifier: MIT
"""A shared registry (PCPU_SEGMENT_SHARED_TREE) read from Python: the
prefork example's master and 8 workers are one segment, every series once,
read while the workers add."""
import os
import signal
import subprocess
import time

import pcpu
from conftest import tool, wait_for


def test_prefork_tree_is_one_segment(segdir):
    proc = subprocess.Popen([tool("PCPU_PREFORK"), "--workers", "8", "--name", "tree"],
                            stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, PCPU_SEGMENT_DIR=segdir))
    try:
        wait_for(os.path.join(segdir, f"pcpu.{proc.pid}.tree"), proc)
        assert [s.name for s in pcpu.list_segments()] == ["tree"]
        # Until the workers have met every (path, status) and counted on.
        seen, totals = {}, []
        for _ in range(3000):
            with pcpu.open_segment("tree") as seg:
                snap = seg.snapshot()
            fams = {f.name: f for f in snap.families}
            req = fams.get("http_requests")
            if req:
                keys = [tuple(s.labels.values()) for s in req.series]
                assert len(keys) == len(set(keys)), "a series twice: %r" % keys
                seen = keys
                totals.append(sum(s.value for s in req.series))
            if len(seen) == 24 and len(totals) >= 3 and totals[-1] > totals[0]:
                break
            time.sleep(0.05)
        assert len(seen) == 24 and totals[-1] > totals[0], (seen, totals[-3:])
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out  # the example's own exact read-back
