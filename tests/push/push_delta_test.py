#!/usr/bin/env python3
"""`pcpustat push --otlp --temporality delta` counted exactly: a receiver
that sums every delta it acknowledges must hold the writer's counts.

  push_delta_test.py PCPUSTAT FIXTURE

The agent lists the segment directory (so that a restarted writer, with
another pid, is found) and pushes every 0.2 s. The receiver (push_common's,
decoding each request with opentelemetry-proto) keeps only the requests it
answered 200; the test adds up their delta points per series and compares
them with what the application counted, at every step:

 - the agent's first collection sends no counter or histogram point (the
   segment did not exist yet: its series then arrive whole);
 - every point: DELTA temporality, monotonic, a value >= 0, start < time,
   and each point's start is the previous point's time for its series
   (no gap, no overlap): the receiver never counts an interval twice;
 - counts exact through 503 and 429 (retried), 500 (dropped: the next
   delta covers it), closed connections; the sum never exceeds the count
   (an overshoot is a double count) and reaches it once the receiver is ok;
 - histograms: explicit buckets, count and sum; exponential count and sum;
 - 50 series added in a family listed before the others (each later series
   changes place): the new ones arrive whole, the others exact;
 - a partial_success: acknowledged, the baseline advances, the log says
   the rejected increases are lost;
 - a counter reset (pcpu_counter_fetch_and_zero) then 5 more: +5, never a
   negative or wrapped delta;
 - the writer restarted (another pid): its series arrive whole, the old
   pid's stop;
 - the agent restarted without --delta-state: what was counted while no
   agent ran is not sent (the documented choice: the new agent starts from
   its first collection), and nothing is sent twice;
 - --delta-state with no file yet: nothing was sent, so a writer's counts
   made before the first agent started arrive whole; the file exists while
   the agent runs (its running form); at exit the baseline, from which the
   next agent continues (what was counted between them arrives, its points
   start where the old one's ended); after a killed agent (its running
   form left) the segments it had seen are taken up from the new agent's
   first collection (the 4 counted meanwhile not sent, nothing twice) and
   a writer started while no agent ran arrives whole; a corrupt file is
   said and replaced;
 - OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE (delta, lowmemory, any
   case) and --temporality over it; bad values and remote write exit 2.
"""
import bisect
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from push_common import HANG, Fixture, Lines, Receiver, attrs, run_push, stop, terminate, wait_for  # noqa: E402

DELTA, CUMULATIVE = 1, 2
BOUNDS_US = [1000, 10000, 100000]  # push_latency_seconds' bounds
EXACT_WAIT = 120  # seconds for the counts to arrive once the receiver is ok


def fail(msg):
    raise SystemExit("FAIL: " + msg)


class Sums:
    """The receiver's acknowledged requests added up, per series (metric
    name and attributes), checked point by point as they are read."""

    def __init__(self, rcv):
        self.rcv = rcv
        self.seen = 0
        self.sum = {}    # (name, attrs) -> total of a Sum; histograms: [count, sum, buckets]
        self.last = {}   # (name, attrs) -> time of its last point
        self.points = 0

    def update(self):
        with self.rcv.lock:
            new = self.rcv.requests[self.seen:]
            self.seen = len(self.rcv.requests)
        for _, req in new:
            for rm in req.resource_metrics:
                for sm in rm.scope_metrics:
                    for m in sm.metrics:
                        self.metric(m)
        return self

    def contiguous(self, key, p):
        if not p.start_time_unix_nano < p.time_unix_nano:
            fail("%r: start %d not before time %d" % (key, p.start_time_unix_nano, p.time_unix_nano))
        prev = self.last.get(key)
        if prev is not None and p.start_time_unix_nano != prev:
            fail("%r: start %d, the previous point's time %d (a gap or an overlap)"
                 % (key, p.start_time_unix_nano, prev))
        self.last[key] = p.time_unix_nano
        self.points += 1

    def metric(self, m):
        kind = m.WhichOneof("data")
        if kind == "gauge":
            return
        data = getattr(m, kind)
        if data.aggregation_temporality != DELTA:
            fail("%s: temporality %d, want DELTA" % (m.name, data.aggregation_temporality))
        if kind == "sum" and not data.is_monotonic:
            fail("%s: not monotonic" % m.name)
        for p in data.data_points:
            key = (m.name, tuple(sorted(attrs(p.attributes).items())))
            self.contiguous(key, p)
            if kind == "sum":
                v = p.as_int if p.WhichOneof("value") == "as_int" else p.as_double
                if v < 0:
                    fail("%r: a negative delta %r" % (key, v))
                self.sum[key] = self.sum.get(key, 0) + v
            elif kind == "histogram":
                h = self.sum.setdefault(key, [0, 0.0, [0] * len(p.bucket_counts)])
                if len(h[2]) != len(p.bucket_counts) or any(c > 2**62 for c in p.bucket_counts):
                    fail("%r: buckets %r" % (key, list(p.bucket_counts)))
                h[0] += p.count
                h[1] += p.sum
                h[2] = [a + b for a, b in zip(h[2], p.bucket_counts)]
            else:  # exponential
                n = p.zero_count + sum(p.positive.bucket_counts) + sum(p.negative.bucket_counts)
                if n != p.count or p.count > 2**62:
                    fail("%r: count %d, buckets %d" % (key, p.count, n))
                h = self.sum.setdefault(key, [0, 0.0, None])
                h[0] += p.count
                h[1] += p.sum

    def get(self, name, pid, segment="pushfix", **labels):
        want = dict(labels, pcpu_segment=segment, pcpu_pid=str(pid))
        for (n, a), v in self.sum.items():
            if n == name and dict(a) == want:
                return v
        return 0 if name == "push_requests" else [0, 0.0, [0, 0, 0, 0]]


