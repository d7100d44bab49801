#!/usr/bin/env python3
"""`pcpustat push --remote-write` into a real Prometheus.

  push_prometheus_test.py PCPUSTAT FIXTURE

Prometheus 2.42 (Debian `prometheus`) runs on loopback with its own data
directory, --web.enable-remote-write-receiver and
--enable-feature=native-histograms. The test application (push_fixture)
records known values; `pcpustat push --count 1` sends them; PromQL over the
HTTP API must return exactly what was recorded:

 - counters (push_requests_total), also after a reset between two pushes:
   the new value, and resets() counts the reset;
 - gauges, a scaled one included (21.5 from 215 with scale_exp10 -1);
 - a classic histogram: every _bucket, _sum, _count, and
   histogram_quantile() in the right bucket;
 - the native histogram (exponential, schema 3): histogram_count(),
   histogram_sum() exact, histogram_quantile() within the native bucket
   holding the true quantile;
 - pcpu_segment_up 1, and the external labels (--job, --instance, --label);
   a planted file that is not a segment travels as pcpu_segment_up 0 with
   its reason ("corrupt"), as serve exposes it;
 - with native histograms disabled (a second Prometheus, without the
   feature), Prometheus 2.42 answers 500 "native histograms are disabled"
   to a request holding one -- nothing of it is stored -- and the same push
   without --native-histograms is stored: the check that the flag matters.

Exit 77 only where Prometheus cannot be installed (find_prometheus()).
"""
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from push_common import (Fixture, find_prometheus, launch_prometheus, promql, run_push,  # noqa: E402
                         stop)

SEL = '{pcpu_segment="pushfix",job="pushtest",instance="node1",site="lab"}'
# 50 observations of 500 us, 40 of 5 ms, 10 of 50 ms.
OBS = [500] * 50 + [5000] * 40 + [50000] * 10
SUM_S = sum(OBS) / 1e6  # 0.725


def one(base, q):
    r = promql(base, q)
    if len(r) != 1:
        raise SystemExit("FAIL: %s gave %d series: %r" % (q, len(r), r))
    return float(r[0]["value"][1]), r[0]["metric"]


def expect(base, q, want):
    v, _ = one(base, q)
    if v != want:
        raise SystemExit("FAIL: %s = %r, want %r" % (q, v, want))
    print("ok   %s = %r" % (q, v))


def expect_within(base, q, lo, hi):
    v, _ = one(base, q)
    if not lo < v <= hi:
        raise SystemExit("FAIL: %s = %r, not in (%r, %r]" % (q, v, lo, hi))
    print("ok   %s = %r in (%g, %g]" % (q, v, lo, hi))


def push(pcpustat, env, base, native=True, targets=("pushfix",)):
    args = ["--remote-write", base + "/api/v1/write", "--count", "1", "--job", "pushtest",
            "--instance", "node1", "--label", "site=lab"] + list(targets)
    rc, err = run_push(pcpustat, env, args + (["--native-histograms"] if native else []))
    return rc, err


def check_first(base, app):
    _, labels = one(base, "push_requests_total{method=\"GET\"}")
    want = {"__name__": "push_requests_total", "method": "GET", "pcpu_segment": "pushfix",
            "pcpu_pid": str(app.pid), "job": "pushtest", "instance": "node1", "site": "lab"}
    if labels != want:
        raise SystemExit("FAIL: labels %r, want %r" % (labels, want))
    print("ok   labels %r" % sorted(labels.items()))
    expect(base, 'push_requests_total{method="GET"}', 12345678901.0)
    expect(base, 'push_requests_total{method="POST"}', 7.0)
    expect(base, "push_queue_depth" + SEL, -42.0)
    expect(base, "push_temperature_celsius" + SEL, 21.5)
    expect(base, "pcpu_segment_up" + SEL, 1.0)
    v, labels = one(base, 'pcpu_segment_up{pcpu_segment="planted"}')
    if v != 0 or labels.get("reason") != "corrupt":
        raise SystemExit("FAIL: the planted file: %r %r" % (v, labels))
    print("ok   pcpu_segment_up{pcpu_segment=\"planted\",reason=\"corrupt\"} = 0")
    for le, n in (("0.001", 50), ("0.01", 90), ("0.1", 100), ("+Inf", 100)):
        expect(base, 'push_latency_seconds_bucket{le="%s"}' % le, float(n))
    expect(base, "push_latency_seconds_sum", SUM_S)
    expect(base, "push_latency_seconds_count", 100.0)
    expect(base, "push_latency_ll_seconds_count", 100.0)
    # Ranks inside a bucket (not on its bound, where the interpolation's
    # rounding may land a hair above it).
    expect_within(base, "histogram_quantile(0.25, push_latency_seconds_bucket)", 0, 0.001)
    expect_within(base, "histogram_quantile(0.7, push_latency_seconds_bucket)", 0.001, 0.01)
    expect_within(base, "histogram_quantile(0.95, push_latency_seconds_bucket)", 0.01, 0.1)
    # The native histogram: exact count and sum; a quantile within the
    # schema-3 bucket (ratio 2^(1/8)) holding the true value.
    expect(base, "histogram_count(push_latency_native_seconds)", 100.0)
    expect(base, "histogram_sum(push_latency_native_seconds)", SUM_S)
    r = 2 ** (1 / 8)
    expect_within(base, "histogram_quantile(0.25, push_latency_native_seconds)", 0.0005 / r, 0.0005 * r)
    expect_within(base, "histogram_quantile(0.7, push_latency_native_seconds)", 0.005 / r, 0.005 * r)
    expect_within(base, "histogram_quantile(0.97, push_latency_native_seconds)", 0.05 / r, 0.05 * r)
    # ... and only that: no classic series of the native family.
    for suffix in ("_bucket", "_sum", "_count"):
        if promql(base, "push_latency_native_seconds" + suffix):
            raise SystemExit("FAIL: push_latency_native_seconds%s sent with --native-histograms" % suffix)
    print("ok   --native-histograms: the exponential family as its native histogram only")


