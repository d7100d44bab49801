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
 - a 503 with --count 1 --drain 0: one try at the end, exit 1, "1
   undelivered", counted as one failed attempt and no retry;
 - --count 1 delivers what is queued (drain()): a receiver answering 503
   twice, then 200, gets it (exit 0); one that is down when the agent
   starts and comes up while it retries gets it (exit 0); one that keeps
   answering 503 makes the agent give up at the --drain bound (exit 1,
   "not delivered before exit"); SIGTERM drains too, and a second SIGTERM
   ends the drain at once;
 - a CA file that is missing, unreadable or holds no certificate
   (--ca-file, OTEL_EXPORTER_OTLP_CERTIFICATE) is refused at start (exit 2,
   nothing sent), as a missing password file is;
 - OTEL_EXPORTER_OTLP_ENDPOINT with a query posts to <path>/v1/metrics?query;
   OTEL_METRIC_EXPORT_INTERVAL sets the interval (-v says it, and the
   pushes come at it), --interval wins over it, a bad value exits 2;
 - a 401 from a receiver when no credentials are configured says so (not
   "the password or token file").
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


def one_shot(pcpustat, env, mode, want_rc, want, extra=()):
    rcv = Receiver()
    rcv.mode = mode
    try:
        rc, err = run_push(pcpustat, env, ["--otlp", rcv.url, "--count", "1"] + list(extra) + ["pushfix"])
        if rc != want_rc or any(w not in err for w in want) or rcv.answered(int(mode)) != 1:
            fail("%s with --count 1: exit %d, %d answers: %s" % (mode, rc, rcv.answered(int(mode)), err))
        print("ok   %s: one request, exit %d, log: %s" % (mode, rc, err.splitlines()[0]))
    finally:
        rcv.close()


def drain(pcpustat, env):
    """--count 1 delivers what is queued, retrying within --drain; SIGTERM
    drains too; a second signal ends the drain."""
    backoff = ["--min-backoff", "0.01", "--max-backoff", "0.05"]
    rcv = Receiver()
    rcv.fail_first = 2
    try:
        rc, err = run_push(pcpustat, env, ["--otlp", rcv.url, "--count", "1"] + backoff + ["pushfix"])
        if rc != 0 or rcv.answered(503) != 2 or len(rcv.requests) != 1 or "before exit" not in err:
            fail("503, 503, then 200 with --count 1: exit %d, %d answers 503, %d delivered: %s"
                 % (rc, rcv.answered(503), len(rcv.requests), err))
    finally:
        rcv.close()
    print("ok   --count 1 against 503, 503, 200: retried before exit, delivered, exit 0")

    # Down when the agent starts; up while it retries.
    rcv = Receiver()
    port = rcv.port
    rcv.close()
    agent = subprocess.Popen([pcpustat, "push", "--otlp", "http://127.0.0.1:%d/v1/metrics" % port, "--count", "1",
                              "--drain", "3600"] + backoff + ["pushfix"], env=env, stderr=subprocess.PIPE, text=True)
    log = Lines(agent.stderr)
    rcv = None
    try:
        wait_for(lambda: log.count("before exit") >= 2, "the agent retrying a receiver that is down")
        rcv = Receiver(port=port)
        rc = agent.wait(timeout=HANG)
        log.t.join(timeout=HANG)
        if rc != 0 or len(rcv.requests) != 1 or " 0 undelivered" not in log.text():
            fail("down, then up: exit %d, %d delivered: %s" % (rc, len(rcv.requests), log.text()[-800:]))
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
        if rcv:
            rcv.close()
    print("ok   --count 1 against a receiver down at start, up later: delivered once it was up, exit 0")

    # Always 503: the agent gives up at the bound.
    rcv = Receiver()
    rcv.mode = "503"
    try:
        rc, err = run_push(pcpustat, env, ["--otlp", rcv.url, "--count", "1", "--drain", "1"] + backoff + ["pushfix"])
        if rc != 1 or rcv.answered(503) < 1 or "not delivered before exit" not in err or "1 undelivered" not in err:
            fail("503 for ever with --drain 1: exit %d, %d answers: %s" % (rc, rcv.answered(503), err))
    finally:
        rcv.close()
    print("ok   --count 1 against a receiver that keeps answering 503: gave up at --drain 1 s, exit 1 "
          "(%d attempts)" % rcv.answered(503))

    # SIGTERM drains; a second SIGTERM ends the drain.
    rcv = Receiver()
    rcv.mode = "503"
    agent = subprocess.Popen([pcpustat, "push", "--otlp", rcv.url, "--interval", "3600", "--drain", "3600"]
                             + backoff + ["pushfix"], env=env, stderr=subprocess.PIPE, text=True)
    log = Lines(agent.stderr)
    try:
        wait_for(lambda: log.count("retrying in") >= 1, "a first failed push")
        agent.send_signal(signal.SIGTERM)
        wait_for(lambda: log.count("before exit") >= 2, "the drain after SIGTERM")
        agent.send_signal(signal.SIGTERM)
        rc = agent.wait(timeout=HANG)
        log.t.join(timeout=HANG)
        if rc != 1 or "a second signal" not in log.text():
            fail("a second SIGTERM during the drain: exit %d: %s" % (rc, log.text()[-800:]))
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
        rcv.close()
    print("ok   SIGTERM drains the queue with retries; a second SIGTERM ends it (exit 1)")


