#!/usr/bin/env python3
"""pcpustat serve, the Prometheus exporter.

  exporter_test.py behaviour PCPUSTAT FIXTURE
      content negotiation, HEAD, errors (404/405/431), keep-alive and
      pipelining, slow clients, a broken segment isolated (pcpu_segment_up 0,
      the others whole), a segment its user may not read never exposed, and
      SIGTERM stopping it cleanly.
  exporter_test.py load PCPUSTAT FIXTURE [N]
      N (1000) scrapes from a local client, new connections and keep-alive;
      no descriptor or memory growth (/proc/PID/fd, VmRSS).

Only loopback addresses; every wait is bounded; everything started is
stopped.
"""
import gzip
import http.client
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prometheus_test import stop  # noqa: E402  (SIGTERM, then SIGKILL)

FAILS = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILS.append(what)


class Env:
    def __init__(self, pcpustat, fixture):
        self.pcpustat, self.fixture = pcpustat, fixture
        self.tmp = tempfile.mkdtemp(prefix="pcpu-exp.")
        self.dir = os.path.join(self.tmp, "seg")
        os.mkdir(self.dir, 0o700)
        self.env = dict(os.environ, PCPU_SEGMENT_DIR=self.dir)
        self.procs = []

    def fixture_start(self, *args):
        p = subprocess.Popen([self.fixture, *args], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, env=self.env, text=True)
        self.procs.append(p)
        line = p.stdout.readline()  # the fixture exits after 30 minutes at most
        if not line.startswith("ready "):
            raise SystemExit("fixture %s did not start: %r" % (args, line))
        return p, line.split()[1]

    def serve(self, *args, user=None, preexec=None):
        cmd = [self.pcpustat, "serve", "--listen", "127.0.0.1:0", *args]
        if user is not None:
            cmd = ["setpriv", "--reuid=%d" % user, "--regid=%d" % user, "--clear-groups"] + cmd
        # stderr to a file: a pipe nobody reads would block the exporter
        # once full (20,000 broken segments say a lot).
        err = open(os.path.join(self.tmp, "serve-%d.err" % len(self.procs)), "w+")
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err,
                             env=self.env, text=True, preexec_fn=preexec)
        p.errfile = err.name  # what it said on stderr
        self.procs.append(p)
        line = p.stdout.readline()
        if "listening on http" not in line:
            err.seek(0)
            raise SystemExit("exporter did not start: %r %s" % (line, err.read()))
        hostport = line.split("://")[1].split("/")[0]
        host, port = hostport.rsplit(":", 1)
        return p, host, int(port)

    def close(self):
        stop(self.procs)
        shutil.rmtree(self.tmp, ignore_errors=True)


# Socket timeouts (seconds) only bound a server that stopped answering:
# generous, so that a loaded machine's slow answer is not taken for one.
TIMEOUT = 60


def get(host, port, path="/metrics", headers=None, method="GET", conn=None, timeout=TIMEOUT):
    c = conn or http.client.HTTPConnection(host, port, timeout=timeout)
    c.request(method, path, headers=headers or {})
    r = c.getresponse()
    body = r.read().decode("utf-8", "replace")
    if conn is None:
        c.close()
    return r.status, r.getheader("Content-Type"), body


def get_tls(host, port, ctx, headers=None, source=None, path="/metrics"):
    """GET over HTTPS on a new connection (from loopback address `source`
    if given): status and body."""
    c = http.client.HTTPSConnection(host, port, timeout=30, context=ctx,
                                    source_address=(source, 0) if source else None)
    c.request("GET", path, headers=headers or {})
    r = c.getresponse()
    body = r.read().decode("utf-8", "replace")
    c.close()
    return r.status, body


def get_bytes(host, port, headers, path="/metrics"):
    """Status, headers and the undecoded body (http.client does not
    decompress)."""
    c = http.client.HTTPConnection(host, port, timeout=TIMEOUT)
    c.request("GET", path, headers=headers)
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, r.headers, body


