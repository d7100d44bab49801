#!/usr/bin/env python3
"""A real Prometheus scrapes a log-linear histogram that keeps filling.

  prometheus_histogram_test.py PCPUSTAT FIXTURE [--protobuf]

The test application (segment_fixture latency) records random latencies,
log-uniform from 1 ms to a bound that doubles every second up to 20 s, so
buckets fill for the first time between scrapes; pcpustat serve exposes its segment; Prometheus 2.42 (Debian
`prometheus`) scrapes it every second on loopback. Checked, as a user's
dashboards would see it:

 - every `le` series exists from the first scrape on (the same bounded set;
   a series appearing later holding a large cumulative count is what broke
   rate() before);
 - rate(test_latency_seconds_bucket[5s]) is monotone in `le`, at several
   times while recording;
 - once recording stops, histogram_quantile() agrees with the library's
   pcpu_snapshot_quantile() (printed by the application) within the width
   of the exposed bucket holding it;
 - with --protobuf, the same values recorded into an exponential histogram
   (schema 3) are ingested as a Prometheus native histogram (its count is
   the application's), and histogram_quantile() over the native series is
   within one bucket (a factor 2^(1/8)) of the library's quantile.

With --protobuf, Prometheus runs with --enable-feature=native-histograms,
so it asks for the protobuf exposition (PCPU_FORMAT_PROTOBUF) and parses
pcpu's protobuf writer's classic histograms; the checks are the same.

Every wait is bounded; exit 77 only where Prometheus cannot be installed
(prometheus_test.find_prometheus()).
"""
import os
import shutil
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prometheus_test import (find_prometheus, http_json, launch_prometheus,  # noqa: E402
                             start_app_and_exporter, stop)

SEL = 'test_latency_seconds_bucket{pcpu_segment="promhist"}'


def stop_and_read_quantiles(app):
    """Stops segment_fixture latency's recording; returns the number of
    observations and {"quantile"|"native": {q: pcpu_snapshot_quantile()}}
    it printed for the log-linear and the exponential family."""
    app.stdin.write("stop\n")
    app.stdin.flush()
    total = int(app.stdout.readline().split()[1])
    lib = {"quantile": {}, "native": {}}
    for _ in range(8):
        kind, q, v = app.stdout.readline().split()
        lib[kind][float(q)] = float(v)
    return total, lib


def query(base, q, t=None):
    url = base + "/api/v1/query?query=" + urllib.parse.quote(q)
    if t is not None:
        url += "&time=%.3f" % t
    d = http_json(url)
    if d.get("status") != "success":
        raise SystemExit("FAIL: query %s: %r" % (q, d))
    return d["data"]["result"]


def le_value(r):
    return float(r["metric"]["le"])


def check_rate_monotone(base):
    """(series, +Inf rate) once rate() is monotone in le; None when the
    query found too few series: the last scrape timed out on a loaded
    machine (its series are stale at "now"), so the caller asks again."""
    res = query(base, "rate(%s[5s])" % SEL)
    if len(res) < 10:
        print("..   rate() over buckets gave %d series (a scrape timed out?): again" % len(res))
        return None
    pts = sorted((le_value(r), float(r["value"][1])) for r in res)
    for (le0, v0), (le1, v1) in zip(pts, pts[1:]):
        if v1 < v0:
            raise SystemExit("FAIL: rate() not monotone in le: le=%g -> %g/s, then le=%g -> %g/s"
                             % (le0, v0, le1, v1))
    return len(pts), pts[-1][1]


