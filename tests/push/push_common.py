"""Shared by the `pcpustat push` tests: the test application
(push_fixture), running `pcpustat push`, a Prometheus with the remote
write receiver, and an OTLP receiver in Python that decodes every request
with the published schema (PyPI opentelemetry-proto) and can be told to
fail (down, slow, 500, 400, closing connections, TLS, authentication).

Every wait is bounded; the bounds only catch hangs (a loaded machine may
take long), they never decide a result.
"""
import base64
import gzip
import http.server
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "segment"))
from prometheus_test import find_prometheus, free_port, http_json, stop  # noqa: E402,F401

HANG = 300  # seconds: a bound that only catches a hang


class Fixture:
    """push_fixture NAME, driven line by line (each command answered "ok")."""

    def __init__(self, path, env, name="pushfix"):
        self.p = subprocess.Popen([path, name], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  env=env, text=True)
        line = self.p.stdout.readline()
        if not line.startswith("ready"):
            raise SystemExit("FAIL: push_fixture did not start: %r" % line)
        self.pid = self.p.pid

    def cmd(self, *lines):
        for line in lines:
            self.p.stdin.write(line + "\n")
            self.p.stdin.flush()
            if self.p.stdout.readline().strip() != "ok":
                raise SystemExit("FAIL: push_fixture refused %r" % line)


