#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Pre-fork servers against the anchor, in one run (issue 26).

For each worker count W (default 4, 16, 64) the same workload runs twice:

  prometheus_client, multiprocess mode, set up as its documentation says:
    PROMETHEUS_MULTIPROC_DIR set before prometheus_client is imported, the
    metrics defined in the master, W workers os.fork()ed from it; each
    worker increments a counter on 8 labelled series (random path), once
    with the child objects kept (`c = REQ.labels(p)` once, `c.inc()`), once
    looking them up at every increment (`REQ.labels(p).inc()`), and
    observes a histogram (default buckets) with random latencies; a
    livesum gauge counts the workers up. After the workers exit the
    master scrapes through a MultiProcessCollector: generate_latest()
    in-process, and HTTP /metrics from prometheus_client's own
    start_http_server() with curl; then mark_process_dead() for each
    worker; the files in the directory are counted before and after.

  pcpu, a shared registry (PCPU_SEGMENT_SHARED_TREE): pcpu_bench_prefork
    --anchor W publishes it (PCPU_INDEX=cpu), forks W workers that do the
    same in C (pcpu_counter_inc on kept handles; pcpu_family_counter +
    inc at every increment; pcpu_histogram_record, Prometheus' default
    buckets) and stays up with its segment published. This script scrapes
    it: the Python reader (python/: pcpu.open_segment().snapshot()), the
    Python collector (pcpu.prometheus.PcpuCollector, generate_latest()),
    and `pcpustat serve` over HTTP with curl; then it closes the master's
    input, the master unpublishes, and the files are counted again.

