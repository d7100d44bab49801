#!/usr/bin/env python3
"""A real Prometheus server scrapes pcpustat serve.

  prometheus_test.py PCPUSTAT FIXTURE

A test application counts a known number of events into its segment; the
exporter serves it; Prometheus (Debian package `prometheus`) runs on
127.0.0.1 with a random free port, a temporary storage directory and a scrape
configuration pointing at the exporter. The test queries /api/v1/query until
the scraped value equals the count, checks /api/v1/targets reports the target
healthy, and stops everything. Every wait is bounded.

Exit 77 (skipped, with a message) only where the prometheus binary cannot be
installed; if it could be but is not, the test fails and says to run
scripts/install-deps.sh.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

COUNT = 4242


def find_prometheus():
    p = shutil.which("prometheus")
    if p:
        return p
    installable = False
    if shutil.which("apt-cache"):
        out = subprocess.run(["apt-cache", "policy", "prometheus"], capture_output=True, text=True).stdout
        installable = "Candidate:" in out and "Candidate: (none)" not in out
    if installable:
        print("FAIL: the prometheus binary is not installed but the Debian package is available: "
              "run scripts/install-deps.sh")
        sys.exit(1)
    print("SKIP: the prometheus server cannot be installed here (no Debian package 'prometheus' "
          "available); the Prometheus integration test needs it")
    sys.exit(77)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def http_json(url, timeout=60):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.load(r)


def start_app_and_exporter(procs, fixture, args, pcpustat, name, env):
    """Starts the test application (segment_fixture ARGS, until "ready")
    and `pcpustat serve` on a free loopback port for segment NAME; both
    are appended to procs. Returns the application and host:port."""
    app = subprocess.Popen([fixture] + args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           env=env, text=True)
    procs.append(app)
    if not app.stdout.readline().startswith("ready"):
        raise SystemExit("FAIL: the test application did not start")
    exp = subprocess.Popen([pcpustat, "serve", "--listen", "127.0.0.1:0", name],
                           stdout=subprocess.PIPE, env=env, text=True)
    procs.append(exp)
    line = exp.stdout.readline()
    if "listening on http://" not in line:
        raise SystemExit("FAIL: the exporter did not start: %r" % line)
    return app, line.split("http://")[1].split("/")[0]


def launch_prometheus(prom, tmp, target, extra=()):
    """Starts Prometheus on 127.0.0.1 (a free port, storage in tmp), scraping
    target every second; waits (bounded) until it is ready. Returns the
    process and its base URL."""
    port = free_port()
    cfg = os.path.join(tmp, "prometheus.yml")
    with open(cfg, "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                "scrape_configs:\n  - job_name: pcpu\n"
                "    static_configs:\n      - targets: ['%s']\n" % target)
    log = open(os.path.join(tmp, "prometheus.log"), "w")
    srv = subprocess.Popen([prom, "--config.file=" + cfg,
                            "--storage.tsdb.path=" + os.path.join(tmp, "data"),
                            "--web.listen-address=127.0.0.1:%d" % port,
                            "--log.level=warn"] + list(extra), stdout=log, stderr=log)
    base = "http://127.0.0.1:%d" % port
    # Bounds that only catch a Prometheus that never gets ready: a loaded
    # machine may take long to start it.
    deadline = time.monotonic() + 300
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
    srv.wait()
    raise SystemExit("FAIL: prometheus not ready within 300 s")


def stop(procs):
    """Stops the test's processes, last started first (stdin closed, then
    SIGTERM, SIGKILL after 60 s)."""
    for p in reversed(procs):
        if p.poll() is None:
            if p.stdin:
                p.stdin.close()
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def main():
    pcpustat, fixture = sys.argv[1], sys.argv[2]
    prom = find_prometheus()
    tmp = tempfile.mkdtemp(prefix="pcpu-prom.")
    segdir = os.path.join(tmp, "seg")
    os.mkdir(segdir, 0o700)
    env = dict(os.environ, PCPU_SEGMENT_DIR=segdir)
    procs = []
    ok = False
    try:
        app, target = start_app_and_exporter(procs, fixture, ["count", str(COUNT), "promtest"],
                                             pcpustat, "promtest", env)

        srv, base = launch_prometheus(prom, tmp, target)
        procs.append(srv)

        q = urllib.parse.quote('test_events_total{pcpu_segment="promtest"}')
        value = None
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            d = http_json(base + "/api/v1/query?query=" + q)
            res = d.get("data", {}).get("result", [])
            if res:
                value = float(res[0]["value"][1])
                if value == COUNT:
                    break
            time.sleep(0.3)
        if value != COUNT:
            raise SystemExit("FAIL: Prometheus saw %r, want %d" % (value, COUNT))
        print("ok   Prometheus scraped test_events_total = %d" % COUNT)
        labels = res[0]["metric"]
        if labels.get("pcpu_pid") != str(app.pid) or labels.get("job") != "pcpu":
            raise SystemExit("FAIL: unexpected labels %r" % labels)
        print("ok   labels: %s" % ", ".join("%s=%s" % kv for kv in sorted(labels.items())))

        d = http_json(base + "/api/v1/targets")
        active = d["data"]["activeTargets"]
        if len(active) != 1 or active[0]["health"] != "up" or target not in active[0]["scrapeUrl"]:
            raise SystemExit("FAIL: target not healthy: %r" % active)
        print("ok   /api/v1/targets: %s health=up lastError=%r" % (active[0]["scrapeUrl"],
                                                                    active[0]["lastError"]))
        d = http_json(base + "/api/v1/query?query=" +
                      urllib.parse.quote('pcpu_segment_up{pcpu_segment="promtest"}'))
        up = d["data"]["result"]
        if not up or up[0]["value"][1] != "1":
            raise SystemExit("FAIL: pcpu_segment_up is %r" % up)
        print("ok   pcpu_segment_up = 1")
        ok = True
    finally:
        stop(procs)
        shutil.rmtree(tmp, ignore_errors=True)
    print("prometheus_test: ok" if ok else "prometheus_test: FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
