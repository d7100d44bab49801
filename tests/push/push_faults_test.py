#!/usr/bin/env python3
"""`pcpustat push` against a receiver that is down, slow, failing (500,
429), refusing (400) or closing connections.

  push_faults_test.py PCPUSTAT FIXTURE

One agent (--interval 0.2, --queue 3, backoff 0.05..0.4 s, --timeout 1)
pushes OTLP to a test receiver while the application keeps counting; the
receiver goes through each fault in turn. Checked, each by events (the
agent's log lines and the receiver's answers), never by elapsed time:

 - the application answers every command while the receiver is failing
   (it only publishes its segment; the agent is another process, so its
   adds cannot wait for the network -- shown here, not timed);
 - 502, 503, 504, 429, timeouts, closed connections and a receiver that
   is down are retried with backoff (the delays in the log double up to
   the max); a 503 with Retry-After: 1 is retried after it, not after the
   backoff (the log says so, and the receiver's next answer comes no
   sooner than 1 s after it -- a lower bound, which load cannot break);
 - a 200 with an OTLP partial_success is logged with its count and message;
 - the agent's memory stays bounded through a long outage with 20,000
   series: its peak RSS (VmHWM) after many more collections than the
   queue holds is the peak it had once the queue was full, within 2 MiB
   (not under TSan, whose allocator keeps freed memory; ASan runs it
   without quarantine), and the queue dropped its oldest requests;
 - once the receiver is back, the counts arrive exact: a request carries
   the application's final total (values are cumulative: the requests
   dropped from the full queue lost no count);
 - 400, and OTLP's 500 (OTLP/HTTP retries 429, 502, 503 and 504 only),
   are not retried: with --count 1 the agent sends exactly one request,
   logs the receiver's answer and "not retried", and exits 1;
 - a 503 with --count 1: one try at the end, exit 1, "1 undelivered",
   counted as one failed attempt and no retry.
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from push_common import (HANG, Fixture, Lines, Receiver, attrs, metrics_of, point, rss_kib,  # noqa: E402
                         run_push, stop, wait_for)


def fail(msg):
    raise SystemExit("FAIL: " + msg)


def post_value(req):
    return point(metrics_of(req)["push_requests"], "sum", method="POST").as_int


class Counting:
    """The application's POST counter, and the commands it answered."""

    def __init__(self, app):
        self.app = app
        self.total = 0
        self.answered = 0

    def add(self, n=3):
        for _ in range(n):
            self.app.cmd("post 5")
            self.total += 5
            self.answered += 1


def arrives_exact(rcv, c, what):
    wait_for(lambda: rcv.requests and post_value(rcv.last()[1]) == c.total,
             "%s: the final count %d arrives" % (what, c.total))
    print("ok   %s: the count arrives exact once it is back (%d)" % (what, c.total))


def fault(rcv, log, c, mode, events, what, answered=None):
    """Puts the receiver in `mode` until the agent logged `events` more
    retries (and the receiver answered `answered` that many times),
    counting all along; then back to ok and the final count arrives."""
    start = log.count("retrying in")
    rcv.mode = mode
    wait_for(lambda: (c.add(1) or True) and log.count("retrying in") >= start + events
             and (answered is None or rcv.answered(answered) >= events), what)
    rcv.mode = "ok"
    arrives_exact(rcv, c, what)


