#!/usr/bin/env python3
"""`pcpustat push --otlp` into an OTLP/HTTP receiver that decodes every
request with the published schema (PyPI opentelemetry-proto).

  push_otlp_test.py PCPUSTAT FIXTURE

The test application records known values; each push is decoded and
checked against them:

 - the resource (service.name, service.instance.id, --label) and scope;
 - counters: monotonic cumulative Sums, exact integers, start time the
   segment's publication (before the point, after the test began);
 - gauges as Gauges (as_int; a scaled one as_double 21.5, unit Cel);
 - the explicit histogram: cumulative Histogram, explicit_bounds
   [0.001, 0.01, 0.1], bucket_counts [50, 40, 10, 0], count, sum, unit s;
 - the log-linear histogram: strictly increasing bounds, each observation
   counted in the bucket its value falls in (bound[i-1] < v <= bound[i]);
 - the exponential histogram: ExponentialHistogram with scale 3 (pcpu's
   schema), each observation in the OTLP bucket index i with
   base^i < v <= base^(i+1) (offset = the native index - 1), zero_count 0,
   a zero_threshold below every observation;
 - pcpu_segment_up = 1;
 - pushes every 0.1 s while the application counts: every received value
   of the counter is >= the one before, and the last is the final count;
 - SIGTERM pushes once more: with an interval of an hour, the second
   request is the final one, holding what was counted after the first.
"""
import bisect
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from push_common import (HANG, Fixture, Receiver, attrs, metrics_of, point, run_push,  # noqa: E402
                         stop, terminate, wait_for)

OBS = [500] * 50 + [5000] * 40 + [50000] * 10 + [777, 1234, 98765]
SUM_S = sum(OBS) / 1e6


def fail(msg):
    raise SystemExit("FAIL: " + msg)


def check_request(headers, req, app, t0_ns):
    if headers.get("Content-Type") != "application/x-protobuf":
        fail("Content-Type %r" % headers.get("Content-Type"))
    res = attrs(req.resource_metrics[0].resource.attributes)
    if res != {"service.name": "pushtest", "service.instance.id": "node1", "site": "lab"}:
        fail("resource attributes %r" % res)
    scope = req.resource_metrics[0].scope_metrics[0].scope
    if scope.name != "pcpustat" or not scope.version:
        fail("scope %r" % scope)
    m = metrics_of(req)
    seg = {"pcpu_segment": "pushfix", "pcpu_pid": str(app.pid)}

    c = m["push_requests"]
    if not c.sum.is_monotonic or c.sum.aggregation_temporality != 2:
        fail("push_requests: monotonic %r temporality %r" % (c.sum.is_monotonic, c.sum.aggregation_temporality))
    p = point(c, "sum", method="GET", **seg)
    if p.WhichOneof("value") != "as_int" or p.as_int != 12345678901:
        fail("GET %r" % p)
    if not t0_ns <= p.start_time_unix_nano <= p.time_unix_nano <= time.time_ns():
        fail("start %d, time %d, test began %d" % (p.start_time_unix_nano, p.time_unix_nano, t0_ns))
    if point(c, "sum", method="POST").as_int != 7:
        fail("POST")
    print("ok   push_requests: monotonic cumulative Sum, GET 12345678901, POST 7, start time the segment's")

    if point(m["push_queue_depth"], "gauge").as_int != -42:
        fail("push_queue_depth")
    t = m["push_temperature_celsius"]
    tp = point(t, "gauge")
    if tp.WhichOneof("value") != "as_double" or tp.as_double != 21.5 or t.unit != "Cel":
        fail("temperature %r unit %r" % (tp, t.unit))
    if point(m["pcpu_segment_up"], "gauge", **seg).as_int != 1:
        fail("pcpu_segment_up")
    print("ok   gauges: push_queue_depth -42, push_temperature_celsius 21.5 Cel, pcpu_segment_up 1")

    h = m["push_latency_seconds"]
    hp = point(h, "histogram", **seg)
    if (h.histogram.aggregation_temporality != 2 or list(hp.explicit_bounds) != [0.001, 0.01, 0.1]
            or list(hp.bucket_counts) != [51, 41, 11, 0] or hp.count != len(OBS)
            or abs(hp.sum - SUM_S) > 1e-12 or h.unit != "s"):
        fail("explicit histogram %r unit %r" % (hp, h.unit))
    print("ok   push_latency_seconds: cumulative Histogram, bounds %r, counts %r, sum %r"
          % (list(hp.explicit_bounds), list(hp.bucket_counts), hp.sum))

    lp = point(m["push_latency_ll_seconds"], "histogram")
    b = list(lp.explicit_bounds)
    if any(x >= y for x, y in zip(b, b[1:])) or len(lp.bucket_counts) != len(b) + 1:
        fail("log-linear bounds %r" % b)
    want = [0] * (len(b) + 1)
    for v in OBS:
        want[bisect.bisect_left(b, v / 1e6)] += 1
    if list(lp.bucket_counts) != want or lp.count != len(OBS):
        fail("log-linear counts %r, want %r" % (list(lp.bucket_counts), want))
    print("ok   push_latency_ll_seconds: %d bounds, every observation in its bucket" % len(b))

    e = m["push_latency_native_seconds"]
    ep = point(e, "exponential_histogram", **seg)
    if e.exponential_histogram.aggregation_temporality != 2 or ep.scale != 3:
        fail("exponential histogram temporality/scale %r" % ep)
    base = 2 ** (2 ** -ep.scale)
    want = {}
    for v in OBS:
        s = v / 1e6
        i = math.ceil(math.log(s, base)) - 1  # base^i < s <= base^(i+1)
        if not base ** i < s <= base ** (i + 1):
            fail("test arithmetic near a bound: %r" % s)
        want[i] = want.get(i, 0) + 1
    got = {ep.positive.offset + k: n for k, n in enumerate(ep.positive.bucket_counts) if n}
    if got != want or ep.count != len(OBS) or ep.zero_count != 0 or abs(ep.sum - SUM_S) > 1e-12:
        fail("exponential buckets %r, want %r (count %d zero %d sum %r)" % (got, want, ep.count,
                                                                              ep.zero_count, ep.sum))
    if not 0 < ep.zero_threshold < min(OBS) / 1e6:
        fail("zero_threshold %r" % ep.zero_threshold)
    if ep.positive.bucket_counts[0] == 0 or ep.positive.bucket_counts[-1] == 0:
        fail("positive buckets not trimmed to the non-empty range")
    print("ok   push_latency_native_seconds: ExponentialHistogram scale 3, OTLP indices %r "
          "(offset %d = native index - 1), zero_threshold %g" % (sorted(got.items()), ep.positive.offset,
                                                                 ep.zero_threshold))