def ca_file(pcpustat, env, tmp):
    """A CA file that cannot serve is refused at start, from the option or
    the environment."""
    rcv = Receiver()
    junk = os.path.join(tmp, "junk.pem")
    with open(junk, "w") as f:
        f.write("not a certificate\n")
    unreadable = os.path.join(tmp, "unreadable.pem")
    with open(unreadable, "w") as f:
        f.write("-----BEGIN CERTIFICATE-----\n")
    os.chmod(unreadable, 0)
    cases = [(["--ca-file", os.path.join(tmp, "none.pem")], {}, "--ca-file: cannot read"),
             (["--ca-file", junk], {}, "holds no PEM certificate"),
             ([], {"OTEL_EXPORTER_OTLP_CERTIFICATE": os.path.join(tmp, "none.pem")},
              "OTEL_EXPORTER_OTLP_CERTIFICATE: cannot read"),
             ([], {"OTEL_EXPORTER_OTLP_CERTIFICATE": "/nonexistent.pem",
                   "OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE": junk},
              "OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE: " + junk)]
    if os.geteuid() != 0:  # root reads a mode-0 file
        cases.append((["--ca-file", unreadable], {}, "Permission denied"))
    try:
        for args, extra_env, want in cases:
            rc, err = run_push(pcpustat, dict(env, **extra_env), ["--otlp", rcv.url, "--count", "1"] + args
                               + ["pushfix"])
            if rc != 2 or want not in err or rcv.requests:
                fail("CA file %r %r: exit %d, %d sent: %s (want %r)" % (args, extra_env, rc, len(rcv.requests),
                                                                      err, want))
    finally:
        rcv.close()
    print("ok   a missing, unreadable or certificate-less CA file (option or environment): exit 2 at start")


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
    for base, path in (("http://127.0.0.1:PORT/otlp?x=1&y=a%20b", "/otlp/v1/metrics?x=1&y=a%20b"),
                       ("http://127.0.0.1:PORT/otlp/?x=1", "/otlp/v1/metrics?x=1"),
                       ("http://127.0.0.1:PORT?x=1", "/v1/metrics?x=1")):
        rcv = Receiver()
        rcv.path = path
        try:
            rc, err = run_push(pcpustat, dict(env, OTEL_EXPORTER_OTLP_ENDPOINT=base.replace("PORT", str(rcv.port))),
                               ["--count", "1", "pushfix"])
            if rc != 0 or rcv.paths != [path]:
                fail("OTEL_EXPORTER_OTLP_ENDPOINT=%s: exit %d, paths %r (want %r): %s" % (base, rc, rcv.paths,
                                                                                          path, err))
        finally:
            rcv.close()
    print("ok   OTEL_EXPORTER_OTLP_ENDPOINT with a query: the query after <path>/v1/metrics")
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
    export_interval(pcpustat, env)
    rcv = Receiver(auth="Bearer secret")
    try:
        rc, err = run_push(pcpustat, env, ["--otlp", rcv.url, "--count", "1", "pushfix"])
        if rc != 1 or "no credentials are configured" not in err or "password or token file" in err:
            fail("401 without credentials: exit %d: %s" % (rc, err))
        rc, err = run_push(pcpustat, dict(env, OTEL_EXPORTER_OTLP_HEADERS="authorization=Bearer%20wrong"),
                           ["--otlp", rcv.url, "--count", "1", "pushfix"])
        if rc != 1 or "OTEL_EXPORTER_OTLP_[METRICS_]HEADERS" not in err or "reads the" in err:
            fail("401 with credentials in OTEL_EXPORTER_OTLP_HEADERS: exit %d: %s" % (rc, err))
    finally:
        rcv.close()
    print("ok   a 401 says what is configured: no credentials, or the headers of the environment")