def continuous(pcpustat, env, app, rcv):
    c = Counting(app)
    agent = subprocess.Popen([pcpustat, "push", "--otlp", rcv.url, "-v", "--interval", "0.2", "--queue", "3",
                              "--min-backoff", "0.05", "--max-backoff", "0.4", "--timeout", "1", "pushfix"],
                             env=env, stderr=subprocess.PIPE, text=True)
    log = Lines(agent.stderr)
    try:
        wait_for(lambda: rcv.requests, "a first push")
        fault(rcv, log, c, "503", 4, "503", 503)
        fault(rcv, log, c, "502", 2, "502", 502)
        fault(rcv, log, c, "504", 2, "504", 504)
        fault(rcv, log, c, "429", 3, "429", 429)
        # Retry-After: 1 -- the next try waits for it (backoff is 0.05 s).
        start = log.count("(Retry-After)")
        rcv.retry_after = 1
        rcv.mode = "503ra"
        wait_for(lambda: (c.add(1) or True) and log.count("(Retry-After)") >= start + 1, "a Retry-After")
        wait_for(lambda: len(rcv.ra_times) >= 2, "the try after Retry-After")
        rcv.mode = "ok"
        with rcv.lock:
            gap = rcv.ra_times[1] - rcv.ra_times[0]
        if "retrying in 1 s (Retry-After)" not in log.text() or gap < 0.95:
            fail("503 with Retry-After: 1: next try %.3f s later: %s" % (gap, log.text()[-600:]))
        arrives_exact(rcv, c, "Retry-After")
        print("ok   503 with Retry-After: 1: the next try %.2f s later (backoff alone: 0.05 s)" % gap)
        rcv.mode = "partial"
        wait_for(lambda: (c.add(1) or True) and log.count("partial success") >= 1, "a partial success")
        rcv.mode = "ok"
        if "rejected 3 data point(s): 3 points had bad timestamps" not in log.text():
            fail("partial success not said: %s" % log.text()[-600:])
        print("ok   a partial_success: logged with its count and message")
        fault(rcv, log, c, "close", 3, "closed connections", "close")
        rcv.slow = 1.5  # > --timeout
        fault(rcv, log, c, "slow", 2, "slow (1.5 s per request, timeout 1 s)")
        delays = [float(l.split("retrying in ")[1].split()[0]) for l in log.text().splitlines()
                  if "retrying in" in l and "(Retry-After)" not in l]
        if not (0.05 in delays and 0.1 in delays and 0.2 in delays and max(delays) == 0.4):
            fail("backoff delays %r: want 0.05 doubling up to 0.4" % sorted(set(delays)))
        print("ok   retried with backoff: delays %r s" % sorted(set(delays)))

        # Down: the port closed. 20,000 more series make each request
        # large; memory must plateau once the queue is full.
        app.cmd("many 20000")
        port = rcv.port
        rcv.close()
        start = log.count("bytes to send")
        wait_for(lambda: (c.add(1) or True) and log.count("bytes to send") >= start + 6, "collections while down")
        _, hwm_full = rss_kib(agent.pid)
        wait_for(lambda: (c.add(1) or True) and log.count("bytes to send") >= start + 40, "a long outage")
        rss, hwm = rss_kib(agent.pid)
        size = int([l for l in log.text().splitlines() if "bytes to send" in l][-1].split()[4])
        if os.environ.get("PCPU_TEST_SANITIZER") == "thread":
            # TSan's allocator keeps freed memory: the queue's bound is
            # checked by its count below (superseded requests) instead.
            print("     (VmHWM not checked under TSan)")
        elif hwm > hwm_full + 2048:
            fail("agent peak RSS grew during the outage: %d KiB after 6 collections, %d after 40" % (hwm_full, hwm))
        print("ok   down for 40 collections of %d-byte requests (queue 3): peak RSS %d KiB after 6, %d KiB "
              "after 40 (RSS %d KiB)" % (size, hwm_full, hwm, rss))
        if log.count("Couldn't connect") + log.count("Connection refused") + log.count("connect") == 0:
            fail("no connection failure logged: %s" % log.text()[-500:])
        rcv2 = Receiver(port=port)
        try:
            arrives_exact(rcv2, c, "down")
        finally:
            agent.send_signal(signal.SIGTERM)  # stderr is the Lines thread's: wait, then join it
            rc = agent.wait(timeout=HANG)
            log.t.join(timeout=HANG)
            rcv2.close()
        print("ok   the application answered all %d commands during the faults" % c.answered)
        if rc != 0:
            fail("agent exit %d: %s" % (rc, log.text()[-1000:]))
        summary = [l for l in log.text().splitlines() if " superseded in the queue" in l][-1]
        superseded = int(summary.split(" superseded")[0].split(", ")[-1].split()[0])
        if superseded < 40 - 6 - 3:
            fail("the queue (3) should have dropped its oldest through 40 collections down: %s" % summary)
        print("ok   the queue stayed at 3 requests: %d superseded (%s)" % (superseded, summary.split(": ", 1)[1]))
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()


def one_shot(pcpustat, env, mode, want_rc, want):
    rcv = Receiver()
    rcv.mode = mode
    try:
        rc, err = run_push(pcpustat, env, ["--otlp", rcv.url, "--count", "1", "pushfix"])
        if rc != want_rc or any(w not in err for w in want) or rcv.answered(int(mode)) != 1:
            fail("%s with --count 1: exit %d, %d answers: %s" % (mode, rc, rcv.answered(int(mode)), err))
        print("ok   %s: one request, exit %d, log: %s" % (mode, rc, err.splitlines()[0]))
    finally:
        rcv.close()


