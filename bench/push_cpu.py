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
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from push_agent import Sink, options, proc_stats, start, stop  # noqa: E402  the same sink and application


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
        _, rss, hwm = proc_stats(agent.pid)
    finally:
        agent.terminate()
        agent.wait()
    tick = sorted(1000 * (b[0] - a[0]) for a, b in zip(reads, reads[1:]))
    sched = sorted(1000 * (b[1] - a[1]) for a, b in zip(reads, reads[1:]))
    print("  %-17s %10.1f %8.1f %8.1f %14.0f %12.2f %8.1f %8.1f"
          % (name, statistics.median(sched), sched[0], sched[-1], statistics.median(tick), Sink.got[-1][1] / 1e6,
             rss / 1024, hwm / 1024))


def main():
    build = sys.argv[1]
    opt = options(sys.argv[2:], {"--series": 100000, "--interval": 2.0, "--pushes": 9})
    app, srv, env = start(build, opt["--series"], "pcpu-push-cpu.")
    print("pcpustat push: %d series (push_many_total{id} + the fixture's), interval %g s, CPU per push over "
          "%d pushes (the first left out)" % (opt["--series"], opt["--interval"], opt["--pushes"] - 1))
    print("  %-17s %10s %8s %8s %14s %12s %8s %8s" % ("variant", "median ms", "min", "max", "utime+stime ms",
                                                     "request MB", "RSS MiB", "peak"))
    for name, proto, extra in VARIANTS:
        run(build, name, proto, extra, srv.server_address[1], opt["--interval"], opt["--pushes"], env)
    stop(app, srv)


if __name__ == "__main__":
    main()
