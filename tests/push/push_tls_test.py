#!/usr/bin/env python3
"""`pcpustat push` to receivers that require TLS and authentication.

  push_tls_test.py PCPUSTAT FIXTURE

A self-signed certificate for 127.0.0.1 is made at test time (openssl).

 - OTLP: a Python receiver on HTTPS requiring a bearer token. With
   --ca-file and --bearer-token-file the request arrives (decoded, exact);
   without --ca-file the certificate is refused (exit 1, the log says why;
   nothing reaches the receiver's handler); a wrong token gets 401, which
   is not retried (exactly one request); a missing token file fails the
   push, saying so.
 - Remote write: a real Prometheus with --web.config.file (TLS and a
   bcrypt basic_auth_users entry, as its exporter toolkit reads them).
   With --basic-auth-user/--basic-auth-password-file and --ca-file the
   value is queryable (over HTTPS with the same credentials); a wrong
   password gets 401, dropped and not retried.

Exit 77 only where Prometheus cannot be installed (that part needs it).
"""
import base64
import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from push_common import (HANG, Fixture, Receiver, find_prometheus, free_port, metrics_of,  # noqa: E402
                         point, run_push, stop)
import time  # noqa: E402


def fail(msg):
    raise SystemExit("FAIL: " + msg)


def make_cert(tmp):
    crt, key = os.path.join(tmp, "server.crt"), os.path.join(tmp, "server.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", key, "-out", crt], check=True, capture_output=True)
    return crt, key


def write(tmp, name, text):
    p = os.path.join(tmp, name)
    with open(p, "w") as f:
        f.write(text)
    os.chmod(p, 0o600)
    return p


def otlp(pcpustat, env, tmp, crt, key):
    rcv = Receiver(tls=(crt, key), auth="Bearer s3cret-token")
    try:
        tok = write(tmp, "token", "s3cret-token\n")
        base = ["--otlp", rcv.url, "--count", "1", "pushfix"]
        rc, err = run_push(pcpustat, env, base + ["--ca-file", crt, "--bearer-token-file", tok])
        if rc != 0 or len(rcv.requests) != 1:
            fail("TLS + bearer: exit %d, %d requests: %s" % (rc, len(rcv.requests), err))
        if point(metrics_of(rcv.last()[1])["push_requests"], "sum", method="GET").as_int != 1234:
            fail("TLS + bearer: wrong value")
        print("ok   OTLP over HTTPS with a bearer token: delivered, exact")
        # The CA from the OpenTelemetry environment when --ca-file is absent.
        rc, err = run_push(pcpustat, dict(env, OTEL_EXPORTER_OTLP_CERTIFICATE=crt),
                           base + ["--bearer-token-file", tok])
        if rc != 0 or len(rcv.requests) != 2:
            fail("OTEL_EXPORTER_OTLP_CERTIFICATE: exit %d: %s" % (rc, err))
        print("ok   the CA from OTEL_EXPORTER_OTLP_CERTIFICATE: delivered")
        rc, err = run_push(pcpustat, env, base + ["--bearer-token-file", tok])
        if rc != 1 or "certificate" not in err or len(rcv.requests) != 2:
            fail("without --ca-file: exit %d: %s" % (rc, err))
        print("ok   without --ca-file: refused: %s" % err.splitlines()[0])
        bad = write(tmp, "badtoken", "wrong\n")
        rc, err = run_push(pcpustat, env, base + ["--ca-file", crt, "--bearer-token-file", bad])
        if rc != 1 or "HTTP 401" not in err or "not retried" not in err or rcv.answered(401) != 1 \
                or "refused the credentials" not in err:
            fail("wrong token: exit %d, %d answers 401: %s" % (rc, rcv.answered(401), err))
        print("ok   a wrong token: 401, one request, the credentials said refused, not retried")
        before = len(rcv.requests) + rcv.answered(401)
        rc, err = run_push(pcpustat, env, base + ["--ca-file", crt, "--bearer-token-file",
                                                  os.path.join(tmp, "missing")])
        if rc != 2 or "cannot read" not in err or len(rcv.requests) + rcv.answered(401) != before:
            fail("missing token file: exit %d: %s" % (rc, err))
        print("ok   a missing token file: refused at start (exit 2), nothing sent")
    finally:
        rcv.close()


