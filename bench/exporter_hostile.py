#!/usr/bin/env python3
"""What hostile clients and neighbours cost an exporter's legitimate scrapes.

  exporter_hostile.py auth PCPUSTAT FIXTURE [--clients 0,8,16] [--seconds 10]
                           [--cost 10] [--same-password] [--example PROGRAM]
      HTTPS with basic auth (bcrypt cost COST, as `htpasswd -B -C COST`
      makes it). For each N in --clients: N processes send requests with
      wrong passwords (a new random one each time, or one fixed wrong
      password with --same-password) as fast as the exporter answers,
      while one legitimate client scrapes with the right password once
      every 50 ms on a kept-alive connection. Prints the legitimate
      scrapes' median, 90th percentile and worst latency, the median over
      the first row's (0 clients: the idle scrape), how many failed, and
      what the wrong-password clients were answered (401, 429, 503...).
      --example PROGRAM: the same against examples/exporter.c (a program
      serving its own registry on libpcpu-exporter, the core `pcpustat
      serve` uses) instead of `pcpustat serve`. "serving CPU" is the CPU
      time per second of the exporter's serving threads (libmicrohttpd's,
      MHD-*; not the bcrypt worker, one check at a time by design): what
      answering the clients cost, whatever else loads the machine.
  exporter_hostile.py junk PCPUSTAT FIXTURE [--files 20000] [--scrapes 5]
      Another user (uid 65534, so run it as root) puts FILES empty files
      named like segments into the served directory beside one real
      segment. Prints the series, bytes, median time and the exporter's
      CPU time of a /metrics scrape, before and with the junk.

A measuring tool, not a test: nothing is asserted, figures depend on the
machine and its load (run it on an idle one). Loopback only; everything
started is stopped.
"""
import argparse
import base64
import http.client
import multiprocessing
import os
import secrets
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "segment"))
from prometheus_test import stop  # noqa: E402  (SIGTERM, then SIGKILL)


def start(procs, cmd, env, want):
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         env=env, text=True)
    procs.append(p)
    line = p.stdout.readline()
    if want not in line:
        raise SystemExit("%s did not start: %r" % (cmd[0], line))
    return p, line


def auth_header(user, password):
    return {"Authorization": "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()}


def attacker(port, same, stop_at, out):
    """Wrong passwords as fast as they are answered; reconnects when the
    server closes. Counts the statuses into `out`."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    counts, conn = {}, None
    while time.monotonic() < stop_at:
        try:
            if conn is None:
                conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=ctx)
            pw = "wrong" if same else secrets.token_hex(8)
            conn.request("GET", "/metrics", headers=auth_header("prometheus", pw))
            r = conn.getresponse()
            r.read()
            counts[r.status] = counts.get(r.status, 0) + 1
            if r.getheader("Connection", "").lower() == "close":
                conn.close()
                conn = None
        except (OSError, http.client.HTTPException):
            counts["error"] = counts.get("error", 0) + 1
            if conn:
                conn.close()
            conn = None
    out.put(counts)


def serving_cpu(pid):
    """CPU seconds of the process's serving threads (libmicrohttpd's,
    named MHD-*): not the bcrypt worker, not the main thread."""
    total, tick = 0.0, os.sysconf("SC_CLK_TCK")
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                data = f.read()
        except OSError:
            continue
        comm = data[data.index("(") + 1:data.rindex(")")]
        if not comm.startswith("MHD"):
            continue
        fields = data.rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def auth(a):
    procs, tmp = [], tempfile.mkdtemp(prefix="pcpu-authbench.")
    try:
        segdir = os.path.join(tmp, "seg")
        os.mkdir(segdir, 0o700)
        env = dict(os.environ, PCPU_SEGMENT_DIR=segdir)
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                        "-nodes", "-keyout", "k.pem", "-out", "c.pem", "-days", "1", "-subj", "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1"], cwd=tmp, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        hashed = subprocess.run(["htpasswd", "-nbBC", str(a.cost), "prometheus", "s3cret"], capture_output=True,
                                text=True, check=True).stdout.strip().split(":", 1)[1]
        with open(os.path.join(tmp, "web.yml"), "w") as f:
            f.write("tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n"
                    "basic_auth_users:\n  prometheus: '%s'\n" % hashed)
        print("| wrong-password clients | legit scrapes | failed | median ms | p90 ms | worst ms | "
              "median / idle | serving CPU ms/s | wrong-password answers |")
        print("|---|---|---|---|---|---|---|---|---|")
        idle = None
        for n in a.clients:
            # A fresh exporter per row: no row inherits another's caches.
            if a.example:
                exp, line = start(procs, [a.example, "127.0.0.1:0", os.path.join(tmp, "web.yml")], env,
                                  "https://")
            else:
                start(procs, [a.fixture, "count", "777", "bench"], env, "ready")
                exp, line = start(procs, [a.pcpustat, "serve", "--listen", "127.0.0.1:0", "--web.config.file",
                                          os.path.join(tmp, "web.yml"), "bench"], env, "listening on https")
            port = int(line.split("https://")[1].split("/")[0].rsplit(":", 1)[1])
            ctx = ssl.create_default_context(cafile=os.path.join(tmp, "c.pem"))
            legit = http.client.HTTPSConnection("127.0.0.1", port, timeout=30, context=ctx)
            good = auth_header("prometheus", "s3cret")
            legit.request("GET", "/metrics", headers=good)  # the first one pays its bcrypt
            legit.getresponse().read()
            q = multiprocessing.Queue()
            stop_at = time.monotonic() + a.seconds + 1
            workers = [multiprocessing.Process(target=attacker, args=(port, a.same_password, stop_at, q))
                       for _ in range(n)]
            for w in workers:
                w.start()
            time.sleep(0.5 if n else 0)
            lat, failed, end = [], 0, time.monotonic() + a.seconds
            cpu0, t_start = serving_cpu(exp.pid), time.monotonic()
            while time.monotonic() < end:
                t0 = time.monotonic()
                try:
                    legit.request("GET", "/metrics", headers=good)
                    r = legit.getresponse()
                    body = r.read()
                    ok = r.status == 200 and (b"example_requests_total" if a.example
                                              else b"test_events_total") in body
                except (OSError, http.client.HTTPException):
                    ok = False
                    legit.close()
                    legit = http.client.HTTPSConnection("127.0.0.1", port, timeout=30, context=ctx)
                lat.append(time.monotonic() - t0)
                failed += not ok
                time.sleep(0.05)
            cpu_ms = 1000 * (serving_cpu(exp.pid) - cpu0) / (time.monotonic() - t_start)
            answers = {}
            for _ in workers:
                for k, v in q.get(timeout=60).items():
                    answers[k] = answers.get(k, 0) + v
            for w in workers:
                w.join(timeout=30)
            legit.close()
            stop(procs)
            procs.clear()
            ms = sorted(x * 1000 for x in lat)
            med = statistics.median(ms)
            idle = med if idle is None else idle
            print("| %d | %d | %d | %.1f | %.1f | %.1f | %.2fx | %.0f | %s |" % (
                n, len(ms), failed, med, ms[int(0.9 * (len(ms) - 1))], ms[-1], med / idle, cpu_ms,
                ", ".join("%s: %d" % (k, v) for k, v in sorted(answers.items(), key=str)) or "-"), flush=True)
    finally:
        stop(procs)
        shutil.rmtree(tmp, ignore_errors=True)


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def scrape(port, n, pid):
    """Series, pcpu_segment_up series, bytes, median seconds and the
    exporter's CPU seconds per scrape, over n scrapes."""
    times, body, cpu0 = [], b"", cpu_seconds(pid)
    for _ in range(n):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        t0 = time.monotonic()
        c.request("GET", "/metrics")
        r = c.getresponse()
        body = r.read()
        times.append(time.monotonic() - t0)
        c.close()
    cpu = (cpu_seconds(pid) - cpu0) / n
    series = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
    ups = sum(1 for line in body.splitlines() if line.startswith(b"pcpu_segment_up{"))
    return series, ups, len(body), statistics.median(times), cpu


