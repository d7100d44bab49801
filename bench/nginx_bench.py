#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""nginx with pcpu's module beside no module, stub_status and
nginx-module-vts: wrk against `return 200` and a small static file,
keep-alive, 1 and 17 filter keys (issue 52; bench/nginx.md).

  python3 bench/nginx_bench.py --vts PATH/ngx_http_vhost_traffic_status_module.so \\
      [--module build/integrations/nginx/ngx_http_pcpu_module.so] [--workers 1,2]
      [--duration 5] [--rounds 5] [--connections 64] [--threads 2] [--keys 2000]
      [--nginx /usr/sbin/nginx]
  python3 bench/nginx_bench.py --scrape-only [--scrape-keys 20000] [--rounds 5]

Every variant runs at once, each nginx on its own port, all with the same
nginx binary (Debian's, the one both modules are built against) and the
same configuration but for the module's lines; each round runs wrk once
against each variant in a shuffled order, so that load on the machine
falls on all of them alike. Printed: the median requests per second and
99th percentile latency of each, and their ratios to no module; then the
memory each module takes per filter key and per series.

nginx-module-vts is not part of this project: build it from its source
against the same nginx (bench/nginx.md says how) and pass its .so.
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import http.client

NGINX = "/usr/sbin/nginx"

# The 17 keys: request attributes every nginx has, of low cardinality in
# this benchmark (as VTS's PR #353 measured: one key, then seventeen).
KEYS17 = ["$uri", "$host", "$remote_addr", "$request_method", "$status", "$server_protocol",
          "$scheme", "$http_user_agent", "$http_accept", "$server_port", "$server_name",
          "$request_uri", "$http_host", "$server_addr", "$content_type", "$https",
          "$http_connection"]


def variants(vts, module):
    def vts_keys(n):
        return ["vhost_traffic_status_zone;"] + [
            "vhost_traffic_status_filter_by_set_key %s k%d;" % (k, i) for i, k in enumerate(KEYS17[:n])]

    def pcpu_keys(n, extra=""):
        return ["pcpu_stats on;"] + [
            "pcpu_stats_filter k%d %s%s;" % (i, k, extra) for i, k in enumerate(KEYS17[:n])]
    return {
        "none": ("", [], ""),
        "stub_status": ("", [], "location = /stub { stub_status; }"),
        "vts-1": ("load_module %s;" % vts, vts_keys(1), ""),
        "vts-17": ("load_module %s;" % vts, vts_keys(17), ""),
        "pcpu-1": ("load_module %s;" % module, pcpu_keys(1), ""),
        "pcpu-17": ("load_module %s;" % module, pcpu_keys(17), ""),
        # round 2's features on (issue 63): a request-time histogram per
        # key and expiry (the connection, version and limit families are
        # always on; no upstream or TLS here)
        "pcpu-17h": ("load_module %s;" % module,
                     pcpu_keys(17, " histogram") + ["pcpu_stats_expire 60s;"], ""),
    }


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Server:
    def __init__(self, name, spec, workers, root):
        load, http_lines, extra = spec
        self.name, self.port = name, free_port()
        self.prefix = tempfile.mkdtemp(prefix="pcpu-nginx-bench-")
        os.makedirs(os.path.join(self.prefix, "logs"))
        conf = """%s
worker_processes %d;
error_log %s/logs/error.log;
pid %s/logs/nginx.pid;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 100000;
    %s
    pcpu_stats_segment_placeholder
    server {
        listen 127.0.0.1:%d reuseport;
        server_name bench.test;
        location = /return { return 200 "ok\\n"; }
        location /static/ { alias %s/; }
        %s
    }
}
""" % (load, workers, self.prefix, self.prefix, "\n    ".join(http_lines), self.port, root, extra)
        if "ngx_http_pcpu_module" in load:
            conf = conf.replace("pcpu_stats_segment_placeholder",
                                "pcpu_stats_segment nginx-bench-%s-%d;" % (name, os.getpid()))
        else:
            conf = conf.replace("pcpu_stats_segment_placeholder", "")
        self.conf = os.path.join(self.prefix, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(conf)
        subprocess.run([NGINX, "-p", self.prefix, "-c", self.conf], check=True)
        for _ in range(500):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.01)

    def master(self):
        with open(os.path.join(self.prefix, "logs", "nginx.pid")) as f:
            return int(f.read())

    def stop(self):
        subprocess.run([NGINX, "-p", self.prefix, "-c", self.conf, "-s", "quit"], capture_output=True)
        pid = os.path.join(self.prefix, "logs", "nginx.pid")
        for _ in range(500):
            if not os.path.exists(pid):
                break
            time.sleep(0.01)
        shutil.rmtree(self.prefix, ignore_errors=True)


def worker_cpu(master):
    """CPU seconds (user + system) the master's children used so far."""
    t = 0
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    st = f.read()
            except OSError:
                continue
            fields = st[st.rindex(")") + 2:].split()
            if int(fields[1]) == master:
                t += int(fields[11]) + int(fields[12])
    return t / os.sysconf("SC_CLK_TCK")


def wrk(server, path, a):
    port = server.port
    cpu0 = worker_cpu(server.master())
    out = subprocess.run(["wrk", "-t%d" % a.threads, "-c%d" % a.connections, "-d%ds" % a.duration,
                          "--latency", "http://127.0.0.1:%d%s" % (port, path)],
                         capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    m = re.search(r"^\s+99%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
    p99 = float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if errors:
        sys.exit("wrk: %s non-2xx answers from %s\n%s" % (errors.group(1), path, out))
    n = int(re.search(r"(\d+) requests in", out).group(1))
    # The workers' CPU time per request: what each variant costs, less
    # sensitive than throughput to other load on the machine.
    return rps, p99, (worker_cpu(server.master()) - cpu0) / n * 1e6


def speed(a, root):
    specs = variants(a.vts, a.module)
    print("| workers | target | variant | req/s (median) | x no module | p99 ms (median) | x no module "
          "| worker CPU us/request (median) | x no module |")
    print("|---|---|---|---|---|---|---|---|---|")
    for workers in a.workers:
        servers = {n: Server(n, s, workers, root) for n, s in specs.items()}
        try:
            res = {}
            for r in range(a.rounds):
                order = [(n, t) for n in servers for t in ("/return", "/static/small.html")]
                random.shuffle(order)
                for n, t in order:
                    res.setdefault((n, t), []).append(wrk(servers[n], t, a))
            for t in ("/return", "/static/small.html"):
                base_rps = statistics.median(x[0] for x in res[("none", t)])
                base_p99 = statistics.median(x[1] for x in res[("none", t)])
                base_cpu = statistics.median(x[2] for x in res[("none", t)])
                for n in specs:
                    rps = statistics.median(x[0] for x in res[(n, t)])
                    p99 = statistics.median(x[1] for x in res[(n, t)])
                    cpu = statistics.median(x[2] for x in res[(n, t)])
                    print("| %d | %s | %s | %.0f | %.3f | %.3f | %.3f | %.2f | %.3f |" % (
                        workers, t, n, rps, rps / base_rps, p99, p99 / base_p99, cpu,
                        cpu / base_cpu), flush=True)
            print("| | | rounds' req/s (none, pcpu-17, vts-17; /return): %s |" % "; ".join(
                ",".join("%.0f" % x[0] for x in res[(n, "/return")]) for n in ("none", "pcpu-17", "vts-17")))
        finally:
            for s in servers.values():
                s.stop()


def scrape(a, root):
    """Request latency on the worker that serves the scrapes (issue 63):
    one worker, --scrape-keys filter keys, wrk on /return with a scrape of
    the whole exposition once a second -- none, in the event loop
    (thread_pool=off), or in a thread pool (the default) -- the three
    interleaved in shuffled rounds on the same server."""
    n = a.scrape_keys
    spec = ("load_module %s;\nthread_pool pcpu threads=1;" % a.module,
            ["pcpu_stats on;", "pcpu_stats_filter k $http_x_key max_keys=%d;" % (n + 10)],
            "location = /m_inline { pcpu_stats_display thread_pool=off; }\n"
            "        location = /m_pool { pcpu_stats_display thread_pool=pcpu; }")
    s = Server("pcpu-scrape", spec, 1, root)
    try:
        c = http.client.HTTPConnection("127.0.0.1", s.port)
        for i in range(n):
            c.request("GET", "/return", headers={"X-Key": "key-%06d" % i})
            c.getresponse().read()
        c.close()
        scrapes = {}

        def scraper(path, stop):
            c = http.client.HTTPConnection("127.0.0.1", s.port)
            while not stop.wait(1.0):
                t0 = time.monotonic()
                c.request("GET", path, headers={"Accept-Encoding": "gzip"})
                body = c.getresponse().read()
                scrapes.setdefault(path, []).append((time.monotonic() - t0) * 1e3)
                scrapes.setdefault(path + " bytes", []).append(len(body))
            c.close()

        import threading
        res = {}
        for r in range(a.rounds):
            order = ["none", "/m_inline", "/m_pool"]
            random.shuffle(order)
            for v in order:
                stop = threading.Event()
                t = None
                if v != "none":
                    t = threading.Thread(target=scraper, args=(v, stop))
                    t.start()
                try:
                    res.setdefault(v, []).append(wrk(s, "/return", a))
                finally:
                    stop.set()
                    if t:
                        t.join()
        base = statistics.median(x[1] for x in res["none"])
        base_rps = statistics.median(x[0] for x in res["none"])
        print("| scrape once a second (%d keys, 1 worker) | req/s (median) | x no scrape "
              "| p99 ms (median) | x no scrape | p99 per round | scrape ms (median) |" % n)
        print("|---|---|---|---|---|---|---|")
        for v, name in (("none", "none"), ("/m_inline", "in the event loop"),
                        ("/m_pool", "in a thread pool")):
            rps = statistics.median(x[0] for x in res[v])
            p99 = statistics.median(x[1] for x in res[v])
            print("| %s | %.0f | %.3f | %.3f | %.3f | %s | %s |" % (
                name, rps, rps / base_rps, p99, p99 / base, ", ".join("%.3f" % x[1] for x in res[v]),
                "%.1f (%d scrapes, %d bytes gzip)" % (statistics.median(scrapes[v]), len(scrapes[v]),
                                                      scrapes[v + " bytes"][-1]) if v in scrapes else "-"),
                  flush=True)
    finally:
        s.stop()


def allocated(path):
    return os.stat(path).st_blocks * 512


def memory(a, root):
    """Bytes per key: a filter admits --keys distinct keys."""
    n = a.keys
    rows = []
    for name, load, lines, read in (
            ("pcpu", "load_module %s;" % a.module,
             ["pcpu_stats on;", "pcpu_stats_filter k $http_x_key max_keys=%d;" % (n + 10)], "pcpu"),
            ("vts", "load_module %s;" % a.vts,
             ["vhost_traffic_status_zone shared:vts:64m;",
              "vhost_traffic_status_filter_by_set_key $http_x_key k;"], "vts")):
        s = Server(name + "-mem", (load, lines, "location = /st { %s }" % (
            "pcpu_stats_display;" if read == "pcpu" else "vhost_traffic_status_display; "
            "vhost_traffic_status_display_format json;")), 1, root)
        try:
            def state():
                c = http.client.HTTPConnection("127.0.0.1", s.port)
                c.request("GET", "/st?format=json", headers={"Accept": "application/json"})
                d = json.loads(c.getresponse().read())
                c.close()
                if read == "pcpu":
                    seg = [f for f in os.listdir("/dev/shm/pcpu-%d" % os.geteuid())
                           if f.endswith(".nginx-bench-%s-mem-%d" % (name, os.getpid()))][0]
                    return (allocated("/dev/shm/pcpu-%d/%s" % (os.geteuid(), seg)),
                            sum(len(f["metrics"]) for f in d["families"]))
                z = d["sharedZones"]
                return z["usedSize"], z["usedNode"]
            c = http.client.HTTPConnection("127.0.0.1", s.port)
            c.request("GET", "/return", headers={"X-Key": "warm"})
            c.getresponse().read()
            b0, s0 = state()
            for i in range(n):
                c.request("GET", "/return", headers={"X-Key": "key-%06d" % i})
                c.getresponse().read()
            c.close()
            b1, s1 = state()
            rows.append((name, n, b1 - b0, s1 - s0))
        finally:
            s.stop()
    print()
    print("| module | keys | bytes | per key | series or nodes | bytes per series/node |")
    print("|---|---|---|---|---|---|")
    for name, k, b, sr in rows:
        print("| %s | %d | %d | %.0f | %d | %.0f |" % (name, k, b, b / k, sr, b / max(sr, 1)))
    print("(pcpu: the tree file's allocated bytes, which grow with the CPUs' slots: %d here;"
          " vts: its shared zone's usedSize)" % os.cpu_count())


def main():
    global NGINX
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    p.add_argument("--vts", help="nginx-module-vts's .so, built against this nginx "
                   "(needed but for --scrape-only)")
    p.add_argument("--module", default=os.path.join(here, "..", "build", "integrations", "nginx",
                                                    "ngx_http_pcpu_module.so"))
    p.add_argument("--workers", default="1,2")
    p.add_argument("--duration", type=int, default=5)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--connections", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--keys", type=int, default=2000)
    p.add_argument("--memory-only", action="store_true")
    p.add_argument("--scrape-only", action="store_true",
                   help="only the scrape's effect on the scraping worker's requests")
    p.add_argument("--scrape-keys", type=int, default=20000)
    p.add_argument("--nginx", default=NGINX,
                   help="the nginx both modules are built against (default %(default)s)")
    a = p.parse_args()
    NGINX = a.nginx
    a.workers = [int(w) for w in a.workers.split(",")]
    if not a.vts and not a.scrape_only:
        sys.exit("--vts is needed (but for --scrape-only)")
    a.module = os.path.abspath(a.module)
    a.vts = os.path.abspath(a.vts) if a.vts else None
    for f in (a.module,) + ((a.vts,) if a.vts else ()):
        if not os.path.exists(f):
            sys.exit("no such module: " + f)
    if not shutil.which("wrk"):
        sys.exit("wrk not found (scripts/install-deps.sh)")
    root = tempfile.mkdtemp(prefix="pcpu-nginx-bench-root-")
    os.chmod(root, 0o755)  # workers of a root master run as nobody
    with open(os.path.join(root, "small.html"), "w") as f:
        f.write("<!DOCTYPE html><title>small</title><p>%s</p>\n" % ("x" * 500))
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    print("nginx_bench: %s, %d CPUs, load %s, wrk -t%d -c%d -d%ds, %d rounds" % (
        subprocess.run([NGINX, "-v"], capture_output=True, text=True).stderr.strip(), os.cpu_count(),
        " ".join(load), a.threads, a.connections, a.duration, a.rounds))
    if a.scrape_only:
        scrape(a, root)
    else:
        if not a.memory_only:
            speed(a, root)
        memory(a, root)
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    main()