def prometheus(pcpustat, env, tmp, crt, key, procs):
    prom = find_prometheus()
    hashed = subprocess.run(["htpasswd", "-nbBC", "10", "pushuser", "pushpass"], check=True,
                            capture_output=True, text=True).stdout.strip().split(":", 1)[1]
    web = write(tmp, "web.yml", "tls_server_config:\n  cert_file: %s\n  key_file: %s\n"
                "basic_auth_users:\n  pushuser: '%s'\n" % (crt, key, hashed))
    cfg = write(tmp, "prometheus.yml", "global:\n  evaluation_interval: 1h\n")
    port = free_port()
    log = open(os.path.join(tmp, "prometheus.log"), "w")
    srv = subprocess.Popen([prom, "--config.file=" + cfg, "--storage.tsdb.path=" + os.path.join(tmp, "data"),
                            "--web.listen-address=127.0.0.1:%d" % port, "--web.config.file=" + web,
                            "--web.enable-remote-write-receiver", "--log.level=warn"], stdout=log, stderr=log)
    procs.append(srv)
    ctx = ssl.create_default_context(cafile=crt)
    auth = "Basic " + base64.b64encode(b"pushuser:pushpass").decode()
    base = "https://127.0.0.1:%d" % port

    def get(path):
        req = urllib.request.Request(base + path, headers={"Authorization": auth})
        with urllib.request.urlopen(req, context=ctx, timeout=60) as r:
            return r.read()

    deadline = time.monotonic() + HANG
    while True:
        try:
            get("/-/ready")
            break
        except OSError:
            if srv.poll() is not None or time.monotonic() > deadline:
                fail("prometheus with TLS did not start: %s" % open(log.name).read()[-2000:])
            time.sleep(0.2)
    pw = write(tmp, "password", "pushpass\n")
    # --timeout 120: Prometheus checks a password with bcrypt (by design
    # slow) and a loaded machine makes it slower; the default 10 s per
    # request only suits a quiet one. The test is about what is sent and
    # answered, not how fast.
    args = ["--remote-write", base + "/api/v1/write", "--count", "1", "--ca-file", crt,
            "--basic-auth-user", "pushuser", "--timeout", "120", "pushfix"]
    rc, err = run_push(pcpustat, env, args + ["--basic-auth-password-file", pw])
    if rc != 0:
        fail("remote write over TLS + basic auth: exit %d: %s" % (rc, err))
    d = json.loads(get("/api/v1/query?query=" + urllib.parse.quote('push_requests_total{method="GET"}')))
    res = d["data"]["result"]
    if len(res) != 1 or res[0]["value"][1] != "1234":
        fail("Prometheus has %r" % res)
    print("ok   remote write to Prometheus over HTTPS with basic auth: push_requests_total = 1234")
    bad = write(tmp, "badpassword", "nope\n")
    rc, err = run_push(pcpustat, env, args + ["--basic-auth-password-file", bad])
    if rc != 1 or "HTTP 401" not in err or "not retried" not in err:
        fail("wrong password: exit %d: %s" % (rc, err))
    print("ok   a wrong password: 401, dropped, not retried")


def main():
    pcpustat, fixture = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="pcpu-push-tls.")
    segdir = os.path.join(tmp, "seg")
    os.mkdir(segdir, 0o700)
    env = dict(os.environ, PCPU_SEGMENT_DIR=segdir)
    procs = []
    ok = False
    try:
        crt, key = make_cert(tmp)
        app = Fixture(fixture, env)
        procs.append(app.p)
        app.cmd("add 1234")
        otlp(pcpustat, env, tmp, crt, key)
        prometheus(pcpustat, env, tmp, crt, key, procs)
        ok = True
    finally:
        stop(procs)
        shutil.rmtree(tmp, ignore_errors=True)
    print("push_tls_test: ok" if ok else "push_tls_test: FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
