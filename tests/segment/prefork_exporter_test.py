#!/usr/bin/env python3
"""A pre-fork server's shared registry, read from outside (issue 26).

examples/prefork.c (a master and 16 workers on a shared registry, series
registered by the workers after fork) runs while:
  - `pcpustat` lists exactly one segment for the whole tree;
  - `pcpustat serve` exposes it: every (path, status) series once, the
    requests counter equal to the latency histogram's count, series from
    every worker in one exposition that `promtool check metrics` accepts;
  - on SIGTERM the example reads the tree back through its segment and
    exits 0 only if the requests counted equal those its workers served.
It runs until the exposition shows every series and a growing count, not
for a fixed time; the ctest timeout only bounds a hang.
Usage: prefork_exporter_test.py EXAMPLE PCPUSTAT
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request


def main():
    example, pcpustat = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="pcpu-prefork.")
    env = dict(os.environ, PCPU_SEGMENT_DIR=tmp)
    procs = []
    try:
        app = subprocess.Popen([example, "--workers", "16", "--name", "prefork"],
                               stdout=subprocess.PIPE, text=True, env=env)
        procs.append(app)
        first = app.stdout.readline()
        assert "segment" in first, first
        listing = subprocess.run([pcpustat], env=env, capture_output=True, text=True, check=True)
        rows = [l for l in listing.stdout.splitlines() if " prefork " in l]
        assert len(rows) == 1, "one segment for the tree, not %r" % listing.stdout

        err = open(os.path.join(tmp, "serve.err"), "w+")
        srv = subprocess.Popen([pcpustat, "serve", "--listen", "127.0.0.1:0", "prefork"],
                               stdout=subprocess.PIPE, stderr=err, text=True, env=env)
        procs.append(srv)
        line = srv.stdout.readline()
        assert "listening on http" in line, line
        url = "http://" + line.split("://")[1].split("/")[0] + "/metrics"

        # Six paths and the statuses 200, 304, 404, 500: 24 series.
        # (pcpustat serve adds the labels pcpu_segment and pcpu_pid.)
        series_re = re.compile(r'^http_requests_total\{path="([^"]*)",status="([^"]*)"[^}]*\} (\d+)$',
                               re.M)
        count_re = re.compile(r'^http_request_duration_seconds_count\{[^}]*\} (\d+)$', re.M)
        body, last_total, grew = "", 0, 0
        for _ in range(2000):
            body = urllib.request.urlopen(url, timeout=60).read().decode()
            found = series_re.findall(body)
            total = sum(int(v) for _, _, v in found)
            grew += total > last_total
            last_total = total
            if len(found) == 24 and grew >= 3:
                break
            time.sleep(0.05)
        found = series_re.findall(body)
        keys = [(p, s) for p, s, _ in found]
        assert len(found) == 24 and len(set(keys)) == 24, "series: %r" % keys
        counts = sum(int(v) for v in count_re.findall(body))
        # Each request adds to the counter, then records: the scrape reads
        # the two at slightly different instants, so the counter may lead.
        assert counts > 0 and abs(last_total - counts) <= 16 * 1000, (last_total, counts)
        assert body.count("# TYPE http_requests_total counter") <= 1
        check = subprocess.run(["promtool", "check", "metrics"], input=body, text=True,
                               capture_output=True)
        assert check.returncode == 0, check.stdout + check.stderr

        app.send_signal(signal.SIGTERM)
        out, _ = app.communicate(timeout=600)
        print(first + out, end="")
        assert app.returncode == 0, "the example's totals disagree: %r" % out
        print("prefork_exporter_test: ok (24 series from 16 workers in one segment, %d requests "
              "at the last scrape)" % last_total)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