def raw(host, port, data, timeout=TIMEOUT, shutdown=True):
    s = socket.create_connection((host, port), timeout=timeout)
    out = b""
    try:
        s.sendall(data)
        if shutdown:
            s.shutdown(socket.SHUT_WR)
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
    except (socket.timeout, OSError):
        pass
    s.close()
    return out.decode("utf-8", "replace")


# Malformed requests and what the exporter (libmicrohttpd 0.9.75) answers:
# a status, or None for a close without a response.
MALFORMED = [
    (b"GARBAGE\r\n\r\n", None),                                     # no target, no version
    (b"GET\r\n\r\n", None),
    (b" / HTTP/1.1\r\nHost: x\r\n\r\n", None),                      # no method
    (b"GET /a b HTTP/1.1\r\nHost: x\r\n\r\n", None),                # a space in the target
    (b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + b"A" * 24 + b"\r\n\r\n", None),  # TLS
    (b"GET /\r\n\r\n", "400"),                                       # no version
    (b"GET / FOO/1.1\r\nHost: x\r\n\r\n", "400"),
    (b"GET / HTTP/1.1\rHost: x\r\n\r\n", "400"),                     # a bare CR
    (b"GET / HTTP/1.1\r\nHost: x\r\nno colon\r\n\r\n", "400"),
    (b"GET / HTTP/1.1\r\nHost: x\r\n folded: y\r\n\r\n", "400"),
    (b"GET / HTTP/1.1\r\n\r\n", "400"),                             # no Host
    (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "400"),       # two Hosts
    (b"GET / HTTP/2.0\r\nHost: x\r\n\r\n", "505"),
    (b"GET / HTTP/0.9\r\nHost: x\r\n\r\n", "505"),
]


def exchange(host, port, data, wait=TIMEOUT):
    """Sends data, reads until the server closes or `wait` seconds pass:
    (what came back, whether the server closed, seconds)."""
    s = socket.create_connection((host, port), timeout=wait)
    out, closed, t0 = b"", False, time.monotonic()
    try:
        s.sendall(data)
        while True:
            chunk = s.recv(65536)
            if not chunk:
                closed = True
                break
            out += chunk
    except ConnectionResetError:
        closed = True
    except (socket.timeout, OSError):
        pass
    s.close()
    return out.decode("utf-8", "replace"), closed, time.monotonic() - t0


def one_response(host, port, data, wait=TIMEOUT):
    """Sends data, reads one whole response (its headers and Content-Length
    bytes of body; `wait` seconds at most), then whether the server keeps
    the connection open: (the response, whether the server closed)."""
    s = socket.create_connection((host, port), timeout=wait)
    out, closed = b"", False
    try:
        s.sendall(data)
        while True:
            head, sep, body = out.partition(b"\r\n\r\n")
            if sep:
                n = [int(l.split(b":", 1)[1]) for l in head.split(b"\r\n")
                     if l.lower().startswith(b"content-length:")]
                if len(body) >= (n[0] if n else 0):
                    break
            chunk = s.recv(65536)
            if not chunk:
                closed = True
                break
            out += chunk
        if not closed:
            # A server that closes after answering does so at once.
            s.settimeout(0.5)
            closed = s.recv(1) == b""
    except ConnectionResetError:
        closed = True
    except (socket.timeout, OSError):
        pass
    s.close()
    return out.decode("utf-8", "replace"), closed


