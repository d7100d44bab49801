#!/usr/bin/env python3
"""A segment named by its path, as `pcpustat PATH` takes it, is taken by
`pcpustat serve` and `pcpustat push` too (tools/segment_args.c, the one
check of both commands' SEGMENT arguments).

  push_targets_test.py PCPUSTAT FIXTURE

 - `pcpustat /dir/pcpu.PID.NAME` prints the segment (as it always did);
 - `pcpustat serve /dir/pcpu.PID.NAME`: /metrics holds its series,
   labelled with its name and pid, and pcpu_segment_up 1;
 - `pcpustat push --otlp URL /dir/pcpu.PID.NAME`: the receiver gets its
   series, labelled the same;
 - a path to nothing: serve reports it down (pcpu_segment_up 0), push
   sends pcpu_segment_up 0 -- the segment is named, not refused;
 - what is neither a name, pid, file name nor path ('a b', '-x' after
   --) is refused by both, exit 2, saying so.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from push_common import HANG, Fixture, Receiver, attrs, metrics_of, point, run_push, stop  # noqa: E402


def fail(msg):
    raise SystemExit("FAIL: " + msg)


def serve_once(pcpustat, env, target):
    """`pcpustat serve TARGET` on a free port: one /metrics answer."""
    p = subprocess.Popen([pcpustat, "serve", "--listen", "127.0.0.1:0", target], env=env,
                         stdout=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        if "listening on " not in line:
            fail("serve %s did not start: %r" % (target, line))
        url = line.split("listening on ")[1].split()[0]
        with urllib.request.urlopen(url, timeout=HANG) as r:
            return r.read().decode()
    finally:
        stop([p])


def main():
    pcpustat, fixture = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="pcpu-push-targets.")
    segdir = os.path.join(tmp, "seg")
    os.mkdir(segdir, 0o700)
    env = dict(os.environ, PCPU_SEGMENT_DIR=segdir)
    procs = []
    ok = False
    try:
        app = Fixture(fixture, env)
        procs.append(app.p)
        app.cmd("add 4321")
        path = os.path.join(segdir, "pcpu.%d.pushfix" % app.pid)
        if not os.path.exists(path):
            fail("the fixture's segment is not %s" % path)
        r = subprocess.run([pcpustat, path], env=env, capture_output=True, text=True, timeout=HANG)
        if r.returncode != 0 or "4321" not in r.stdout:
            fail("pcpustat %s: exit %d: %s%s" % (path, r.returncode, r.stdout[-300:], r.stderr))
        print("ok   pcpustat PATH prints the segment")

        body = serve_once(pcpustat, env, path)
        want = 'push_requests_total{method="GET",pcpu_segment="pushfix",pcpu_pid="%d"} 4321' % app.pid
        up = 'pcpu_segment_up{pcpu_segment="pushfix",pcpu_pid="%d",reason=""} 1' % app.pid
        if want not in body or up not in body:
            fail("serve PATH: /metrics lacks %r or %r:\n%s" % (want, up, body[:1500]))
        print("ok   pcpustat serve PATH: the segment's series, labelled, up 1")

        rcv = Receiver()
        try:
            rc, err = run_push(pcpustat, env, ["--otlp", rcv.url, "--count", "1", path])
            req = rcv.last()[1]
            if rc != 0 or not req:
                fail("push PATH: exit %d: %s" % (rc, err))
            p = point(metrics_of(req)["push_requests"], "sum", method="GET")
            a = attrs(p.attributes)
            if p.as_int != 4321 or a.get("pcpu_segment") != "pushfix" or a.get("pcpu_pid") != str(app.pid):
                fail("push PATH: %r %r" % (p.as_int, a))
            print("ok   pcpustat push PATH: the segment's series, labelled")

            gone = os.path.join(segdir, "pcpu.1.nothing")
            rc, err = run_push(pcpustat, env, ["--otlp", rcv.url, "--count", "1", gone])
            req = rcv.last()[1]
            upp = point(metrics_of(req)["pcpu_segment_up"], "gauge")
            if rc != 0 or upp.as_int != 0:
                fail("push a path to nothing: exit %d, up %r: %s" % (rc, upp, err))
        finally:
            rcv.close()
        body = serve_once(pcpustat, env, gone)
        if "pcpu_segment_up{" not in body or "} 0" not in body:
            fail("serve a path to nothing: %s" % body[:600])
        print("ok   a path to nothing: reported down (pcpu_segment_up 0) by serve and push, not refused")

        for bad in ("a b", "-x"):
            for cmd in (["serve", "--listen", "127.0.0.1:0", "--", bad],
                        ["push", "--otlp", "http://127.0.0.1:1/v1/metrics", "--count", "1", "--", bad]):
                r = subprocess.run([pcpustat] + cmd, env=env, capture_output=True, text=True, timeout=HANG)
                if r.returncode != 2 or "is not a segment name, pid, file name or path" not in r.stderr:
                    fail("%r: exit %d: %s" % (cmd, r.returncode, r.stderr))
        print("ok   neither a name, pid, file name nor path: refused by serve and push (exit 2)")
        ok = True
    finally:
        stop(procs)
        shutil.rmtree(tmp, ignore_errors=True)
    print("push_targets_test: ok" if ok else "push_targets_test: FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