def run_push(pcpustat, env, args, timeout=HANG):
    """`pcpustat push ARGS` to its end: (exit status, stderr)."""
    r = subprocess.run([pcpustat, "push"] + args, env=env, capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stderr


def launch_prometheus(prom, tmp, extra=()):
    """Prometheus on 127.0.0.1 (a free port, its own storage in tmp) with
    the remote write receiver and nothing to scrape; waits until ready.
    Returns the process and its base URL."""
    port = free_port()
    cfg = os.path.join(tmp, "prometheus.yml")
    with open(cfg, "w") as f:
        f.write("global:\n  evaluation_interval: 1h\n")
    log = open(os.path.join(tmp, "prometheus.log"), "w")
    srv = subprocess.Popen([prom, "--config.file=" + cfg,
                            "--storage.tsdb.path=" + os.path.join(tmp, "data-%d" % port),
                            "--web.listen-address=127.0.0.1:%d" % port,
                            "--web.enable-remote-write-receiver",
                            "--log.level=warn"] + list(extra), stdout=log, stderr=log)
    base = "http://127.0.0.1:%d" % port
    deadline = time.monotonic() + HANG
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(base + "/-/ready", timeout=10) as r:
                if r.status == 200:
                    return srv, base
        except OSError:
            pass
        if srv.poll() is not None:
            raise SystemExit("FAIL: prometheus exited: %s" % open(log.name).read()[-2000:])
        time.sleep(0.2)
    srv.kill()
    raise SystemExit("FAIL: prometheus not ready within %d s" % HANG)


def promql(base, q):
    d = http_json(base + "/api/v1/query?query=" + urllib.parse.quote(q))
    if d.get("status") != "success":
        raise SystemExit("FAIL: query %s: %r" % (q, d))
    return d["data"]["result"]


# ---- an OTLP/HTTP receiver -----------------------------------------------------------

class Receiver:
    """An OTLP/HTTP receiver on 127.0.0.1 (a free port): POST /v1/metrics
    bodies (gunzipped with Content-Encoding: gzip) are decoded as
    ExportMetricsServiceRequest and kept in
    `requests` (with their headers) when answered 200. `mode` says how it
    answers: "ok", "500", "400", "429", "502", "503", "504", "503ra" (503
    with Retry-After: `retry_after`), "partial" (200 with a partial_success
    rejecting 3 data points), "slow" (sleeps `slow` seconds, then 200),
    "close" (closes the connection without answering). The times of the
    "503ra" answers are kept in `ra_times` (monotonic seconds). With `tls`
    (cert, key) it serves HTTPS; with `auth` ("Basic ..." or "Bearer ...")
    it answers 401 to any other Authorization. `path` is the one path it
    accepts (404 for others; the query included). `fail_first`: that many
    requests are answered 503 first, whatever the mode."""

    def __init__(self, tls=None, auth=None, port=0):
        from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
        self.pb = metrics_service_pb2
        self.mode = "ok"
        self.path = "/v1/metrics"
        self.fail_first = 0
        self.paths = []  # the path of every POST, in order
        self.slow = 0
        self.retry_after = 1
        self.ra_times = []
        self.auth = auth
        self.requests = []
        self.conns = []  # every connection accepted, closed by close()
        self.answers = {}  # status (or "close") -> count
        self.lock = threading.Lock()
        rcv = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def setup(self):
                super().setup()
                with rcv.lock:
                    rcv.conns.append(self.connection)

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n)
                mode = rcv.mode
                with rcv.lock:
                    rcv.paths.append(self.path)
                    if rcv.fail_first > 0:
                        rcv.fail_first -= 1
                        mode = "503"
                if rcv.auth and self.headers.get("Authorization") != rcv.auth:
                    return self.answer(401, b"unauthorized")
                if mode == "close":
                    rcv.count("close")
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if mode in ("500", "400", "429", "502", "503", "504"):
                    return self.answer(int(mode), b"test receiver says " + mode.encode())
                if mode == "503ra":
                    with rcv.lock:
                        rcv.ra_times.append(time.monotonic())
                    return self.answer(503, b"test receiver says 503, come back later",
                                       extra={"Retry-After": str(rcv.retry_after)})
                if mode == "slow":
                    time.sleep(rcv.slow)
                if self.path != rcv.path:
                    return self.answer(404, b"not found")
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)  # raises (no answer) on a bad member
                req = rcv.pb.ExportMetricsServiceRequest()
                req.ParseFromString(body)
                with rcv.lock:
                    rcv.requests.append((dict(self.headers), req))
                resp = rcv.pb.ExportMetricsServiceResponse()
                if mode == "partial":
                    resp.partial_success.rejected_data_points = 3
                    resp.partial_success.error_message = "3 points had bad timestamps"
                self.answer(200, resp.SerializeToString(), "application/x-protobuf")

            def answer(self, status, body, ctype="text/plain", extra=None):
                rcv.count(status)
                self.send_response(status)
                for k, v in (extra or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        class Server(http.server.ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                pass  # connections the test closes or the agent drops

        self.httpd = Server(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        scheme = "http"
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*tls)
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
            scheme = "https"
        self.port = self.httpd.server_address[1]
        self.url = "%s://127.0.0.1:%d/v1/metrics" % (scheme, self.port)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def count(self, what):
        with self.lock:
            self.answers[what] = self.answers.get(what, 0) + 1

    def answered(self, what):
        with self.lock:
            return self.answers.get(what, 0)

    def last(self):
        with self.lock:
            return self.requests[-1] if self.requests else (None, None)

    def close(self):
        """Down: no more listening, and every connection closed (a
        keep-alive connection would outlive the listening socket)."""
        self.httpd.shutdown()
        self.httpd.server_close()
        with self.lock:
            for c in self.conns:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def wait_for(pred, what, timeout=HANG):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise SystemExit("FAIL: %s: not within %d s" % (what, timeout))


def metrics_of(req):
    """{name: Metric} of an ExportMetricsServiceRequest's single scope."""
    rm = req.resource_metrics
    if len(rm) != 1 or len(rm[0].scope_metrics) != 1:
        raise SystemExit("FAIL: want one resource and one scope, got %r" % req)
    return {m.name: m for m in rm[0].scope_metrics[0].metrics}


def attrs(kvs):
    return {kv.key: kv.value.string_value for kv in kvs}


def point(metric, kind, **labels):
    """The data point of `metric` (field `kind`: sum, gauge, histogram,
    exponential_histogram) whose attributes include `labels`."""
    if metric.WhichOneof("data") != kind:
        raise SystemExit("FAIL: %s is %s, want %s" % (metric.name, metric.WhichOneof("data"), kind))
    for p in getattr(metric, kind).data_points:
        a = attrs(p.attributes)
        if all(a.get(k) == v for k, v in labels.items()):
            return p
    raise SystemExit("FAIL: %s has no point with %r" % (metric.name, labels))


def rss_kib(pid):
    """VmRSS and VmHWM of a process, KiB."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line.split(":")[0]] = int(line.split()[1])
    return out["VmRSS"], out["VmHWM"]


def terminate(p, timeout=HANG):
    """SIGTERM, then the exit status and stderr."""
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=timeout)
    return p.returncode, err


class Lines:
    """A process's stderr read line by line in a thread, kept for waits."""

    def __init__(self, stream):
        self.lines = []
        self.lock = threading.Lock()
        self.t = threading.Thread(target=self.read, args=(stream,), daemon=True)
        self.t.start()

    def read(self, stream):
        for line in stream:
            with self.lock:
                self.lines.append(line)

    def count(self, text):
        with self.lock:
            return sum(text in line for line in self.lines)

    def text(self):
        with self.lock:
            return "".join(self.lines)
