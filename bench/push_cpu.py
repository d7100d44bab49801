#!/usr/bin/env python3
"""The push agent's CPU per push at N series, per protocol and option:
remote write (snappy, the only compression it has), OTLP with and without
gzip, cumulative and delta.

  push_cpu.py BUILD_DIR [--series 100000] [--interval 2] [--pushes 9]

Starts the test application (tests/push/push_fixture) with N counter
series (`many N`: push_many_total{id}, plus the fixture's own dozen), a
sink in this process that reads each request whole and answers 204/200 (its
cost is not the agent's), and `pcpustat push` every INTERVAL seconds for
each variant in turn. Half an interval after each request arrives it reads
the agent's CPU time: utime + stime from /proc/PID/stat (clock ticks) and
the on-CPU nanoseconds of /proc/PID/schedstat (the same user + system time
at nanosecond resolution; the agent is one thread). A push's CPU is the
difference between two such reads: collection (reading the segment),
encoding, compression and the POST. After the last push it reads the
agent's memory too: VmRSS between pushes, VmHWM (the peak). The first push is left out (start-up,
and delta's first collection, which sends no counter). Printed: the median
per push over the others, with min and max, and the request's size.
The values do not change between pushes (the cost of a delta does not
depend on them).
"""
import http.server
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time


class Sink(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    got = []

    def log_message(self, *a):
        pass

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(n)
        Sink.got.append(n)
        code = 204 if self.path.endswith("/write") else 200
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()


def mem_of(pid):
    """VmRSS and VmHWM (the peak), MiB."""
    mem = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                mem[line.split(":")[0]] = int(line.split()[1]) / 1024
    return mem["VmRSS"], mem["VmHWM"]


def cpu_of(pid):
    """(utime + stime in seconds, on-CPU seconds from schedstat)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    with open("/proc/%d/schedstat" % pid) as f:
        ns = int(f.read().split()[0])
    return ticks, ns / 1e9


VARIANTS = (
    ("remote write", "remote-write", []),
    ("OTLP", "otlp", []),
    ("OTLP gzip", "otlp", ["--compression", "gzip"]),
    ("OTLP delta", "otlp", ["--temporality", "delta"]),
    ("OTLP delta gzip", "otlp", ["--temporality", "delta", "--compression", "gzip"]),
)


def run(build, name, proto, extra, port, interval, pushes, env):
    Sink.got = []
    url = ("http://127.0.0.1:%d/api/v1/write" % port if proto == "remote-write"
           else "http://127.0.0.1:%d/v1/metrics" % port)
    agent = subprocess.Popen([os.path.join(build, "tools/pcpustat"), "push", "--" + proto, url,
                              "--interval", str(interval)] + extra + ["pushfix"], env=env,
                             stderr=subprocess.DEVNULL)
    reads = []
    try:
        for k in range(1, pushes + 1):
            while len(Sink.got) < k:
                time.sleep(0.02)
                if agent.poll() is not None:
                    raise SystemExit("the agent exited")
            time.sleep(interval / 2)
            reads.append(cpu_of(agent.pid))
        rss, hwm = mem_of(agent.pid)
    finally:
        agent.terminate()
        agent.wait()
    tick = sorted(1000 * (b[0] - a[0]) for a, b in zip(reads, reads[1:]))
    sched = sorted(1000 * (b[1] - a[1]) for a, b in zip(reads, reads[1:]))
    print("  %-17s %10.1f %8.1f %8.1f %14.0f %12.2f %8.1f %8.1f"
          % (name, statistics.median(sched), sched[0], sched[-1], statistics.median(tick), Sink.got[-1] / 1e6,
             rss, hwm))


def main():
    build = sys.argv[1]
    args = sys.argv[2:]
    opt = {"--series": 100000, "--interval": 2.0, "--pushes": 9}
    for k, v in zip(args[::2], args[1::2]):
        opt[k] = float(v) if k == "--interval" else int(v)
    tmp = tempfile.mkdtemp(prefix="pcpu-push-cpu.")
    env = dict(os.environ, PCPU_SEGMENT_DIR=tmp)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    app = subprocess.Popen([os.path.join(build, "tests/push/push_fixture")], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, env=env, text=True)
    app.stdout.readline()
    app.stdin.write("many %d\n" % opt["--series"])
    app.stdin.flush()
    app.stdout.readline()
    print("pcpustat push: %d series (push_many_total{id} + the fixture's), interval %g s, CPU per push over "
          "%d pushes (the first left out)" % (opt["--series"], opt["--interval"], opt["--pushes"] - 1))
    print("  %-17s %10s %8s %8s %14s %12s %8s %8s" % ("variant", "median ms", "min", "max", "utime+stime ms",
                                                     "request MB", "RSS MiB", "peak"))
    for name, proto, extra in VARIANTS:
        run(build, name, proto, extra, srv.server_address[1], opt["--interval"], opt["--pushes"], env)
    app.stdin.close()
    app.wait()
    srv.shutdown()


if __name__ == "__main__":
    main()
