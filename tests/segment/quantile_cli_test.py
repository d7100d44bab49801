#!/usr/bin/env python3
"""pcpustat prints the library's quantiles.

  quantile_cli_test.py PCPUSTAT FIXTURE

The test application (segment_fixture latency) records random latencies,
stops on "stop" and prints pcpu_snapshot_quantile() of its final counts;
pcpustat then reads the same counts from the segment and must print the
same p50, p90 and p99 (to the four significant digits it shows).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prometheus_histogram_test import stop_and_read_quantiles  # noqa: E402


def main():
    pcpustat, fixture = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="pcpu-quant.")
    segdir = os.path.join(tmp, "seg")
    os.mkdir(segdir, 0o700)
    env = dict(os.environ, PCPU_SEGMENT_DIR=segdir)
    app = subprocess.Popen([fixture, "latency", "quant"], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, env=env, text=True)
    try:
        if not app.stdout.readline().startswith("ready"):
            raise SystemExit("FAIL: the test application did not start")
        time.sleep(1.5)
        total, libs = stop_and_read_quantiles(app)
        lib = libs["quantile"]
        out = subprocess.run([pcpustat, "quant"], env=env, capture_output=True, text=True,
                             timeout=30).stdout
        line = next((l for l in out.splitlines() if "test_latency_seconds " in l), None)
        if line is None:
            raise SystemExit("FAIL: pcpustat printed no histogram line:\n" + out)
        m = re.search(r"count (\d+) .* p50 (\S+)  p90 (\S+)  p99 (\S+)", line)
        if not m or int(m.group(1)) != total:
            raise SystemExit("FAIL: unexpected pcpustat line %r (count %d)" % (line, total))
        for q, got in zip((0.5, 0.9, 0.99), m.groups()[1:]):
            want = "%.4g" % lib[q]
            if got != want:
                raise SystemExit("FAIL: p%g: pcpustat %s, library %s (%.17g)"
                                 % (q * 100, got, want, lib[q]))
            print("ok   p%g: pcpustat %s = library %.17g" % (q * 100, got, lib[q]))
    finally:
        app.stdin.close()
        try:
            app.wait(timeout=15)
        except subprocess.TimeoutExpired:
            app.kill()
            app.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    print("quantile_cli_test: ok (%d observations)" % total)


if __name__ == "__main__":
    main()