def main():
    pcpustat, fixture = sys.argv[1], sys.argv[2]
    protobuf = "--protobuf" in sys.argv[3:]
    prom = find_prometheus()
    tmp = tempfile.mkdtemp(prefix="pcpu-promhist.")
    segdir = os.path.join(tmp, "seg")
    os.mkdir(segdir, 0o700)
    env = dict(os.environ, PCPU_SEGMENT_DIR=segdir)
    procs = []
    ok = False
    try:
        app, target = start_app_and_exporter(procs, fixture, ["latency", "promhist"], pcpustat,
                                             "promhist", env)

        if protobuf:
            # What Prometheus 2.42 asks for with native histograms enabled.
            req = urllib.request.Request("http://%s/metrics" % target, headers={
                "Accept": "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
                          "encoding=delimited;q=0.8,application/openmetrics-text;version=1.0.0;"
                          "q=0.6,text/plain;version=0.0.4;q=0.4,*/*;q=0.1"})
            with urllib.request.urlopen(req, timeout=60) as r:
                ctype = r.headers.get("Content-Type", "")
            if not ctype.startswith("application/vnd.google.protobuf"):
                raise SystemExit("FAIL: the exporter answered %r to a protobuf request" % ctype)
            print("ok   the exporter serves %s" % ctype)

        srv, base = launch_prometheus(
            prom, tmp, target, ["--enable-feature=native-histograms"] if protobuf else [])
        procs.append(srv)

        # Recording: wait for 7 scrapes of the histogram, checking rate().
        # The deadlines only catch a Prometheus that never gets there: a
        # loaded machine may take long.
        t0 = time.time()
        deadline = time.monotonic() + 3000
        checks = 0
        while checks < 3:
            if time.monotonic() > deadline:
                raise SystemExit("FAIL: too few scrapes of the histogram (or rate() over "
                                 "fewer than 10 series) within 3000 s")
            time.sleep(1)
            n = query(base, "count_over_time(%s[1m])" % SEL)
            if not n or min(float(r["value"][1]) for r in n) < 7:
                continue
            got = check_rate_monotone(base)
            if got is None:
                continue
            nser, top = got
            checks += 1
            print("ok   rate(..._bucket[5s]) monotone in le over %d series (+Inf %.0f/s)"
                  % (nser, top))

        # Every `le` series was there from the first scrape on: all have as
        # many samples as the series that has most.
        n = query(base, "count_over_time(%s[1m])" % SEL)
        counts = sorted(float(r["value"][1]) for r in n)
        if counts[0] != counts[-1]:
            raise SystemExit("FAIL: some le series appeared later: sample counts %g..%g"
                             % (counts[0], counts[-1]))
        print("ok   all %d le series present from the first scrape (%d samples each)"
              % (len(counts), counts[0]))

        # Stop recording; the library's own quantiles of the final counts.
        total, libs = stop_and_read_quantiles(app)
        lib = libs["quantile"]
        deadline = time.monotonic() + 300
        while True:
            r = query(base, 'test_latency_seconds_count{pcpu_segment="promhist"}')
            if r and float(r[0]["value"][1]) == total:
                # Every query below is evaluated at this instant, when the
                # final scrape's series are known to be there: a later
                # scrape that times out (a loaded machine, a sanitizer
                # build) marks them stale, and a query at "now" then finds
                # none.
                t_final = float(r[0]["value"][0])
                break
            if time.monotonic() > deadline:
                raise SystemExit("FAIL: Prometheus never saw the final count %d: %r" % (total, r))
            time.sleep(0.3)
        les = sorted(le_value(r) for r in query(base, SEL, t_final))
        for q, v in sorted(lib.items()):
            pr = query(base, "histogram_quantile(%g, %s)" % (q, SEL), t_final)
            p = float(pr[0]["value"][1])
            hi = min(le for le in les if le >= v)
            lo = max([le for le in les if le < v] or [0.0])
            if not (lo <= p <= hi):
                raise SystemExit("FAIL: q=%g: Prometheus %.9g, library %.9g, not both in the "
                                 "exposed bucket (%g, %g]" % (q, p, v, lo, hi))
            print("ok   q=%-4g Prometheus %.6g, library %.6g: same exposed bucket (%.6g, %.6g]"
                  % (q, p, v, lo, hi))
        if protobuf:
            # The exponential family, ingested as a native histogram.
            nsel = 'test_latency_native_seconds{pcpu_segment="promhist"}'
            deadline = time.monotonic() + 300
            while True:
                r = query(base, "histogram_count(%s)" % nsel)
                if r and float(r[0]["value"][1]) == total:
                    t_native = float(r[0]["value"][0])  # as t_final above
                    break
                if time.monotonic() > deadline:
                    raise SystemExit("FAIL: no native histogram with the final count %d: %r"
                                     % (total, r))
                time.sleep(0.3)
            base_ratio = 2 ** (2 ** -3)  # schema 3: a bucket's width
            for q, v in sorted(libs["native"].items()):
                p = float(query(base, "histogram_quantile(%g, %s)" % (q, nsel), t_native)[0]["value"][1])
                if not (v / base_ratio <= p <= v * base_ratio):
                    raise SystemExit("FAIL: native q=%g: Prometheus %.9g, library %.9g: more "
                                     "than a bucket (x%.4f) apart" % (q, p, v, base_ratio))
                print("ok   native q=%-4g Prometheus %.6g, library %.6g: within a bucket (x%.4f)"
                      % (q, p, v, base_ratio))
        print("     (%d observations, %.1f s of recording, scraped as %s)"
              % (total, time.time() - t0, "protobuf" if protobuf else "text"))
        ok = True
    finally:
        stop(procs)
        shutil.rmtree(tmp, ignore_errors=True)
    print("prometheus_histogram_test: ok" if ok else "prometheus_histogram_test: FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