class App:
    """The fixture with what it counted since it started."""

    def __init__(self, fixture, env):
        self.f = Fixture(fixture, env)
        self.pid = self.f.pid
        self.get = 0    # push_requests{method="GET"} as the receiver should total it
        self.obs = []   # observations, microseconds

    def add(self, k):
        self.f.cmd("add %d" % k)
        self.get += k

    def observe(self, us):
        self.f.cmd("observe %d" % us)
        self.obs.append(us)

    def buckets(self):
        b = [0] * (len(BOUNDS_US) + 1)
        for v in self.obs:
            b[bisect.bisect_left(BOUNDS_US, v)] += 1
        return b


def exact(sums, app, what, extra_get=0):
    """Waits until the receiver's totals equal the application's counts;
    fails at once on an overshoot (a count sent twice)."""
    want = app.get + extra_get

    def arrived():
        got = sums.update().get("push_requests", app.pid, method="GET")
        if got > want:
            fail("%s: the receiver totals %d, the application counted %d: counted twice" % (what, got, want))
        return got == want

    wait_for(arrived, "%s: the receiver's total of push_requests{GET} = %d (it has %r)"
             % (what, want, sums.get("push_requests", app.pid, method="GET")), EXACT_WAIT)
    h = sums.get("push_latency_seconds", app.pid)
    wait_for(lambda: sums.update().get("push_latency_seconds", app.pid)[0] == len(app.obs),
             "%s: histogram count %d" % (what, len(app.obs)), EXACT_WAIT)
    h = sums.get("push_latency_seconds", app.pid)
    if h[2] != app.buckets() or abs(h[1] - sum(app.obs) / 1e6) > 1e-9 * max(1, sum(app.obs)):
        fail("%s: explicit histogram %r, want buckets %r sum %r" % (what, h, app.buckets(), sum(app.obs) / 1e6))
    e = sums.get("push_latency_native_seconds", app.pid)
    if e[0] != len(app.obs) or abs(e[1] - sum(app.obs) / 1e6) > 1e-9 * max(1, sum(app.obs)):
        fail("%s: exponential histogram count %d sum %r, want %d %r" % (what, e[0], e[1], len(app.obs),
                                                                      sum(app.obs) / 1e6))
    print("ok   %s: GET %d, %d observations, exact" % (what, want, len(app.obs)))


def fault(sums, rcv, log, app, mode, events, what, answered):
    """The receiver answers `mode` while the application counts; then ok:
    the totals are exact."""
    start = log.count("retrying in") + log.count("dropped")
    base = rcv.answered(answered)
    rcv.mode = mode
    n = [0]

    def counting():
        n[0] += 1
        app.add(n[0])
        if n[0] % 3 == 0:
            app.observe(n[0] * 997)
        return (log.count("retrying in") + log.count("dropped") >= start + events
                and rcv.answered(answered) >= base + events)

    wait_for(counting, what)
    rcv.mode = "ok"
    exact(sums, app, what)