def compression(pcpustat, env, app):
    """--compression gzip, and the specification's environment when the
    option is absent: Content-Encoding: gzip on the wire, the body a gzip
    member that decodes to the exact values (the receiver gunzips it)."""
    for extra, extra_env in ((["--compression", "gzip"], {}),
                             ([], {"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"}),
                             ([], {"OTEL_EXPORTER_OTLP_COMPRESSION": "none",
                                   "OTEL_EXPORTER_OTLP_METRICS_COMPRESSION": "gzip"})):
        rcv = Receiver()
        try:
            rc, err = run_push(pcpustat, dict(env, **extra_env),
                               ["--otlp", rcv.url, "--count", "1", "-v"] + extra + ["pushfix"])
            headers, req = rcv.last()
            if rc != 0 or not req or headers.get("Content-Encoding") != "gzip" or "gzipped to" not in err:
                fail("gzip %r %r: exit %d, headers %r: %s" % (extra, extra_env, rc, headers, err))
            if "push_requests" not in metrics_of(req):
                fail("gzip: the decoded request lacks push_requests")
        finally:
            rcv.close()
    rcv = Receiver()
    try:  # the option wins over the environment
        rc, err = run_push(pcpustat, dict(env, OTEL_EXPORTER_OTLP_COMPRESSION="gzip"),
                           ["--otlp", rcv.url, "--count", "1", "--compression", "none", "pushfix"])
        headers, req = rcv.last()
        if rc != 0 or not req or "Content-Encoding" in headers:
            fail("--compression none over the environment's gzip: exit %d, %r" % (rc, headers))
    finally:
        rcv.close()
    print("ok   gzip: --compression gzip, OTEL_EXPORTER_OTLP_(METRICS_)COMPRESSION, the option first")