def export_interval(pcpustat, env):
    """OTEL_METRIC_EXPORT_INTERVAL (milliseconds): the interval, said by
    -v and kept by the pushes; --interval wins; a bad value exits 2."""
    var = "OTEL_METRIC_EXPORT_INTERVAL"
    rcv = Receiver()
    try:
        e = dict(env, OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=rcv.url, **{var: "100"})
        agent = subprocess.Popen([pcpustat, "push", "-v", "pushfix"], env=e, stderr=subprocess.PIPE, text=True)
        log = Lines(agent.stderr)
        try:
            # 5 pushes: 0.4 s at 100 ms; the default (15 s) would take 60 s.
            wait_for(lambda: len(rcv.requests) >= 5, "5 pushes at OTEL_METRIC_EXPORT_INTERVAL=100")
        finally:
            agent.send_signal(signal.SIGTERM)
            agent.wait(timeout=HANG)
            log.t.join(timeout=HANG)
        if "every 0.1 s (OTEL_METRIC_EXPORT_INTERVAL)" not in log.text():
            fail("%s=100: -v says %r" % (var, log.text()[:300]))
        # --interval wins: the second push comes 1.5 s after the start at
        # the earliest (a lower bound, which load cannot break; the
        # environment's 100 ms would bring it at about 0.1 s).
        with rcv.lock:
            rcv.requests.clear()
        t0 = time.monotonic()
        agent = subprocess.Popen([pcpustat, "push", "-v", "--interval", "1.5", "--count", "2", "pushfix"], env=e,
                                 stderr=subprocess.PIPE, text=True)
        log = Lines(agent.stderr)
        wait_for(lambda: len(rcv.requests) >= 2, "the second push")
        t1 = time.monotonic()
        rc = agent.wait(timeout=HANG)
        log.t.join(timeout=HANG)
        if rc != 0 or "every 1.5 s (--interval)" not in log.text() or t1 - t0 < 1.5:
            fail("--interval 1.5 over %s=100: exit %d, the second push %.2f s after the start: %s"
                 % (var, rc, t1 - t0, log.text()[:300]))
        for bad in ("soon", "0", "5", "-100"):
            rc, err = run_push(pcpustat, dict(e, **{var: bad}), ["--count", "1", "pushfix"])
            if rc != 2 or var not in err:
                fail("%s=%s: exit %d: %s" % (var, bad, rc, err))
    finally:
        rcv.close()
    print("ok   %s: the interval (-v says it, the pushes keep it), --interval wins, bad values exit 2" % var)


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
                                           "1 failed attempts, 0 retries", "1 undelivered"], ["--drain", "0"])
        drain(pcpustat, env)
        ca_file(pcpustat, env, tmp)
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