def agent(pcpustat, env, url, *extra):
    p = subprocess.Popen([pcpustat, "push", "--otlp", url, "--temporality", "delta", "-v", "--interval", "0.2",
                          "--min-backoff", "0.05", "--max-backoff", "0.2", "--timeout", "5"] + list(extra),
                         env=env, stderr=subprocess.PIPE, text=True)
    return p, Lines(p.stderr)


def selection(pcpustat, env, fixture):
    """The variable, the option over it, the values refused."""
    rcv = Receiver()
    try:
        def temporality(env2, *args):
            with rcv.lock:
                rcv.requests.clear()
            rc, err = run_push(pcpustat, env2, ["--otlp", rcv.url, "--count", "2", "--interval", "0.1"] + list(args)
                               + ["pushfix"])
            if rc != 0 or len(rcv.requests) != 2:
                fail("push %r: exit %d, %d requests: %s" % (args, rc, len(rcv.requests), err))
            ms = {m.name: m for m in rcv.requests[1][1].resource_metrics[0].scope_metrics[0].metrics}
            return (ms["push_requests"].sum.aggregation_temporality,
                    ms["push_latency_seconds"].histogram.aggregation_temporality,
                    ms["push_queue_depth"].WhichOneof("data"))

        var = "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE"
        for value, want in (("delta", DELTA), ("LowMemory", DELTA), ("Cumulative", CUMULATIVE)):
            got = temporality(dict(env, **{var: value}))
            if got != (want, want, "gauge"):
                fail("%s=%s: %r" % (var, value, got))
        got = temporality(dict(env, **{var: "delta"}), "--temporality", "cumulative")
        if got != (CUMULATIVE, CUMULATIVE, "gauge"):
            fail("--temporality cumulative over %s=delta: %r" % (var, got))
        got = temporality(env, "--temporality", "delta")
        if got != (DELTA, DELTA, "gauge"):
            fail("--temporality delta: %r" % (got,))
        # The first request of a named, existing segment: gauges only.
        names = {m.name for m in rcv.requests[0][1].resource_metrics[0].scope_metrics[0].metrics}
        if "push_requests" in names or "push_queue_depth" not in names:
            fail("the first delta request has %r: want the gauges only" % sorted(names))
        for args, env2, text in ((["--temporality", "sometimes"], env, "--temporality: \"sometimes\""),
                                 ([], dict(env, **{var: "low_memory"}), var + ": \"low_memory\""),
                                 (["--remote-write", "http://127.0.0.1:1/api/v1/write", "--temporality", "delta"],
                                  env, "delta is for OTLP")):
            a = args if args[:1] == ["--remote-write"] else ["--otlp", rcv.url] + args
            rc, err = run_push(pcpustat, env2, a + ["--count", "1", "pushfix"])
            if rc != 2 or text not in err:
                fail("%r: exit %d, %r (want 2 and %r)" % (args, rc, err, text))
        # Remote write ignores the variable.
        rc, err = run_push(pcpustat, dict(env, **{var: "delta"}),
                           ["--remote-write", "http://127.0.0.1:1/api/v1/write", "--count", "1", "--timeout",
                            "0.5", "pushfix"])
        if rc == 2:
            fail("remote write refused %s: %s" % (var, err))
        print("ok   %s (delta, lowmemory, any case), --temporality over it, bad values and remote write "
              "refused" % var)
    finally:
        rcv.close()