def check_monotone(pcpustat, env, rcv, app):
    """Pushes every 0.1 s while the application counts: every value of the
    counter is >= the one before; after SIGTERM the last is the total."""
    n0 = len(rcv.requests)
    agent = subprocess.Popen([pcpustat, "push", "--otlp", rcv.url, "--interval", "0.1", "pushfix"],
                             env=env, stderr=subprocess.PIPE, text=True)
    total = 7
    for k in range(1, 41):
        app.cmd("post %d" % k)
        total += k
        if k % 10 == 0:
            wait_for(lambda: len(rcv.requests) >= n0 + k // 10 + 1, "pushes while counting")
    rc, err = terminate(agent)
    if rc != 0:
        fail("agent exited %d: %s" % (rc, err))
    vals = []
    for _, req in rcv.requests[n0:]:
        vals.append(point(metrics_of(req)["push_requests"], "sum", method="POST").as_int)
    if any(x > y for x, y in zip(vals, vals[1:])) or vals[-1] != total:
        fail("POST values %r, want non-decreasing up to %d" % (vals, total))
    print("ok   %d pushes while counting: non-decreasing, the last (after SIGTERM) = %d" % (len(vals), total))


def check_final_push(pcpustat, env, rcv, app):
    """SIGTERM pushes once more: with an hour's interval, the only push
    after the first is the final one, and it carries what was counted
    since."""
    n0 = len(rcv.requests)
    agent = subprocess.Popen([pcpustat, "push", "--otlp", rcv.url, "--interval", "3600", "pushfix"],
                             env=env, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: len(rcv.requests) > n0, "the first push")
    before = point(metrics_of(rcv.last()[1])["push_requests"], "sum", method="POST").as_int
    app.cmd("post 1000")
    rc, err = terminate(agent)
    after = point(metrics_of(rcv.last()[1])["push_requests"], "sum", method="POST").as_int
    if rc != 0 or len(rcv.requests) != n0 + 2 or after != before + 1000:
        fail("final push: exit %d, %d requests, %d -> %d: %s" % (rc, len(rcv.requests) - n0, before, after, err))
    print("ok   SIGTERM: a final push carried the last 1000 (%d -> %d)" % (before, after))


def main():
    pcpustat, fixture = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="pcpu-push-otlp.")
    segdir = os.path.join(tmp, "seg")
    os.mkdir(segdir, 0o700)
    env = dict(os.environ, PCPU_SEGMENT_DIR=segdir)
    procs = []
    rcv = Receiver()
    ok = False
    try:
        t0 = time.time_ns()
        app = Fixture(fixture, env)
        procs.append(app.p)
        app.cmd("add 12345678901", "post 7", "gauge -42", "temp 215", *["observe %d" % v for v in OBS])
        args = ["--otlp", rcv.url, "--count", "1", "--job", "pushtest", "--instance", "node1",
                "--label", "site=lab"]
        rc, err = run_push(pcpustat, env, args, HANG)
        if rc != 0 or len(rcv.requests) != 1:
            fail("push exited %d, %d requests: %s" % (rc, len(rcv.requests), err))
        check_request(*rcv.last(), app, t0)

        # A counter reset: the new value, the same start time (the file
        # comment of push_otlp.c says why).
        start = point(metrics_of(rcv.last()[1])["push_requests"], "sum", method="GET").start_time_unix_nano
        app.cmd("reset", "add 3")
        rc, err = run_push(pcpustat, env, args, HANG)
        p = point(metrics_of(rcv.last()[1])["push_requests"], "sum", method="GET")
        if rc != 0 or p.as_int != 3 or p.start_time_unix_nano != start:
            fail("after a reset: %d %r" % (rc, p))
        print("ok   after a reset: 3, start time unchanged")
        check_monotone(pcpustat, env, rcv, app)
        check_final_push(pcpustat, env, rcv, app)
        ok = True
    finally:
        rcv.close()
        stop(procs)
        shutil.rmtree(tmp, ignore_errors=True)
    print("push_otlp_test: ok" if ok else "push_otlp_test: FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