def main():
    pcpustat, fixture = sys.argv[1], sys.argv[2]
    prom = find_prometheus()
    tmp = tempfile.mkdtemp(prefix="pcpu-push-prom.")
    segdir = os.path.join(tmp, "seg")
    os.mkdir(segdir, 0o700)
    env = dict(os.environ, PCPU_SEGMENT_DIR=segdir)
    procs = []
    ok = False
    try:
        srv, base = launch_prometheus(prom, tmp, ["--enable-feature=native-histograms"])
        procs.append(srv)
        app = Fixture(fixture, env)
        procs.append(app.p)
        app.cmd("add 12345678901", "post 7", "gauge -42", "temp 215", *["observe %d" % v for v in OBS])
        # A planted file that is not a segment: reported down, with its reason.
        with open(os.path.join(segdir, "pcpu.%d.planted" % os.getpid()), "wb") as f:
            f.write(b"JUNK" * 2048)
        rc, err = push(pcpustat, env, base, targets=[])
        if rc != 0:
            raise SystemExit("FAIL: push exited %d: %s" % (rc, err))
        check_first(base, app)

        # A counter reset between two pushes: the new value, one reset.
        app.cmd("reset", "add 3", "gauge 5")
        rc, err = push(pcpustat, env, base)
        if rc != 0:
            raise SystemExit("FAIL: second push exited %d: %s" % (rc, err))
        expect(base, 'push_requests_total{method="GET"}', 3.0)
        expect(base, 'resets(push_requests_total{method="GET"}[1h])', 1.0)
        expect(base, 'resets(push_requests_total{method="POST"}[1h])', 0.0)
        expect(base, 'count_over_time(push_requests_total{method="GET"}[1h])', 2.0)
        expect(base, "push_queue_depth", 5.0)

        # Native histograms disabled: the whole request is refused (500),
        # and without --native-histograms it goes through.
        srv2, base2 = launch_prometheus(prom, tmp)
        procs.append(srv2)
        rc, err = push(pcpustat, env, base2)
        if rc == 0 or "HTTP 500: native histograms are disabled" not in err:
            raise SystemExit("FAIL: a native histogram to a Prometheus without the feature: %d %s" % (rc, err))
        if promql(base2, "push_requests_total"):
            raise SystemExit("FAIL: part of a refused request was stored")
        print("ok   without --enable-feature=native-histograms: HTTP 500, nothing stored")
        rc, err = push(pcpustat, env, base2, native=False)
        if rc != 0:
            raise SystemExit("FAIL: classic-only push exited %d: %s" % (rc, err))
        expect(base2, 'push_requests_total{method="GET"}', 3.0)
        expect(base2, "push_latency_native_seconds_count", 100.0)
        if promql(base2, "push_latency_native_seconds"):
            raise SystemExit("FAIL: a native series without --native-histograms")
        print("ok   without --native-histograms: classic series only")
        ok = True
    finally:
        stop(procs)
        shutil.rmtree(tmp, ignore_errors=True)
    print("push_prometheus_test: ok" if ok else "push_prometheus_test: FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
