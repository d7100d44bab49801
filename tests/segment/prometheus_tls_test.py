#!/usr/bin/env python3
"""A real Prometheus scrapes pcpustat serve over HTTPS with basic auth.

  prometheus_tls_test.py PCPUSTAT FIXTURE

The test makes a certificate for 127.0.0.1 with openssl and a bcrypt hash
with htpasswd, and writes an exporter-toolkit web configuration
(--web.config.file) as operators do for any Prometheus exporter. Prometheus
(Debian package) on 127.0.0.1 scrapes three jobs: the right password (target
up, value equal to the application's count), a wrong one (401, target down)
and plain HTTP to the TLS port (target down, 400). Then, without Prometheus:
client certificates with client_auth_type RequireAndVerifyClientCert, and
web configurations that must be refused at start. Every wait is bounded.

Exit 77 (skipped) only where prometheus, openssl or htpasswd cannot be
installed (see prometheus_test.py).
"""
import http.client
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import prometheus_test as pt  # noqa: E402  (find_prometheus, free_port, http_json)

COUNT = 8642
FAILS = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILS.append(what)


def run(*cmd, cwd):
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def make_pki(d):
    """A CA, a server certificate for 127.0.0.1 and a client certificate."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    run("openssl", "req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "1",
        "-subj", "/CN=pcpu test CA", cwd=d)
    run("openssl", "req", "-x509", *ec, "-keyout", "rogue.key", "-out", "rogue.crt", "-days", "1",
        "-subj", "/CN=pcpu test rogue", cwd=d)
    for name, ext in [("server", "subjectAltName=IP:127.0.0.1"), ("client", "extendedKeyUsage=clientAuth")]:
        run("openssl", "req", *ec, "-keyout", name + ".key", "-out", name + ".csr",
            "-subj", "/CN=pcpu test " + name, cwd=d)
        with open(os.path.join(d, name + ".ext"), "w") as f:
            f.write(ext + "\n")
        run("openssl", "x509", "-req", "-in", name + ".csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", name + ".crt", "-days", "1", "-extfile", name + ".ext", cwd=d)


def bcrypt(password):
    out = subprocess.run(["htpasswd", "-nbBC", "5", "u", password], capture_output=True, text=True,
                         check=True).stdout.strip()
    return out.split(":", 1)[1]


def start_exporter(pcpustat, env, web, procs, *targets):
    p = subprocess.Popen([pcpustat, "serve", "--listen", "127.0.0.1:0", "--web.config.file", web, *targets],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    procs.append(p)
    line = p.stdout.readline()
    return p, line


def https_get(port, ctx, auth=None):
    c = http.client.HTTPSConnection("127.0.0.1", port, timeout=60, context=ctx)
    h = {}
    if auth:
        import base64
        h["Authorization"] = "Basic " + base64.b64encode(auth.encode()).decode()
    c.request("GET", "/metrics", headers=h)
    r = c.getresponse()
    body = r.read().decode()
    c.close()
    return r.status, body


def prometheus_scrape(prom, tmp, d, target):
    """Prometheus scrapes three jobs; returns (value seen, targets)."""
    port = pt.free_port()
    cfg = os.path.join(tmp, "prometheus.yml")
    ca = os.path.join(d, "ca.crt")
    with open(cfg, "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n")
        for job, scheme, pw in [("good", "https", "s3cret"), ("badpw", "https", "wrong"),
                                ("plain", "http", "s3cret")]:
            f.write("  - job_name: %s\n    scheme: %s\n    tls_config: { ca_file: '%s' }\n"
                    "    basic_auth: { username: prometheus, password: '%s' }\n"
                    "    static_configs: [{ targets: ['%s'] }]\n" % (job, scheme, ca, pw, target))
    log = open(os.path.join(tmp, "prometheus.log"), "w")
    srv = subprocess.Popen([prom, "--config.file=" + cfg, "--storage.tsdb.path=" + os.path.join(tmp, "data"),
                            "--web.listen-address=127.0.0.1:%d" % port, "--log.level=warn"],
                           stdout=log, stderr=log)
    base = "http://127.0.0.1:%d" % port
    try:
        q = urllib.parse.quote('test_events_total{job="good",pcpu_segment="tlstest"}')
        value, health = None, {}
        deadline = time.monotonic() + 300  # only catches a Prometheus that never gets there
        while time.monotonic() < deadline:
            try:
                res = pt.http_json(base + "/api/v1/query?query=" + q).get("data", {}).get("result", [])
                if res:
                    value = float(res[0]["value"][1])
                tg = pt.http_json(base + "/api/v1/targets")["data"]["activeTargets"]
                health = {t["labels"]["job"]: (t["health"], t["lastError"]) for t in tg}
            except OSError:
                pass
            if (value == COUNT and health.get("good", ("",))[0] == "up" and
                    health.get("badpw", ("",))[0] == "down" and health.get("plain", ("",))[0] == "down"):
                break
            if srv.poll() is not None:
                raise SystemExit("FAIL: prometheus exited: %s" % open(log.name).read()[-2000:])
            time.sleep(0.3)
        return value, health
    finally:
        pt.stop([srv])


def main():
    pcpustat, fixture = sys.argv[1], sys.argv[2]
    prom = pt.find_prometheus()
    for tool in ("openssl", "htpasswd"):
        if not shutil.which(tool):
            print("FAIL: %s not installed: run scripts/install-deps.sh" % tool)
            sys.exit(1)
    tmp = tempfile.mkdtemp(prefix="pcpu-tls.")
    d = os.path.join(tmp, "pki")
    os.mkdir(d)
    segdir = os.path.join(tmp, "seg")
    os.mkdir(segdir, 0o700)
    env = dict(os.environ, PCPU_SEGMENT_DIR=segdir)
    procs = []
    try:
        make_pki(d)
        web = os.path.join(d, "web.yml")
        with open(web, "w") as f:  # relative paths: from the file's directory
            f.write("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
                    "  min_version: TLS12\nbasic_auth_users:\n  prometheus: %s\n" % bcrypt("s3cret"))
        app = subprocess.Popen([fixture, "count", str(COUNT), "tlstest"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, env=env, text=True)
        procs.append(app)
        if not app.stdout.readline().startswith("ready"):
            raise SystemExit("FAIL: the test application did not start")
        exp, line = start_exporter(pcpustat, env, web, procs, "tlstest")
        check("listening on https://" in line, "exporter serves HTTPS: %r" % line.strip())
        target = line.split("https://")[1].split("/")[0]
        port = int(target.rsplit(":", 1)[1])

        value, health = prometheus_scrape(prom, tmp, d, target)
        check(value == COUNT, "Prometheus over HTTPS + basic auth: test_events_total = %r (want %d)"
              % (value, COUNT))
        check(health.get("good", ("",))[0] == "up", "right password: target up %r" % (health.get("good"),))
        bad = health.get("badpw", ("", ""))
        check(bad[0] == "down" and "401" in bad[1], "wrong password: target down, 401 (%r)" % (bad,))
        plain = health.get("plain", ("", ""))
        # Answered 400 (as Go exporters do), not closed without a word:
        # Prometheus says why the target is down.
        check(plain[0] == "down" and "400" in plain[1],
              "plain HTTP to the TLS port: target down, 400 (%r)" % (plain,))

        ctx = ssl.create_default_context(cafile=os.path.join(d, "ca.crt"))
        st, body = https_get(port, ctx, "prometheus:s3cret")
        check(st == 200 and 'pcpu_segment="tlstest"' in body and " %d" % COUNT in body, "curl-like GET: 200")
        st, _ = https_get(port, ctx)
        check(st == 401, "no credentials: 401")
        st, _ = https_get(port, ctx, "nobody:s3cret")
        check(st == 401, "unknown user: 401")
        pt.stop([exp])

        # Client certificates, verified against client_ca_file.
        with open(web, "w") as f:
            f.write("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
                    "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n")
        exp, line = start_exporter(pcpustat, env, web, procs, "tlstest")
        port = int(line.split("https://")[1].split("/")[0].rsplit(":", 1)[1])
        cctx = ssl.create_default_context(cafile=os.path.join(d, "ca.crt"))
        cctx.load_cert_chain(os.path.join(d, "client.crt"), os.path.join(d, "client.key"))
        st, _ = https_get(port, cctx)
        check(st == 200, "client certificate signed by client_ca_file: 200")
        try:
            st, _ = https_get(port, ctx)
        except (OSError, ssl.SSLError, http.client.HTTPException):
            st = "refused"
        check(st != 200, "no client certificate: refused (%r)" % (st,))
        rctx = ssl.create_default_context(cafile=os.path.join(d, "ca.crt"))
        rctx.load_cert_chain(os.path.join(d, "rogue.crt"), os.path.join(d, "rogue.key"))
        try:
            st, _ = https_get(port, rctx)
        except (OSError, ssl.SSLError, http.client.HTTPException):
            st = "refused"
        check(st != 200, "client certificate not signed by client_ca_file: refused (%r)" % (st,))
        pt.stop([exp])

        # Configurations refused at start, not half applied.
        for bad_cfg, why in [("tls_server_config:\n  cert_file: server.crt\n", "no key_file"),
                             ("basic_auth_users:\n  prometheus: plaintext\n", "not a bcrypt hash"),
                             ("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
                              "  cipher_suites: [TLS_AES_128_GCM_SHA256]\n", "unsupported setting"),
                             ("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
                              "  client_auth_type: RequireAndVerifyClientCert\n", "no client_ca_file"),
                             ("tls_server_config: [\n", "invalid YAML")]:
            with open(web, "w") as f:
                f.write(bad_cfg)
            p = subprocess.run([pcpustat, "serve", "--listen", "127.0.0.1:0", "--web.config.file", web],
                               capture_output=True, text=True, env=env, timeout=60)
            check(p.returncode == 2 and "pcpustat serve:" in p.stderr, "web config with %s: exit 2 (%s)"
                  % (why, p.stderr.strip()[:100]))
    finally:
        pt.stop(procs)
        shutil.rmtree(tmp, ignore_errors=True)
    if FAILS:
        print("prometheus_tls_test: %d failed" % len(FAILS))
        sys.exit(1)
    print("prometheus_tls_test: ok")


if __name__ == "__main__":
    main()