def main():
    pcpustat, fixture = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="pcpu-push-delta.")
    segdir = os.path.join(tmp, "seg")
    os.mkdir(segdir, 0o700)
    env = dict(os.environ, PCPU_SEGMENT_DIR=segdir)
    procs = []
    ok = False
    rcv = Receiver()
    try:
        app = App(fixture, env)
        procs.append(app.f.p)
        selection(pcpustat, env, fixture)
        stop(procs)
        procs.clear()
        # The agent first, then the application: its series arrive whole.
        sums = Sums(rcv)
        ag, log = agent(pcpustat, env, rcv.url)
        procs.append(ag)
        wait_for(lambda: rcv.requests, "the agent's first push")
        # A second writer, listed after the first: when the first goes, each
        # of its series takes the first's place (the baseline's binary
        # search) and must not be sent whole again.
        other = Fixture(fixture, env, "pushfiz")
        procs.append(other.p)
        other.cmd("add 100")
        app = App(fixture, env)
        procs.append(app.f.p)
        app.add(1000)
        app.observe(500)
        app.observe(5000)
        app.observe(50000)
        app.observe(2000000)
        exact(sums, app, "a writer started after the agent")
        for k in range(1, 30):
            app.add(k)
            if k % 7 == 0:
                app.observe(k * 300)
        exact(sums, app, "counting while pushing")
        # 50 new series in a new family sorted before push_requests: every
        # series after them changes place (the baseline's binary search).
        app.f.cmd("many 50")
        app.add(11)
        exact(sums, app, "50 series added before the others")
        wait_for(lambda: all(sums.update().sum.get(("push_many", (("id", str(i)), ("pcpu_pid", str(app.pid)),
                                                                  ("pcpu_segment", "pushfix")))) == i + 1
                             for i in range(50)), "push_many_total{id} = id + 1, each", EXACT_WAIT)
        fault(sums, rcv, log, app, "503", 4, "503 (retried)", 503)
        fault(sums, rcv, log, app, "429", 2, "429 (retried)", 429)
        fault(sums, rcv, log, app, "500", 3, "500 (dropped, not retried)", 500)
        fault(sums, rcv, log, app, "close", 3, "closed connections", "close")
        # A partial_success is an acknowledgement: the baseline advances
        # (this receiver kept every point, so the totals stay exact) and
        # the log says the rejected increases are not sent again.
        rcv.mode = "partial"
        wait_for(lambda: (app.add(1) or True) and log.count("partial success") >= 1, "a partial success")
        rcv.mode = "ok"
        if "not sent again: the request was acknowledged, so the delta baseline advanced" not in log.text():
            fail("partial success in delta mode not said: %s" % log.text()[-600:])
        exact(sums, app, "a partial_success (acknowledged: the baseline advanced)")
        # A counter reset by the application, then 5 more.
        app.f.cmd("reset")
        app.f.cmd("add 5")
        app.get += 5
        exact(sums, app, "a counter reset, then 5")
        if sums.points < 20:
            fail("only %d delta points" % sums.points)
        # The writer restarted: another pid, its series whole.
        old = app
        old.f.p.stdin.close()
        old.f.p.wait(timeout=HANG)
        procs.remove(old.f.p)
        app = App(fixture, env)
        procs.append(app.f.p)
        app.add(42)
        app.observe(700)
        exact(sums, app, "the writer restarted (pid %d, was %d)" % (app.pid, old.pid))
        before = sums.get("push_requests", old.pid, method="GET")
        if before != old.get:
            fail("the old writer's total moved: %d, want %d" % (before, old.get))
        oz = sums.update().get("push_requests", other.pid, "pushfiz", method="GET")
        if oz != 100:
            fail("the second writer's total is %d after the first went, want 100" % oz)
        # The agent restarted: its final push delivers everything, what is
        # counted while none runs is not sent, then counting goes on.
        rc, err = terminate(ag)
        procs.remove(ag)
        # Two readers share the agent's stderr (its Lines thread and
        # communicate()): the summary line reaches either.
        log.t.join(HANG)
        err = log.text() + err
        if rc != 1 or " 0 undelivered" not in err:  # 1: the 500s were dropped
            fail("agent exit %d: %s" % (rc, err[-800:]))
        exact(sums, app, "the agent's final push")
        app.add(7)  # while no agent runs: not sent (documented)
        app.get -= 7
        sums.update().last.clear()  # a new agent: its points start at its first collection
        ag, log = agent(pcpustat, env, rcv.url)
        procs.append(ag)
        n = len(rcv.requests)
        wait_for(lambda: len(rcv.requests) >= n + 2, "the restarted agent's first pushes")
        app.add(3)
        app.observe(900)
        exact(sums, app, "the agent restarted (7 counted between agents not sent, nothing twice)")
        rc, err = terminate(ag)
        procs.remove(ag)
        if rc != 0:
            fail("agent exit %d: %s" % (rc, err[-800:]))

        # --delta-state, no file yet: no agent sent anything for it, so a
        # writer's counts made before the first agent arrive whole. (The
        # writers the agents above pushed are stopped: their counts were
        # sent without a state file, which a new file cannot know of.)
        for w in (app.f.p, other.p):
            w.stdin.close()
            w.wait(timeout=HANG)
            procs.remove(w)
        app = App(fixture, env)
        procs.append(app.f.p)
        app.add(50)
        app.observe(600)
        state = os.path.join(tmp, "delta.state")
        ag, log = agent(pcpustat, env, rcv.url, "--delta-state", state)
        procs.append(ag)
        exact(sums, app, "--delta-state, no file yet: the 50 counted before the first agent arrive whole")
        if not os.path.exists(state):
            fail("no state file while the agent runs (its running form)")
        rc, err = terminate(ag)
        procs.remove(ag)
        if rc != 0 or not os.path.exists(state):
            fail("agent exit %d, state file %s: %s" % (rc, os.path.exists(state), err[-800:]))
        # --delta-state: the next agent continues from the baseline the
        # last one left: what was counted between them arrives, and its
        # points start where the last agent's ended (checked per point).
        app.add(9)
        app.observe(1100)
        ag, log = agent(pcpustat, env, rcv.url, "--delta-state", state)
        procs.append(ag)
        exact(sums, app, "--delta-state: the 9 counted between agents arrive")
        # Killed: its running form stays. The segment it had seen is taken
        # up from the next agent's first collection (the 4 counted meanwhile
        # are not sent: the killed agent's baseline is lost, so nothing is
        # sent twice); a writer started while no agent ran was never sent:
        # it arrives whole.
        ag.kill()
        ag.wait()
        procs.remove(ag)
        if not os.path.exists(state):
            fail("a killed agent left no state file (its running form)")
        app.add(4)
        app.get -= 4
        late = App(fixture, env)
        procs.append(late.f.p)
        late.add(60)
        late.observe(700)
        sums.update().last.clear()
        ag, log = agent(pcpustat, env, rcv.url, "--delta-state", state)
        procs.append(ag)
        n = len(rcv.requests)
        wait_for(lambda: len(rcv.requests) >= n + 2, "the first pushes after a killed agent")
        app.add(2)
        exact(sums, app, "after a killed agent (4 not sent, nothing twice)")
        exact(sums, late, "a writer started while no agent ran: its 60 arrive whole")
        if "did not exit cleanly" not in log.text():
            fail("the running form of a killed agent not said: %s" % log.text()[-800:])
        rc, err = terminate(ag)
        procs.remove(ag)
        if rc != 0:
            fail("agent exit %d: %s" % (rc, err[-800:]))
        # A file that is not a baseline: said, removed, the agent starts over.
        with open(state, "wb") as f:
            f.write(b"PCPUDLT\x01 not really")
        rc, err = run_push(pcpustat, env, ["--otlp", rcv.url, "--temporality", "delta", "--delta-state", state,
                                           "--count", "1", "pushfix"])
        if rc != 0 or "a state file of an earlier pcpustat (version 1" not in err or "starting over" not in err:
            fail("an earlier version's state file: exit %d: %s" % (rc, err))
        with open(state, "wb") as f:
            f.write(b"PCPUDLX\x04 not really")
        rc, err = run_push(pcpustat, env, ["--otlp", rcv.url, "--temporality", "delta", "--delta-state", state,
                                           "--count", "1", "pushfix"])
        if rc != 0 or "not a state file of this pcpustat" not in err or "starting over" not in err:
            fail("a corrupt state file: exit %d: %s" % (rc, err))
        rc, err = run_push(pcpustat, env, ["--otlp", rcv.url, "--delta-state", state, "--count", "1", "pushfix"])
        if rc != 2 or "--delta-state goes with delta" not in err:
            fail("--delta-state without delta: exit %d: %s" % (rc, err))
        print("ok   --delta-state: none yet sends whole, a restart loses nothing, a killed agent's segments are "
              "taken up, a new writer's sent whole, an earlier version's file and a corrupt one refused")
        print("ok   %d delta points, each starting where the one before ended" % sums.points)
        ok = True
    finally:
        rcv.close()
        stop(procs)
        shutil.rmtree(tmp, ignore_errors=True)
    print("push_delta_test: ok" if ok else "push_delta_test: FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