def junk(a):
    if os.geteuid() != 0:
        raise SystemExit("junk: run as root (the junk belongs to another user, uid 65534)")
    procs, tmp = [], tempfile.mkdtemp(prefix="pcpu-junkbench.")
    try:
        segdir = os.path.join(tmp, "seg")
        os.mkdir(segdir, 0o755)
        env = dict(os.environ, PCPU_SEGMENT_DIR=segdir)
        start(procs, [a.fixture, "count", "777", "real"], env, "ready")
        exp, line = start(procs, [a.pcpustat, "serve", "--listen", "127.0.0.1:0"], env, "listening on http")
        port = int(line.split("://")[1].split("/")[0].rsplit(":", 1)[1])
        print("| junk files | series | pcpu_segment_up series | bytes | median scrape ms | CPU ms per scrape |")
        print("|---|---|---|---|---|---|")
        s = scrape(port, a.scrapes, exp.pid)
        print("| 0 | %d | %d | %d | %.1f | %.0f |" % (s[0], s[1], s[2], s[3] * 1000, s[4] * 1000), flush=True)
        for i in range(a.files):
            p = os.path.join(segdir, "pcpu.%d.junk%d" % (3000000 + i, i))
            os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o600))
            os.chown(p, 65534, 65534)
        # A fresh real segment (a fixture lives 60 s at most); the first
        # one goes when it ends.
        start(procs, [a.fixture, "count", "777", "real2"], env, "ready")
        scrape(port, 1, exp.pid)  # the first with junk: caches warm
        s = scrape(port, a.scrapes, exp.pid)
        print("| %d | %d | %d | %d | %.1f | %.0f |" % (a.files, s[0], s[1], s[2], s[3] * 1000, s[4] * 1000),
              flush=True)
    finally:
        stop(procs)
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["auth", "junk"])
    ap.add_argument("pcpustat")
    ap.add_argument("fixture")
    ap.add_argument("--clients", default="0,8,16", type=lambda s: [int(x) for x in s.split(",")])
    ap.add_argument("--seconds", default=10.0, type=float)
    ap.add_argument("--cost", default=10, type=int)
    ap.add_argument("--same-password", action="store_true")
    ap.add_argument("--files", default=20000, type=int)
    ap.add_argument("--scrapes", default=5, type=int)
    ap.add_argument("--example", help="serve with this program (examples/exporter.c) instead of pcpustat")
    a = ap.parse_args()
    (auth if a.mode == "auth" else junk)(a)


if __name__ == "__main__":
    main()