def behaviour(e):
    fx, path = e.fixture_start("golden", "fixture")
    cnt, _ = e.fixture_start("count", "1000", "counter")
    # An inactivity timeout far longer than any wait below: "at once" means
    # before it, however slowly a loaded machine runs the exporter.
    srv, host, port = e.serve("--timeout", "300")
    check(host == "127.0.0.1", "binds to 127.0.0.1 when asked (default is 127.0.0.1:9464)")

    st, ct, body = get(host, port)
    check(st == 200 and ct.startswith("text/plain; version=0.0.4"), "no Accept: Prometheus text 0.0.4")
    check('test_events_total{pcpu_segment="counter",pcpu_pid="%d"} 1000' % cnt.pid in body,
          "a counter with its segment labels")
    check('app_requests_total{method="GET",code="200",pcpu_segment="fixture",pcpu_pid="%d"} 1234'
          % fx.pid in body, "the labelled series of a second segment")
    check('pcpu_segment_up{pcpu_segment="fixture",pcpu_pid="%d",reason=""} 1' % fx.pid in body,
          "pcpu_segment_up 1 (reason empty)")

    prom_accept = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
                   "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
    st, ct, body = get(host, port, headers={"Accept": prom_accept})
    check(st == 200 and ct.startswith("application/openmetrics-text; version=1.0.0"),
          "Prometheus' Accept: OpenMetrics")
    check(body.endswith("# EOF\n") and "# UNIT app_latency_seconds seconds" in body,
          "OpenMetrics body ends in # EOF, has # UNIT")
    # No segment omitted (past --max-down): no pcpu_segments_omitted at
    # all, not a HELP and TYPE without a sample (every scrape carried one).
    for accept in [None, prom_accept]:
        st, _, b = get(host, port, headers={"Accept": accept} if accept else None)
        check(st == 200 and "pcpu_segments_omitted" not in b and "# TYPE pcpu_segment_up gauge" in b,
              "nothing omitted: no pcpu_segments_omitted family (%s)" % ("OpenMetrics" if accept else "text"))

    # serve --help lists the formats it serves: protobuf only as this build
    # serves it (its answer to Prometheus' native-histogram Accept).
    proto = ("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
             "encoding=delimited;q=0.6,application/openmetrics-text;version=1.0.0;q=0.5")
    st, ct, _ = get_bytes(host, port, {"Accept": proto})
    serves_proto = ct.get("Content-Type", "").startswith("application/vnd.google.protobuf")
    usage = subprocess.run([e.pcpustat, "serve", "--help"], capture_output=True, text=True).stdout
    check(st == 200 and "Prometheus text 0.0.4" in usage and "text/plain; version=0.0.4" in usage and
          "OpenMetrics 1.0" in usage and "application/openmetrics-text" in usage and "gzip" in usage and
          ("io.prometheus.client.MetricFamily; encoding=delimited" in usage) == serves_proto and
          ("not with this libpcpu" in usage) == (not serves_proto),
          "serve --help: text 0.0.4, OpenMetrics, gzip, and protobuf as served (%s)"
          % ("served" if serves_proto else "not in this build"))
    for accept, want in [("text/plain", "text/plain"),
                         ("*/*", "text/plain"),
                         ("application/openmetrics-text", "application/openmetrics-text"),
                         ("application/openmetrics-text;q=0.2, text/plain;q=0.9", "text/plain"),
                         ("application/openmetrics-text;version=2.0.0, text/plain;q=0.1", "text/plain"),
                         ("application/openmetrics-text;q=0", "text/plain")]:
        st, ct, _ = get(host, port, headers={"Accept": accept})
        check(st == 200 and ct.startswith(want), "Accept %r -> %s" % (accept, want))

    # gzip when asked (every Prometheus scrape asks): the same bytes.
    for accept in ["text/plain", prom_accept]:
        plain = get_bytes(host, port, {"Accept": accept})
        zipped = get_bytes(host, port, {"Accept": accept, "Accept-Encoding": "gzip"})
        check(plain[0] == zipped[0] == 200 and plain[1].get("Content-Encoding") is None and
              zipped[1].get("Content-Encoding") == "gzip" and
              "Accept-Encoding" in (zipped[1].get("Vary") or "") and
              gzip.decompress(zipped[2]) == plain[2] and len(zipped[2]) < len(plain[2]),
              "Accept-Encoding: gzip (%s): decompressed body equals the plain one, byte for byte"
              % accept.split(",")[0])
    # The body depends on Accept (the format) and Accept-Encoding (gzip):
    # a cache must key on both (RFC 9110 12.5.5).
    for url in ["/metrics", "/metrics/counter"]:
        for h in [{}, {"Accept": prom_accept, "Accept-Encoding": "gzip"}]:
            st, hdrs, _ = get_bytes(host, port, h, url)
            vary = sorted(v.strip().lower() for v in (hdrs.get("Vary") or "").split(","))
            check(st == 200 and vary == ["accept", "accept-encoding"],
                  "%s %s: Vary: Accept, Accept-Encoding (%r)" % (url, sorted(h) or "no Accept", hdrs.get("Vary")))
    for enc in ["gzip;q=0", "identity", "br", "*;q=0, gzip;q=0"]:
        st, hdrs, _ = get_bytes(host, port, {"Accept-Encoding": enc})
        check(st == 200 and hdrs.get("Content-Encoding") is None, "Accept-Encoding %r: not compressed" % enc)

    st, ct, body = get(host, port, "/metrics/counter")
    check(st == 200 and body.startswith("# HELP test_events_total") and "pcpu_segment" not in body,
          "/metrics/NAME: one segment, unlabelled")
    st, _, body = get(host, port, "/metrics/%d" % fx.pid)
    check(st == 200 and "app_queue_depth 42" in body, "/metrics/PID")
    st, _, body = get(host, port, "/metrics/nosuch")
    check(st == 404, "/metrics/nosuch -> 404")
    st, _, _ = get(host, port, "/metrics/..%2f..%2fetc%2fpasswd")
    check(st == 404, "no paths through /metrics/")
    st, _, _ = get(host, port, "/nope")
    check(st == 404, "unknown path -> 404")
    st, _, body = get(host, port, "/")
    check(st == 200 and "/metrics" in body, "index page")
    st, _, body = get(host, port, method="HEAD")
    check(st == 200 and body == "", "HEAD: headers only")
    st, _, _ = get(host, port, method="POST")
    check(st == 405, "POST -> 405")
    # Past the limit without the end of the headers: the server has read
    # everything sent when it answers, so its close is no reset.
    out = raw(host, port, b"GET /metrics HTTP/1.1\r\nHost: x\r\nX: " + b"a" * 17000, shutdown=False)
    check(out.startswith("HTTP/1.1 431"), "17 KB of headers (limit 16 KiB) -> 431")
    # Malformed requests as libmicrohttpd 0.9.75 (Debian 12) answers them
    # (pcpustat(1), SERVE, pins the same table): each answered and closed,
    # or closed without an answer, at once; never left waiting, never a
    # 200. A request line it cannot split into method, target and version
    # is closed unanswered: the library parses it before any hook of the
    # application runs, and has no option to answer it.
    for data, want in MALFORMED:
        out, closed, dt = exchange(host, port, data)
        status = out.split("\r\n", 1)[0]
        check(closed and dt < TIMEOUT and (status.startswith("HTTP/1.1 %s " % want) if want else out == ""),
              "%r -> %s, closed at once (got %r, %s, %.2f s)"
              % (data[:36], "HTTP/1.1 " + want if want else "closed unanswered", status,
                 "closed" if closed else "open", dt))
    # Request smuggling: a body is refused and the connection closed, so
    # the body is never taken for a second request.
    out = raw(host, port, b"GET /metrics/counter HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n"
              b"GET /metrics/counter HTTP/1.1\r\nHost: x\r\n\r\n", shutdown=False)
    check(out.startswith("HTTP/1.1 400") and out.count("HTTP/1.1 ") == 1 and "Connection: close" in out,
          "GET with a body -> one 400, connection closed")
    out = raw(host, port, b"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
              shutdown=False)
    check(out.startswith("HTTP/1.1 400") and out.count("HTTP/1.1 ") == 1, "chunked body -> one 400, closed")
    out = raw(host, port, b"GET / HTTP/1.1\r\n\r\n", shutdown=False)
    check(out.startswith("HTTP/1.1 400") and "Connection: close" in out, "HTTP/1.1 without Host -> 400, closed")
    # A bare LF ends a line (RFC 9112 2.2 allows a server to take it so;
    # libmicrohttpd 0.9.75 does): answered at once, not left waiting for a
    # CR until the timeout; the connection stays open as for any request.
    out, closed = one_response(host, port, b"GET / HTTP/1.1\nHost: x\n\n")
    check(out.startswith("HTTP/1.1 200") and not closed, "bare-LF request answered at once, kept alive")

    # Keep-alive: several requests on one connection; pipelining.
    c = http.client.HTTPConnection(host, port, timeout=TIMEOUT)
    ok = all(get(host, port, conn=c)[0] == 200 for _ in range(5))
    c.close()
    check(ok, "5 requests on one keep-alive connection")
    out = raw(host, port, b"GET /metrics/counter HTTP/1.1\r\nHost: x\r\n\r\n"
              b"GET /metrics/counter HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    check(out.count("HTTP/1.1 200 OK") == 2, "two pipelined requests, two responses")

    # A slow client is dropped; others are served meanwhile.
    slow = socket.create_connection((host, port), timeout=TIMEOUT)
    slow.sendall(b"GET /metrics HTTP/1.1\r\n")
    st, _, _ = get(host, port)
    check(st == 200, "served while a slow client dawdles")
    slow.close()

    # A broken segment: left out whole, pcpu_segment_up 0; the others intact.
    broken = os.path.join(e.dir, "pcpu.%d.broken" % fx.pid)
    with open(path, "rb") as f:
        data = bytearray(f.read(4096))
    data[200:210] = b"X" * 10  # inside the header's name: header and file name disagree
    with open(broken, "wb") as f:
        f.write(data)
    os.chmod(broken, 0o600)
    trunc = os.path.join(e.dir, "pcpu.%d.fixture2" % fx.pid)
    with open(path, "rb") as f:
        with open(trunc, "wb") as g:
            g.write(f.read(300))
    os.chmod(trunc, 0o600)
    st, _, body = get(host, port)
    check(st == 200, "200 with broken segments around")
    check('pcpu_segment_up{pcpu_segment="broken",pcpu_pid="%d",reason="corrupt"} 0' % fx.pid in body and
          'pcpu_segment_up{pcpu_segment="fixture2",pcpu_pid="%d",reason="corrupt"} 0' % fx.pid in body,
          "broken and truncated segments: pcpu_segment_up 0, reason corrupt")
    samples = [l for l in body.splitlines() if not l.startswith(("#", "pcpu_segment_up{"))]
    # 95: the log-linear histogram's 81 `le` buckets are all exposed, empty
    # ones included, from creation on.
    check(sum('pcpu_segment="fixture"' in l for l in samples) == 95 and
          not any('pcpu_segment="broken"' in l or 'pcpu_segment="fixture2"' in l for l in samples),
          "the good segment whole (95 samples), nothing of the broken ones")
    os.unlink(broken)
    os.unlink(trunc)

    # A segment the exporter's user may not read is never exposed.
    if os.geteuid() == 0 and shutil.which("setpriv"):
        os.chmod(e.tmp, 0o755)
        os.chmod(e.dir, 0o755)
        srv2, h2, p2 = e.serve(user=65534)
        st, _, body = get(h2, p2)
        check(st == 200 and "app_requests_total" not in body and "test_events_total" not in body
              and 'pcpu_segment_up{pcpu_segment="fixture",pcpu_pid="%d",reason="permission"} 0'
              % fx.pid in body,
              "another user's exporter exposes none of root's 0600 segments")
        st, _, _ = get(h2, p2, "/metrics/fixture")
        check(st == 403, "/metrics/NAME of an unreadable segment -> 403")
        os.chmod(e.dir, 0o700)
    elif os.geteuid() != 0:
        os.chmod(path, 0)
        st, _, body = get(host, port)
        check("app_requests_total" not in body, "an unreadable segment is not exposed")
        os.chmod(path, 0o600)
    else:
        check(False, "running as root without setpriv(1) (util-linux)")

    # Stops cleanly on SIGTERM.
    srv.send_signal(signal.SIGTERM)
    try:
        rc = srv.wait(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        rc = None
    check(rc == 0, "SIGTERM: exits 0")


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def load(e, n):
    e.fixture_start("golden", "fixture")
    e.fixture_start("count", "12345", "counter")
    srv, host, port = e.serve()
    accept = {"Accept": "application/openmetrics-text;version=1.0.0,text/plain;q=0.5"}

    def scrapes(k):
        c = http.client.HTTPConnection(host, port, timeout=TIMEOUT)
        for i in range(k):
            if i % 2:  # half on a kept-alive connection, half on new ones
                st, _, body = get(host, port, headers=accept, conn=c)
            else:
                st, _, body = get(host, port)
            if st != 200 or "12345" not in body:
                c.close()
                return False
        c.close()
        return True

    ok = scrapes(100)  # warm up: allocator caches, lazily loaded code
    time.sleep(0.2)
    fd0, rss0 = fd_count(srv.pid), rss_kb(srv.pid)
    t0 = time.monotonic()
    ok = scrapes(n) and ok
    dt = time.monotonic() - t0
    # Connections closed by the client are reaped: soon, however slowly a
    # loaded machine lets the exporter run (a leak never gets there).
    deadline = time.monotonic() + TIMEOUT
    while fd_count(srv.pid) > fd0 and time.monotonic() < deadline:
        time.sleep(0.1)
    fd1, rss1 = fd_count(srv.pid), rss_kb(srv.pid)
    check(ok, "%d scrapes answered 200 with the right value (%.0f scrapes/s)" % (n, n / dt))
    # No more than before (the warm-up's last connections may still have
    # been open then: a leak of 1000 scrapes' descriptors is not hidden).
    check(fd1 <= fd0, "descriptors before/after: %d/%d" % (fd0, fd1))
    # A leak of even 100 bytes per scrape would be 100 KB here; allow noise
    # of the allocator (and of sanitizer runtimes) below that.
    check(rss1 - rss0 < 1024, "VmRSS before/after: %d/%d kB" % (rss0, rss1))


def beyond(e):
    """Segment format 2.8 through the exporter (a merge of segments): values
    beyond the integer words and a name's three label sets, one metric
    under one TYPE in each format."""
    fx, _ = e.fixture_start("beyond", "beyond")
    srv, host, port = e.serve("--timeout", "300")
    lab = 'pcpu_segment="beyond",pcpu_pid="%d"' % fx.pid
    st, _, body = get(host, port)
    check(st == 200 and body.count("# TYPE test_jobs_total counter") == 1,
          "2.8: a name's label sets under one TYPE (text)")
    check(("test_jobs_total{%s} 3\n" % lab) in body and
          ('test_jobs_total{queue="q1",%s} 4\n' % lab) in body and
          ('test_jobs_total{queue="q1",prio="hi",%s} 5\n' % lab) in body,
          "2.8: every label set's series, with the segment's labels")
    check(('test_mem_bytes{k="big",%s} 16000000000\n' % lab) in body and
          ('test_mem_bytes{k="tiny",%s} 1e-12\n' % lab) in body and
          ('test_mem_bytes{k="huge",%s} 1e+300\n' % lab) in body and
          ('test_mem_bytes{k="inf",%s} +Inf\n' % lab) in body and
          ('test_mem_bytes{k="nan",%s} NaN\n' % lab) in body and
          ('test_mem_bytes{k="tenth",%s} 1\n' % lab) in body,
          "2.8: values beyond the integer words, exact where the words are")
    check(("test_transfer_bytes_sum{%s} 5.0000000000005e+12\n" % lab) in body,
          "2.8: a histogram's sum past 2^63 billionths")
    st, _, body = get(host, port, headers={"Accept": "application/openmetrics-text;version=1.0.0"})
    check(st == 200 and body.count("# TYPE test_jobs counter") == 1 and body.endswith("# EOF\n"),
          "2.8: a name's label sets under one TYPE (OpenMetrics)")


def main():
    if len(sys.argv) < 4 or sys.argv[1] not in ("behaviour", "load"):
        raise SystemExit(__doc__)
    e = Env(sys.argv[2], sys.argv[3])
    try:
        if sys.argv[1] == "behaviour":
            behaviour(e)
            e2 = Env(sys.argv[2], sys.argv[3])
            try:
                beyond(e2)
            finally:
                e2.close()
        else:
            load(e, int(sys.argv[4]) if len(sys.argv) > 4 else 1000)
    finally:
        e.close()
    if FAILS:
        print("exporter_test: %d failed" % len(FAILS))
        sys.exit(1)
    print("exporter_test: ok")


if __name__ == "__main__":
    main()