Costs per increment are CPU time in the worker (time.thread_time_ns() /
CLOCK_THREAD_CPUTIME_ID over the loop, divided by its iterations; the
Python figures include the `for` loop's own overhead, printed beside them).
Scrape times are medians of --scrapes scrapes (wall time; the scraper's CPU
time beside). Every scrape's totals are checked against what the workers did.

Run from the repository root after building (cmake --build build):
    python3 bench/prefork_anchor.py [--build build] [--workers 4,16,64]
        [--py-ops 20000] [--c-ops 1000000] [--scrapes 15]
"""
import argparse
import json
import math
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
NPATHS = 8


def paths():
    rnd = random.Random(26)
    return [f"/api/v{i % 3}/{rnd.getrandbits(32):08x}" for i in range(NPATHS)]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def blocks_bytes(d):
    return sum(os.stat(os.path.join(d, f)).st_blocks * 512 for f in os.listdir(d))


def curl_times(url, n, check=None):
    """Median wall time of n GETs of url with curl (its time_total), ms."""
    times = []
    for k in range(n + 1):
        out = subprocess.run(["curl", "-sS", "--fail", "-o", "/dev/stdout", "-w",
                              "\n%{time_total}", url],
                             check=True, capture_output=True, text=True).stdout
        body, t = out.rsplit("\n", 1)
        if k == 0:
            if check:
                check(body)
            continue  # the first one warms both ends
        times.append(float(t) * 1e3)
    return statistics.median(times)


def wait_http(url, proc, what):
    for _ in range(200):
        if proc is not None and proc.poll() is not None:
            sys.exit(f"{what} exited: {proc.returncode}")
        if subprocess.run(["curl", "-s", "-o", "/dev/null", url]).returncode == 0:
            return
        time.sleep(0.05)
    sys.exit(f"{what} did not answer on {url}")


def timed(fn, n):
    """Median wall ms and median CPU ms (this process) of n calls of fn."""
    fn()  # warm
    wall, cpu = [], []
    for _ in range(n):
        c0, w0 = time.process_time_ns(), time.perf_counter_ns()
        fn()
        wall.append((time.perf_counter_ns() - w0) / 1e6)
        cpu.append((time.process_time_ns() - c0) / 1e6)
    return statistics.median(wall), statistics.median(cpu)


# ---- prometheus_client, multiprocess mode (a child process per W) ----------------

def inputs(i, n):
    rnd = random.Random(1000 + i)
    idx = [rnd.randrange(NPATHS) for _ in range(n)]
    lat = [1e-3 * math.exp(rnd.random() * math.log(20000.0)) for _ in range(n)]
    return idx, lat


def prom_child(w, n, scrapes):
    """Runs in a process with PROMETHEUS_MULTIPROC_DIR set; prints JSON."""
    from prometheus_client import (CollectorRegistry, Counter, Gauge, Histogram,
                                   generate_latest, multiprocess, start_http_server)
    from prometheus_client.parser import text_string_to_metric_families

    mpdir = os.environ["PROMETHEUS_MULTIPROC_DIR"]
    req = Counter("http_requests", "Requests served.", ["path"])
    lat_h = Histogram("http_request_duration_seconds", "Request latency.", ["path"])
    up = Gauge("workers_up", "Workers running.", multiprocess_mode="livesum")
    ps = paths()
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    res_r, res_w = os.pipe()
    pids = []
    for i in range(w):
        pid = os.fork()
        if pid == 0:
            try:
                os.close(go_w)
                idx, lat = inputs(i, n)
                kids = [req.labels(p) for p in ps]
                hkids = [lat_h.labels(p) for p in ps]
                up.inc()
                for k in range(NPATHS):  # warm: every file and series made
                    kids[k].inc()
                    hkids[k].observe(0.001)
                os.write(ready_w, b"r")
                os.read(go_r, 1)
                t0 = time.thread_time_ns()
                for j in idx:
                    kids[j].inc()
                t1 = time.thread_time_ns()
                for j in idx:
                    req.labels(ps[j]).inc()
                t2 = time.thread_time_ns()
                for j, v in zip(idx, lat):
                    hkids[j].observe(v)
                t3 = time.thread_time_ns()
                for j in idx:  # the loop alone: what each figure includes
                    kids[j]
                t4 = time.thread_time_ns()
                os.write(res_w, (json.dumps([t1 - t0, t2 - t1, t3 - t2, t4 - t3]) + "\n").encode())
                os._exit(0)
            except BaseException as e:  # a worker must never return into the master
                sys.stderr.write(f"worker {i}: {e!r}\n")
                os._exit(1)
        pids.append(pid)
    os.close(go_r)
    got = 0
    while got < w:
        got += len(os.read(ready_r, w - got))
    os.close(go_w)  # every worker starts now
    for pid in pids:
        _, st = os.waitpid(pid, 0)
        if st != 0:
            sys.exit(f"prometheus_client worker {pid} failed: {st}")
    os.close(res_w)
    raw = b""
    while True:
        b = os.read(res_r, 65536)
        if not b:
            break
        raw += b
    res = [json.loads(line) for line in raw.decode().splitlines()]
    assert len(res) == w
    tot = [sum(r[k] for r in res) for k in range(4)]

    files_left = len(os.listdir(mpdir))
    bytes_left = blocks_bytes(mpdir)
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)

    def check(text):
        reqs = cnt = 0
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                if s.name == "http_requests_total":
                    reqs += s.value
                if s.name == "http_request_duration_seconds_count":
                    cnt += s.value
        want_r, want_c = w * (2 * n + NPATHS), w * (n + NPATHS)
        if reqs != want_r or cnt != want_c:
            sys.exit(f"prometheus_client scrape: {reqs} requests, {cnt} observations; "
                     f"want {want_r}, {want_c}")

    check(generate_latest(registry).decode())
    scrape_ms, scrape_cpu_ms = timed(lambda: generate_latest(registry), scrapes)
    port = free_port()
    start_http_server(port, addr="127.0.0.1", registry=registry)
    url = f"http://127.0.0.1:{port}/metrics"
    wait_http(url, None, "start_http_server")
    http_ms = curl_times(url, scrapes, check)
    for pid in pids:
        multiprocess.mark_process_dead(pid)
    files_dead = len(os.listdir(mpdir))
    print(json.dumps({
        "inc_ns": tot[0] / (w * n), "labels_inc_ns": tot[1] / (w * n),
        "observe_ns": tot[2] / (w * n), "loop_ns": tot[3] / (w * n),
        "scrape_ms": scrape_ms, "scrape_cpu_ms": scrape_cpu_ms, "http_ms": http_ms,
        "files": files_left, "files_after": files_dead, "bytes": bytes_left,
    }))
    sys.stdout.flush()
    os._exit(0)  # the HTTP server's thread


def run_prom(w, n, scrapes):
    d = tempfile.mkdtemp(prefix="prom-mp-", dir="/dev/shm")
    try:
        env = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=d)
        out = subprocess.run([sys.executable, __file__, "--prom-child", str(w), str(n),
                              str(scrapes)], env=env, check=True, capture_output=True,
                             text=True)
        return json.loads(out.stdout.strip().splitlines()[-1])
    except subprocess.CalledProcessError as e:
        sys.exit(f"prometheus_client run failed:\n{e.stderr}")
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---- pcpu, a shared registry ----------------------------------------------------

def pcpu_totals_from_snapshot(snap):
    reqs = sum(s.value for s in snap.family("http_requests").series)
    cnt = sum(s.value.count for s in snap.family("http_request_duration_seconds").series)
    return reqs, cnt


def run_pcpu(w, n, scrapes, build):
    import pcpu
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families
    from pcpu.prometheus import PcpuCollector

    d = tempfile.mkdtemp(prefix="pcpu-anchor-", dir="/dev/shm")
    env = dict(os.environ, PCPU_INDEX="cpu")
    master = subprocess.Popen([os.path.join(build, "bench", "pcpu_bench_prefork"), "--anchor",
                               str(w), "--ops", str(n), "--dir", d, "--name", "prefork"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    serve = None
    try:
        line = master.stdout.readline()
        if not line.startswith("anchor "):
            sys.exit(f"pcpu_bench_prefork --anchor: {line!r} (exit {master.wait()})")
        fig = dict(kv.split("=", 1) for kv in line.split()[1:])
        if fig["ok"] != "1":
            sys.exit(f"pcpu master read wrong totals: {line}")
        want_r, want_c = 2 * n * w, n * w
        files_alive = len(os.listdir(d))
        bytes_alive = blocks_bytes(d)

        def snap():
            with pcpu.open_segment("prefork", dir=d) as seg:
                return seg.snapshot()
        if pcpu_totals_from_snapshot(snap()) != (want_r, want_c):
            sys.exit(f"pcpu reader: totals {pcpu_totals_from_snapshot(snap())}, "
                     f"want {(want_r, want_c)}")
        reader_ms, reader_cpu_ms = timed(snap, scrapes)

        def check(text):
            reqs = cnt = 0
            for fam in text_string_to_metric_families(text):
                for s in fam.samples:
                    if s.name == "http_requests_total":
                        reqs += s.value
                    if s.name == "http_request_duration_seconds_count":
                        cnt += s.value
            if (reqs, cnt) != (want_r, want_c):
                sys.exit(f"pcpu exposition: {reqs} requests, {cnt} observations; "
                         f"want {want_r}, {want_c}")

        registry = CollectorRegistry()
        registry.register(PcpuCollector(["prefork"], dir=d))
        check(generate_latest(registry).decode())
        coll_ms, coll_cpu_ms = timed(lambda: generate_latest(registry), scrapes)

        port = free_port()
        serve = subprocess.Popen([os.path.join(build, "tools", "pcpustat"), "serve", "-l",
                                  f"127.0.0.1:{port}", "prefork"],
                                 env=dict(os.environ, PCPU_SEGMENT_DIR=d),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        url = f"http://127.0.0.1:{port}/metrics"
        wait_http(url, serve, "pcpustat serve")
        serve_ms = curl_times(url, scrapes, check)
        serve.terminate()
        serve.wait()
        serve = None
        master.stdin.close()  # the master unpublishes and exits
        if master.wait() != 0:
            sys.exit(f"pcpu master exited {master.returncode}")
        files_after = len(os.listdir(d))
        return {"inc_ns": float(fig["inc_ns"]), "labels_inc_ns": float(fig["lookup_inc_ns"]),
                "observe_ns": float(fig["observe_ns"]), "reader_ms": reader_ms,
                "reader_cpu_ms": reader_cpu_ms, "scrape_ms": coll_ms,
                "scrape_cpu_ms": coll_cpu_ms, "http_ms": serve_ms, "files": files_alive,
                "files_after": files_after, "bytes": bytes_alive}
    finally:
        if serve is not None:
            serve.kill()
        if master.poll() is None:
            master.kill()
        shutil.rmtree(d, ignore_errors=True)


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--workers", default="4,16,64")
    ap.add_argument("--py-ops", type=int, default=20000, help="per Python worker, each loop")
    ap.add_argument("--c-ops", type=int, default=1000000, help="per C worker, each loop")
    ap.add_argument("--scrapes", type=int, default=15)
    ap.add_argument("--prom-child", nargs=3, type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.prom_child:
        prom_child(*a.prom_child)
        return
    build = os.path.abspath(a.build)
    os.environ.setdefault("PCPU_LIBRARY", os.path.join(build, "libpcpu-stats.so.1"))
    sys.path.insert(0, os.path.join(ROOT, "python", "src"))
    from importlib.metadata import version
    ws = [int(x) for x in a.workers.split(",")]
    print(f"# Pre-fork servers: prometheus_client {version('prometheus_client')} "
          f"multiprocess mode against a pcpu shared registry")
    print(f"{os.cpu_count()} CPUs; load average at start {load()}; Python "
          f"{sys.version.split()[0]}; {a.py_ops} Python / {a.c_ops} C operations per worker "
          f"and loop; {NPATHS} labelled series; scrapes: median of {a.scrapes}\n")
    rows = []
    for w in ws:
        p = run_prom(w, a.py_ops, a.scrapes)
        c = run_pcpu(w, a.c_ops, a.scrapes, build)
        rows.append((w, p, c))
    hdr = ["W", "system", "CPU ns/inc (child kept)", "CPU ns/inc (labels() each time)",
           "CPU ns/observe", "scrape: generate_latest, ms (CPU)", "scrape: reader snapshot, ms (CPU)",
           "scrape: HTTP /metrics, ms", "files after workers exit",
           "files after mark_process_dead / unpublish", "bytes allocated"]
    table = []
    for w, p, c in rows:
        table.append([str(w), "prometheus_client multiprocess",
                      f"{p['inc_ns']:.0f} (loop {p['loop_ns']:.0f})", f"{p['labels_inc_ns']:.0f}",
                      f"{p['observe_ns']:.0f}",
                      f"{p['scrape_ms']:.2f} ({p['scrape_cpu_ms']:.2f}) MultiProcessCollector", "-",
                      f"{p['http_ms']:.2f} start_http_server", str(p["files"]),
                      str(p["files_after"]), f"{p['bytes']:,}"])
        table.append([str(w), "pcpu shared registry (C workers)", f"{c['inc_ns']:.2f}",
                      f"{c['labels_inc_ns']:.1f}", f"{c['observe_ns']:.2f}",
                      f"{c['scrape_ms']:.2f} ({c['scrape_cpu_ms']:.2f}) PcpuCollector",
                      f"{c['reader_ms']:.2f} ({c['reader_cpu_ms']:.2f})",
                      f"{c['http_ms']:.2f} pcpustat serve", str(c["files"]),
                      str(c["files_after"]), f"{c['bytes']:,}"])
    widths = [max(len(r[i]) for r in [hdr] + table) for i in range(len(hdr))]
    fmt = lambda r: "| " + " | ".join(x.ljust(widths[i]) for i, x in enumerate(r)) + " |"
    print(fmt(hdr))
    print("|" + "|".join("-" * (wd + 2) for wd in widths) + "|")
    for r in table:
        print(fmt(r))
    print(f"\nload average at end {load()}")


if __name__ == "__main__":
    main()