def otel_environment(pcpustat, env, app):
    """The OpenTelemetry exporter environment, under the command line:
    endpoints (the metrics one over the base one, which gets /v1/metrics),
    headers (percent-decoded), resource attributes and the service name,
    the timeout; malformed values exit 2; the command line wins."""
    def push(extra_env, args=()):
        rcv = Receiver()
        try:
            e = dict(env, **{k: v.replace("PORT", str(rcv.port)) for k, v in extra_env.items()})
            rc, err = run_push(pcpustat, e, ["--count", "1"] + list(args) + ["pushfix"])
            return rc, err, rcv.last()
        finally:
            rcv.close()

    def resource(req):
        return attrs(req.resource_metrics[0].resource.attributes)

    rc, err, (h, req) = push({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:PORT/"})
    if rc != 0 or not req or "push_requests" not in metrics_of(req):
        fail("OTEL_EXPORTER_OTLP_ENDPOINT (base + /v1/metrics): exit %d: %s" % (rc, err))
    rc, err, (h, req) = push({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1",
                              "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://127.0.0.1:PORT/v1/metrics"})
    if rc != 0 or not req:
        fail("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT over the base one: exit %d: %s" % (rc, err))
    print("ok   endpoints from the environment: base + /v1/metrics, the metrics one first")
    rc, err, (h, req) = push({"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://127.0.0.1:PORT/v1/metrics",
                              "OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=s3cret%2Cx, x-tenant=a%20b",
                              "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=prod,service.name=attrs,"
                                                          "team=core%3Dinfra",
                              "OTEL_SERVICE_NAME": "svc"})
    r = resource(req) if req else {}
    if rc != 0 or h.get("x-api-key") != "s3cret,x" or h.get("x-tenant") != "a b" or \
            r.get("service.name") != "svc" or r.get("deployment.environment") != "prod" or \
            r.get("team") != "core=infra":
        fail("headers and resource: exit %d, headers %r, resource %r: %s" % (rc, h, r, err))
    rc, err, (h, req) = push({"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://127.0.0.1:PORT/v1/metrics",
                              "OTEL_RESOURCE_ATTRIBUTES": "service.name=attrs,deployment.environment=prod"})
    if rc != 0 or resource(req).get("service.name") != "attrs":
        fail("service.name from OTEL_RESOURCE_ATTRIBUTES: %r" % (resource(req) if req else None))
    rc, err, (h, req) = push({"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://127.0.0.1:PORT/v1/metrics",
                              "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=prod",
                              "OTEL_SERVICE_NAME": "svc"},
                             ["--job", "cli", "--label", "deployment.environment=staging"])
    r = resource(req) if req else {}
    if rc != 0 or r.get("service.name") != "cli" or r.get("deployment.environment") != "staging":
        fail("the command line over the environment: %r" % r)
    print("ok   headers, resource attributes, service name from the environment; the command line wins")
    for bad in ({"OTEL_EXPORTER_OTLP_HEADERS": "novalue"}, {"OTEL_EXPORTER_OTLP_HEADERS": "a=%zz"},
                {"OTEL_EXPORTER_OTLP_TIMEOUT": "soon"}, {"OTEL_RESOURCE_ATTRIBUTES": "a b=1"},
                {"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}):
        rc, err, (h, req) = push(dict(bad, OTEL_EXPORTER_OTLP_METRICS_ENDPOINT="http://127.0.0.1:PORT/v1/metrics"))
        if rc != 2 or req:
            fail("malformed %r: exit %d, sent %r: %s" % (bad, rc, bool(req), err))
    print("ok   malformed OTEL_* values: exit 2, nothing sent")
    # The timeout: 0.3 s from the environment against a 1 s answer fails;
    # --timeout 5 on the command line wins and the same push is delivered.
    for args, want in (([], 1), (["--timeout", "5"], 0)):
        rcv = Receiver()
        rcv.mode, rcv.slow = "slow", 1
        try:
            rc, err = run_push(pcpustat, dict(env, OTEL_EXPORTER_OTLP_TIMEOUT="300",
                                              OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=rcv.url),
                               ["--count", "1"] + args + ["pushfix"])
            if rc != want or (want and "imeout" not in err and "timed out" not in err):
                fail("OTEL_EXPORTER_OTLP_TIMEOUT=300 %r: exit %d: %s" % (args, rc, err))
        finally:
            rcv.close()
    print("ok   OTEL_EXPORTER_OTLP_TIMEOUT (ms): a 1 s answer times out at 300; --timeout 5 wins")


def start_time(pcpustat, env):
    """The start time of a cumulative point is the segment's publication,
    whether the segment is listed or named on the command line: two agents
    run one after the other report the same one, earlier than both (it
    was the first agent's start when named: a restart looked like a
    reset)."""
    starts = []
    for target in (["pushfix"], ["pushfix"], []):
        rcv = Receiver()
        try:
            t0 = time.time_ns()
            rc, err = run_push(pcpustat, env, ["--otlp", rcv.url, "--count", "1"] + target)
            req = rcv.last()[1]
            if rc != 0 or not req:
                fail("start time: exit %d: %s" % (rc, err))
            p = point(metrics_of(req)["push_requests"], "sum", method="POST")
            if not p.start_time_unix_nano < t0:
                fail("start time %d not before the agent's start %d" % (p.start_time_unix_nano, t0))
            starts.append(p.start_time_unix_nano)
        finally:
            rcv.close()
    if len(set(starts)) != 1:
        fail("start times differ across agents and targets: %r" % starts)
    print("ok   start time: the segment's publication, named or listed, across agent restarts")


def main():
    pcpustat, fixture = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="pcpu-push-faults.")
    segdir = os.path.join(tmp, "seg")
    os.mkdir(segdir, 0o700)
    env = dict(os.environ, PCPU_SEGMENT_DIR=segdir)
    procs = []
    ok = False
    try:
        app = Fixture(fixture, env)
        procs.append(app.p)
        compression(pcpustat, env, app)
        otel_environment(pcpustat, env, app)
        start_time(pcpustat, env)
        one_shot(pcpustat, env, "400", 1, ["HTTP 400: test receiver says 400", "not retried", "1 dropped"])
        one_shot(pcpustat, env, "500", 1, ["HTTP 500: test receiver says 500", "not retried", "1 dropped"])
        one_shot(pcpustat, env, "503", 1, ["HTTP 503: test receiver says 503", "not delivered before exit",
                                           "1 failed attempts, 0 retries", "1 undelivered"])
        rcv = Receiver()
        try:
            continuous(pcpustat, env, app, rcv)
        finally:
            rcv.close()
        ok = True
    finally:
        stop(procs)
        shutil.rmtree(tmp, ignore_errors=True)
    print("push_faults_test: ok" if ok else "push_faults_test: FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
