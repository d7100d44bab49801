#!/usr/bin/env python3
"""The push agent's CPU and memory at N series and a real interval.

  push_agent.py BUILD_DIR [--series 100000] [--interval 15] [--pushes 5]

Starts the test application (tests/push/push_fixture) with N counter
series (`many N`: push_many_total{id}, plus its own few), a receiver in
this process that reads each request whole and answers 204/200 (a sink:
its cost is not the agent's), and `pcpustat push` every INTERVAL seconds,
remote write and then OTLP. After PUSHES requests have arrived it reads the
agent's CPU time (utime + stime from /proc/PID/stat) and memory (VmRSS now,
between pushes; VmHWM, the peak) and prints them: CPU per push, the average
CPU share over the run (CPU time / elapsed), and the request size; then
the same for `pcpustat serve` scraped as often (gzip), for comparison.
"""
import http.server
import os
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
        Sink.got.append((time.monotonic(), n))
        code = 204 if self.path.endswith("/write") else 200
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()


def proc_stats(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    mem = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                mem[line.split(":")[0]] = int(line.split()[1])
    return cpu, mem["VmRSS"], mem["VmHWM"]


def run(build, proto, port, interval, pushes, env):
    Sink.got = []
    url = ("http://127.0.0.1:%d/api/v1/write" % port if proto == "remote-write"
           else "http://127.0.0.1:%d/v1/metrics" % port)
    agent = subprocess.Popen([os.path.join(build, "tools/pcpustat"), "push", "--" + proto, url,
                              "--interval", str(interval), "pushfix"], env=env)
    t0 = time.monotonic()
    while len(Sink.got) < pushes:
        time.sleep(0.1)
        if agent.poll() is not None:
            raise SystemExit("the agent exited")
    # Read between pushes: half an interval after the last one.
    time.sleep(interval / 2)
    elapsed = time.monotonic() - t0
    cpu, rss, hwm = proc_stats(agent.pid)
    n = len(Sink.got)
    agent.terminate()
    agent.wait()
    size = Sink.got[-1][1]
    print("  %-13s %d pushes in %.1f s: CPU %.3f s (%.1f ms per push, %.2f%% of one CPU); RSS between "
          "pushes %.1f MiB, peak %.1f MiB; request %.2f MB"
          % (proto, n, elapsed, cpu, 1000 * cpu / n, 100 * cpu / elapsed,
             rss / 1024, hwm / 1024, size / 1e6))


def run_serve(build, interval, pushes, env):
    """For comparison: `pcpustat serve` scraped every INTERVAL (gzip, as
    Prometheus asks), the same segment."""
    import urllib.request
    exp = subprocess.Popen([os.path.join(build, "tools/pcpustat"), "serve", "--listen", "127.0.0.1:0",
                            "pushfix"], stdout=subprocess.PIPE, env=env, text=True)
    addr = exp.stdout.readline().split("http://")[1].split("/")[0]
    t0 = time.monotonic()
    size = 0
    for i in range(pushes):
        req = urllib.request.Request("http://%s/metrics" % addr, headers={"Accept-Encoding": "gzip"})
        with urllib.request.urlopen(req, timeout=300) as r:
            size = len(r.read())
        if i + 1 < pushes:
            time.sleep(interval)
    time.sleep(interval / 2)
    elapsed = time.monotonic() - t0
    cpu, rss, hwm = proc_stats(exp.pid)
    exp.terminate()
    exp.wait()
    print("  %-13s %d scrapes in %.1f s: CPU %.3f s (%.1f ms per scrape, %.2f%% of one CPU); RSS between "
          "scrapes %.1f MiB, peak %.1f MiB; answer %.2f MB (gzip)"
          % ("serve", pushes, elapsed, cpu, 1000 * cpu / pushes, 100 * cpu / elapsed, rss / 1024, hwm / 1024,
             size / 1e6))


def options(argv, defaults):
    """The command line's --series, --interval and --pushes over defaults."""
    opt = dict(defaults)
    for k, v in zip(argv[::2], argv[1::2]):
        opt[k] = float(v) if k == "--interval" else int(v)
    return opt


def start(build, series, prefix):
    """A sink (Sink) on a free port, and the test application publishing
    `series` counter series in a segment directory of its own: (the
    application, the sink's server, the environment naming that directory)."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    env = dict(os.environ, PCPU_SEGMENT_DIR=tmp)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    app = subprocess.Popen([os.path.join(build, "tests/push/push_fixture")], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, env=env, text=True)
    app.stdout.readline()
    app.stdin.write("many %d\n" % series)
    app.stdin.flush()
    app.stdout.readline()
    return app, srv, env


def stop(app, srv):
    app.stdin.close()
    app.wait()
    srv.shutdown()


def main():
    build = sys.argv[1]
    opt = options(sys.argv[2:], {"--series": 100000, "--interval": 15, "--pushes": 5})
    app, srv, env = start(build, opt["--series"], "pcpu-push-agent.")
    print("pcpustat push: %d series (push_many_total{id} + the fixture's), interval %g s, %d pushes each"
          % (opt["--series"], opt["--interval"], opt["--pushes"]))
    for proto in ("remote-write", "otlp"):
        run(build, proto, srv.server_address[1], opt["--interval"], opt["--pushes"], env)
    run_serve(build, opt["--interval"], opt["--pushes"], env)
    stop(app, srv)


if __name__ == "__main__":
    main()
