#!/usr/bin/env python3
"""The exporters against their limits, hostile neighbours and unfair clients.

Every program that serves statistics over HTTP in this project uses one
exporter core (libpcpu-exporter): `pcpustat serve`, the prometheus-cpp
layer's Exposer and a program serving its own registry
(examples/exporter.c). The HTTP modes (idle, fairness, nofile, body,
gzip, wrongpass, auth, plaintext) run against each of them:

  exporter_hostile_test.py MODE PCPUSTAT FIXTURE [SERVER PROGRAM]

SERVER is pcpustat (the default), exposer (PROGRAM: exposer_hostile_server,
a prometheus::Exposer) or example (PROGRAM: pcpu_example_exporter); auth
and plaintext need the web configuration's bcrypt users and TLS, which the
Exposer does not take (its RegisterAuth() check is what wrongpass
attacks). The segment modes (bounds, segments, neighbours, junk) are
pcpustat's.

  exporter_hostile_test.py bounds PCPUSTAT FIXTURE
      --max-bytes: a scrape over it fails alone (503); a small one right
      after succeeds; the daemon keeps serving.
  exporter_hostile_test.py segments PCPUSTAT FIXTURE
      one bad segment never fails the scrape: corrupted, truncated,
      duplicate, clashing and too large segments are each reported as
      pcpu_segment_up{...,reason="WHY"} 0 beside the good ones' values and
      up 1; every exposition passes `promtool check metrics`.
  exporter_hostile_test.py neighbours PCPUSTAT FIXTURE
      a planted pcpu.0<PID>.<NAME> (leading zero) and a duplicate target
      never fail the scrape; 20,000 junk files named like segments (another
      user's): --max-down (16) reported, the rest counted in one series,
      at most those 16 opened per scrape, a scrape's cost (the exporter's
      CPU time) does not grow from scrape to scrape, and the memory goes
      when the files go.
  exporter_hostile_test.py junk PCPUSTAT FIXTURE
      the same with 300 empty junk files (the fast tier), beside another
      owner's corrupt segment, and with --max-down 0.
  exporter_hostile_test.py nofile PCPUSTAT FIXTURE
      RLIMIT_NOFILE 20 and 30 idle clients: no busy loop (CPU time
      measured), and scrapes are answered (idle clients are shed near the
      connection limit after 1 s, not after --timeout, set to 300 s).
  exporter_hostile_test.py idle PCPUSTAT FIXTURE [SERVER PROGRAM]
      1,100 idle connections, past the connection limit (1024), held: 3
      scrapes, each answered 200 within 20 s (idle clients are shed near
      the limit after 1 s; the inactivity timeout is 300 s, 30 s for the
      Exposer).
  exporter_hostile_test.py slowloris PCPUSTAT FIXTURE [SERVER PROGRAM]
      1,100 slowloris clients (past the limit), each sending a header line
      every 3 s: 3 scrapes, each answered 200 within 20 s.
  exporter_hostile_test.py fairness PCPUSTAT FIXTURE [SERVER PROGRAM]
      500 idle connections and 50 slowloris clients, then 100 scrapes, each
      answered while they stay (timeout 300 s, 30 s for the Exposer: a
      scrape that waited for them would take that long; each must take
      under 20 s).
  exporter_hostile_test.py body PCPUSTAT FIXTURE [SERVER PROGRAM]
      20 GETs announcing a 100 MB body (and 5 a chunked one) that never
      comes: each answered 400 and closed at once (within 20 s, not at the
      timeout), a scrape beside them 200.
  exporter_hostile_test.py gzip PCPUSTAT FIXTURE [SERVER PROGRAM]
      gzip only where Accept-Encoding takes it: refused by q=0 even beside
      "*" ("gzip;q=0, *"), taken by "gzip", "x-gzip" and "*".
  exporter_hostile_test.py wrongpass PCPUSTAT FIXTURE [SERVER PROGRAM]
      basic authentication while 8 clients send wrong passwords (a new one
      each request) as fast as they are answered: 20 scrapes with the right
      password, each 200 with the value; the wrong ones never 200, each
      answered after the refusal's delay (half a second: at most 2 answers
      a second per client).
  exporter_hostile_test.py auth PCPUSTAT FIXTURE
      HTTPS and basic auth while clients send passwords that must be
      bcrypt-checked: one user's hash has cost 31 (one check runs for
      days), so the checker stays saturated for the whole test. Clients
      past their share get 429 and past the queue 503, at once; the right
      password (verified once before) is served 200 every time meanwhile,
      and a wrong one seen before is refused (401) without a check; SIGTERM
      still stops the exporter.
  exporter_hostile_test.py plaintext PCPUSTAT FIXTURE
      plain HTTP sent to the HTTPS port: answered 400 "Client sent an HTTP
      request to an HTTPS server." (as Go's net/http), connection closed,
      nothing on stderr; HTTPS served as usual meanwhile.

Loopback only; every wait is bounded; everything started is stopped.
"""
import base64
import gzip as gzip_module
import http.client
import json
import os
import queue
import resource
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import exporter_test as et  # noqa: E402  (Env, get, get_tls, check)

check = et.check


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed_get(host, port, path="/metrics", timeout=et.TIMEOUT):
    t0 = time.monotonic()
    try:
        st, _, body = et.get(host, port, path, timeout=timeout)
    except OSError as e:
        return None, str(e), time.monotonic() - t0
    return st, body, time.monotonic() - t0


def bounds(e):
    for i in range(10):
        e.fixture_start("golden", "g%d" % i)
    cnt, _ = e.fixture_start("count", "777", "counter")
    # Each segment fits in 128K by itself (else it would be left out
    # alone, reason too_large: `segments`); together they do not.
    srv, host, port = e.serve("--max-bytes", "128K")
    st, body, _ = timed_get(host, port)
    check(st == 503 and "--max-bytes" in body, "11 segments over --max-bytes 128K -> 503 (%r)" % st)
    st, body, _ = timed_get(host, port, "/metrics/counter")
    check(st == 200 and "test_events_total 777" in body, "then a small scrape (one segment): 200")
    st, _, _ = timed_get(host, port)
    check(st == 503 and srv.poll() is None, "the daemon keeps serving (503 again, still running)")
    srv2, h2, p2 = e.serve("--max-bytes", "4M")
    st, body, _ = timed_get(h2, p2)
    check(st == 200 and 'test_events_total{pcpu_segment="counter",pcpu_pid="%d"} 777' % cnt.pid in body,
          "the same scrape within --max-bytes 4M: 200")


def promtool_ok(body, what):
    """`promtool check metrics` (Debian package prometheus) accepts body."""
    try:
        p = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True,
                           text=True, timeout=120)
        ok, out = p.returncode == 0, p.stdout + p.stderr
    except FileNotFoundError:
        ok, out = False, "promtool not found: run scripts/install-deps.sh"
    check(ok, "%s: promtool check metrics %s" % (what, "ok" if ok else out.strip()))


def up_line(name, pid, reason, value):
    return 'pcpu_segment_up{pcpu_segment="%s",pcpu_pid="%s",reason="%s"} %d' % (name, pid, reason, value)


def samples_of(body, name):
    return [l for l in body.splitlines()
            if not l.startswith(("#", "pcpu_segment_up{")) and 'pcpu_segment="%s"' % name in l]


def segments(e):
    good, gpath = e.fixture_start("golden", "good")
    cnt, _ = e.fixture_start("count", "4321", "counter")
    value = 'test_events_total{pcpu_segment="counter",pcpu_pid="%d"} 4321' % cnt.pid
    ngood = None

    # Corrupted (its magic overwritten) and truncated copies of a segment.
    with open(gpath, "rb") as f:
        data = bytearray(f.read(4096))
    data[0:8] = b"NOTMAGIC"
    bad = os.path.join(e.dir, "pcpu.%d.bad" % good.pid)
    trunc = os.path.join(e.dir, "pcpu.%d.trunc" % good.pid)
    with open(bad, "wb") as f:
        f.write(data)
    with open(gpath, "rb") as f, open(trunc, "wb") as g:
        g.write(f.read(300))
    for p in (bad, trunc):
        os.chmod(p, 0o600)
    srv, host, port = e.serve()
    st, body, _ = timed_get(host, port)
    ngood = len(samples_of(body, "good"))
    check(st == 200 and value in body and ngood > 0 and up_line("good", good.pid, "", 1) in body and
          up_line("counter", cnt.pid, "", 1) in body,
          "corrupted and truncated neighbours: 200, the good segments' values and up 1 (%r)" % st)
    check(up_line("bad", good.pid, "corrupt", 0) in body and up_line("trunc", good.pid, "corrupt", 0) in body
          and not samples_of(body, "bad") and not samples_of(body, "trunc"),
          "corrupted and truncated: pcpu_segment_up 0, reason corrupt, nothing of theirs")
    promtool_ok(body, "corrupted and truncated")
    # The same through prometheus_client's strict OpenMetrics parser: the
    # empty reason is a label value like any other.
    from prometheus_client.openmetrics.parser import text_string_to_metric_families
    st, _, om = et.get(host, port, headers={"Accept": "application/openmetrics-text;version=1.0.0"})
    ups = {(s.labels["pcpu_segment"], s.labels["reason"]): s.value
           for f in text_string_to_metric_families(om) if f.name == "pcpu_segment_up" for s in f.samples}
    check(st == 200 and ups == {("good", ""): 1, ("counter", ""): 1, ("bad", "corrupt"): 0, ("trunc", "corrupt"): 0},
          "OpenMetrics, strict parser: pcpu_segment_up by segment and reason %r" % ups)
    os.unlink(bad)
    os.unlink(trunc)

    # One segment named three times (pid, name, file name): served once;
    # the others (by key: "counter" and "pcpu..." after the pid's digits)
    # are duplicates, reported by one series.
    srv2, h2, p2 = e.serve(str(cnt.pid), "counter", "pcpu.%d.counter" % cnt.pid, "good")
    st, body, _ = timed_get(h2, p2)
    check(st == 200 and body.count(value) == 1 and up_line("counter", cnt.pid, "", 1) in body and
          up_line("good", good.pid, "", 1) in body and len(samples_of(body, "good")) == ngood,
          "duplicates: 200, the values once, up 1 for the one served (%r)" % st)
    check(body.count(up_line("counter", cnt.pid, "duplicate", 0)) == 1,
          "two duplicates: one pcpu_segment_up 0, reason duplicate")
    promtool_ok(body, "duplicate")
    stop_all(e, [srv, srv2])

    # Families that clash (test_events_total with two help texts): by
    # name, "clashing" is merged first and wins.
    cl, _ = e.fixture_start("clash", "clashing")
    srv, host, port = e.serve("counter", "clashing", "good")
    for _ in range(3):
        st, body, _ = timed_get(host, port)
        check(st == 200 and 'test_events_total{pcpu_segment="clashing",pcpu_pid="%d"} 5' % cl.pid in body and
              up_line("clashing", cl.pid, "", 1) in body and up_line("counter", cnt.pid, "conflict", 0) in body
              and not samples_of(body, "counter") and len(samples_of(body, "good")) == ngood,
              "a clash: the first by name served, the other up 0, reason conflict (%r)" % st)
    promtool_ok(body, "conflict")
    stop_all(e, [srv, cl])

    # A segment larger than --max-bytes by itself is left out alone,
    # before or after the others in the order of reading; the scrape
    # goes on within the budget.
    big1, _ = e.fixture_start("golden", "abig")
    big2, _ = e.fixture_start("golden", "zbig")
    # 72K: the counter fixture alone needs 40K where adds take rseq and
    # 56K in the fallback builds (TSan: its mirror pages are data too); a
    # golden fixture needs 96K in both (measured by serving each alone).
    srv, host, port = e.serve("--max-bytes", "72K", "abig", "counter", "zbig")
    st, body, _ = timed_get(host, port)
    check(st == 200 and value in body and up_line("counter", cnt.pid, "", 1) in body and
          up_line("abig", big1.pid, "too_large", 0) in body and up_line("zbig", big2.pid, "too_large", 0) in body
          and not samples_of(body, "abig") and not samples_of(body, "zbig"),
          "segments over --max-bytes by themselves: up 0, reason too_large; the rest served (%r)" % st)
    promtool_ok(body, "too large")


def stop_all(e, procs):
    """Stops these of e's processes (exporters, fixtures) now."""
    from prometheus_test import stop
    stop(procs)
    e.procs = [p for p in e.procs if p not in procs]


def rss_kb(pid):
    return et.rss_kb(pid)


def neighbours(e):
    cnt, path = e.fixture_start("count", "4321", "counter")
    want = 'test_events_total{pcpu_segment="counter",pcpu_pid="%d"} 4321' % cnt.pid
    up = up_line("counter", cnt.pid, "", 1)

    # A planted copy whose name parses as the victim's with a leading zero.
    planted = os.path.join(e.dir, "pcpu.0%d.counter" % cnt.pid)
    with open(path, "rb") as f, open(planted, "wb") as g:
        g.write(f.read())
    os.chmod(planted, 0o600)
    # Not a segment name at all (canonical pids only): not listed.
    out = subprocess.run([e.pcpustat, "--json"], capture_output=True, text=True, env=e.env).stdout
    segs = json.loads(out)["segments"]
    check([(s["name"], s["pid"]) for s in segs] == [("counter", cnt.pid)],
          "pcpustat lists the victim's segment once, not the planted pcpu.0<PID>.counter (%r)" % segs)
    srv, host, port = e.serve()
    st, body, _ = timed_get(host, port)
    check(st == 200 and body.count(want) == 1 and body.count(up) == 1,
          "planted pcpu.0<PID>.counter: 200, the victim's series once (%r)" % st)
    os.unlink(planted)
    # The same segment named twice (name and pid): served once.
    srv2, h2, p2 = e.serve("counter", str(cnt.pid))
    st, body, _ = timed_get(h2, p2)
    check(st == 200 and body.count(want) == 1 and body.count(up) == 1 and
          up_line("counter", cnt.pid, "duplicate", 0) in body,
          "one segment named twice on the command line: 200, served once, the other a duplicate (%r)" % st)

    # 20,000 junk files named like segments of processes that do not
    # exist, another user's where the test may give them one.
    st, _, _ = timed_get(host, port)
    rss0 = rss_kb(srv.pid)
    junk = plant_junk(e.dir, 20000, b"junk")
    # A fresh writer after the slow planting (a fixture lives 60 s at most).
    late, _ = e.fixture_start("count", "5678", "late")
    want = 'test_events_total{pcpu_segment="late",pcpu_pid="%d"} 5678' % late.pid
    up = up_line("late", late.pid, "", 1)
    times, cpu = [], []
    for _ in range(3):
        c0 = cpu_seconds(srv.pid)
        opened, (st, body, dt) = opens_during(e.dir, lambda: timed_get(host, port, timeout=600))
        times.append(dt)
        cpu.append(cpu_seconds(srv.pid) - c0)
    check(st == 200 and want in body, "20,000 junk segments: scrape 200 with the real value")
    check_junk_bounded(body, 20000, opened, up)
    rss1 = rss_kb(srv.pid)
    for j in junk:
        os.unlink(j)
    for _ in range(3):
        st, body, dt = timed_get(host, port)
    rss2 = rss_kb(srv.pid)
    print("     scrapes with junk: %s s, exporter CPU %s s; VmRSS before/with/after %d/%d/%d kB"
          % (["%.2f" % t for t in times], ["%.2f" % c for c in cpu], rss0, rss1, rss2))
    # The third scrape with junk costs no more than the first (nothing
    # grows from scrape to scrape): the exporter's CPU time, which other
    # work on the machine does not inflate as it does the wall time (clock
    # ticks of 10 ms: the slack).
    check(cpu[2] < 2 * cpu[0] + 0.1, "scrape cost does not grow with the junk's history")
    check(st == 200 and want in body, "the junk gone: 200 with the value (%r %r)" % (st, body[-300:]))
    if os.environ.get("PCPU_TEST_SANITIZER"):
        # A sanitizer's allocator keeps freed memory (quarantine, its own
        # caches): the plain build checks this.
        print("     (VmRSS not checked under %s)" % os.environ["PCPU_TEST_SANITIZER"])
    else:
        check(rss2 - rss0 < 4096, "the junk gone, memory goes too: VmRSS %d kB over the start"
              % (rss2 - rss0))


JUNK_UID = 65534  # nobody: "another user", where the test runs as root
MAX_DOWN = 16     # pcpustat serve --max-down's default


def plant_junk(d, n, content=b"", uid=None):
    """n files named like segments (of pids that do not exist) holding
    `content`, owned by `uid` (default JUNK_UID when root, else ours)."""
    uid = JUNK_UID if uid is None and os.geteuid() == 0 else uid
    junk = [os.path.join(d, "pcpu.%d.junk%d" % (3000000 + i, i)) for i in range(n)]
    for j in junk:
        fd = os.open(j, os.O_CREAT | os.O_WRONLY, 0o600)
        if content:
            os.write(fd, content)
        os.close(fd)
        if uid is not None:
            os.chown(j, uid, uid)
    return junk


def opens_during(d, fn):
    """Runs fn(); returns ({file name: times opened for reading in
    directory d meanwhile (inotify IN_OPEN; None for the key "overflow"
    if the kernel dropped events)}, fn's result)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    ino = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    check(ino >= 0 and libc.inotify_add_watch(ino, d.encode(), 0x20) >= 0, "inotify watch on the directory")
    try:
        result = fn()
        opened, data = {}, b""
        while True:
            try:
                chunk = os.read(ino, 1 << 20)
            except BlockingIOError:
                break
            if not chunk:
                break
            data += chunk
        pos = 0
        while pos + 16 <= len(data):
            _, mask, _, nlen = struct.unpack_from("iIII", data, pos)
            name = data[pos + 16:pos + 16 + nlen].rstrip(b"\0").decode()
            pos += 16 + nlen
            key = "overflow" if mask & 0x4000 else name  # IN_Q_OVERFLOW
            opened[key] = opened.get(key, 0) + 1
        return opened, result
    finally:
        os.close(ino)


def check_junk_bounded(body, njunk, opened, up):
    """What a scrape with njunk empty (or short) junk files of one owner
    may cost: MAX_DOWN of them reported by pcpu_segment_up 0, the others
    counted in pcpu_segments_omitted; at most those MAX_DOWN opened."""
    owner = JUNK_UID if os.geteuid() == 0 else os.geteuid()
    downs = [l for l in body.splitlines() if l.startswith("pcpu_segment_up{") and 'pcpu_segment="junk' in l]
    omitted = 'pcpu_segments_omitted{uid="%d"} %d' % (owner, njunk - MAX_DOWN)
    check(len(downs) == MAX_DOWN and all(l.endswith(",reason=\"corrupt\"} 0") for l in downs),
          "%d junk files of one owner: %d reported as pcpu_segment_up 0 (%d)" % (njunk, MAX_DOWN, len(downs)))
    check(omitted in body, "the other %d counted: %s" % (njunk - MAX_DOWN, omitted))
    check(up in body, "the real segment still up: %s" % up)
    check(len(body) < 16384, "the exposition stays small: %d bytes" % len(body))
    junk_opened = {k: v for k, v in opened.items() if k.startswith("pcpu.") and ".junk" in k or k == "overflow"}
    check(len(junk_opened) <= MAX_DOWN and "overflow" not in junk_opened,
          "a scrape opens at most the %d junk files it reports (%d opened%s)"
          % (MAX_DOWN, len(junk_opened), ", events lost" if "overflow" in junk_opened else ""))


def junk(e):
    cnt, path = e.fixture_start("count", "777", "counter")
    up = up_line("counter", cnt.pid, "", 1)
    want = 'test_events_total{pcpu_segment="counter",pcpu_pid="%d"} 777' % cnt.pid
    srv, host, port = e.serve()
    plant_junk(e.dir, 300)
    opened, (st, body, _) = opens_during(e.dir, lambda: timed_get(host, port))
    check(st == 200 and want in body, "300 empty junk files: 200 with the real value (%r)" % st)
    check_junk_bounded(body, 300, opened, up)
    promtool_ok(body, "junk")
    # Another owner's down segments are reported as before: one user's
    # junk uses up only that user's --max-down.
    if os.geteuid() == 0:
        bad = os.path.join(e.dir, "pcpu.%d.broken" % cnt.pid)
        with open(path, "rb") as f, open(bad, "wb") as g:
            g.write(b"NOTMAGIC" + f.read(4096)[8:])
        os.chmod(bad, 0o600)
        st, body, _ = timed_get(host, port)
        check(st == 200 and up_line("broken", cnt.pid, "corrupt", 0) in body and up in body,
              "root's corrupt segment still reported beside %d of uid %d's junk (%r)" % (300, JUNK_UID, st))
        os.unlink(bad)
    else:
        print("     (not root: one owner only, the per-owner bound is not shown)")
    # --max-down 0: no junk reported one by one, all counted.
    srv2, h2, p2 = e.serve("--max-down", "0")
    st, body, _ = timed_get(h2, p2)
    owner = JUNK_UID if os.geteuid() == 0 else os.geteuid()
    check(st == 200 and want in body and 'pcpu_segment="junk' not in body and
          'pcpu_segments_omitted{uid="%d"} 300' % owner in body,
          "--max-down 0: the 300 only counted (%r)" % st)
    st, body, _ = timed_get(h2, p2, "/metrics/junk0")
    check(st != 200, "/metrics/SEGMENT of a junk file: refused as before (%r)" % st)


def nofile(e, sv):
    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (20, 20))
    # An inactivity timeout longer than every wait below: only shedding
    # near the connection limit lets the scrapes through.
    srv, host, port = sv.start(timeout=LONG_TIMEOUT, preexec=limit)
    idle = []
    for _ in range(30):
        try:
            idle.append(socket.create_connection((host, port), timeout=et.TIMEOUT))
        except OSError:
            pass
    time.sleep(0.3)
    c0, t0 = cpu_seconds(srv.pid), time.monotonic()
    time.sleep(1.5)
    c1, t1 = cpu_seconds(srv.pid), time.monotonic()
    busy = (c1 - c0) / (t1 - t0)
    check(busy < 0.2, "30 idle clients at RLIMIT_NOFILE 20: %.0f%% CPU (no busy loop)" % (100 * busy))
    # Near the connection limit idle clients are shed after 1 s (not the
    # timeout); then scrapes succeed, while the 30 stay connected.
    ok, t0, deadline = False, time.monotonic(), time.monotonic() + 120
    while not ok and time.monotonic() < deadline:
        st, body, _ = timed_get(host, port, timeout=10)
        ok = sv.scrape_ok(st, body)
        if not ok:
            time.sleep(0.2)
    check(ok, "scrapes answered (200, with the value) after %.1f s, idle clients shed "
          "long before the timeout" % (time.monotonic() - t0))
    for s in idle:
        s.close()
    check(srv.poll() is None, "still running")


def more_descriptors(n):
    """This process may open n descriptors (the servers it starts inherit
    the limit); False where the hard limit says no."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= n:
        return True
    if hard != resource.RLIM_INFINITY and hard < n:
        return False
    resource.setrlimit(resource.RLIMIT_NOFILE, (n, hard))
    return True


# A scrape under attack must be answered well before the inactivity
# timeout (300 s; the Exposer's 30 s): a server that waited for the
# attackers to time out would take that long.
UNDER_ATTACK = 20


def idle(e, sv):
    check(more_descriptors(4096), "4096 descriptors for 1,100 connections (ulimit -Hn)")
    srv, host, port = sv.start(timeout=LONG_TIMEOUT)
    conns = []
    for _ in range(1100):
        try:
            # Connecting never waits for the server: past its limit the
            # kernel's backlog takes the connection.
            conns.append(socket.create_connection((host, port), timeout=et.TIMEOUT))
        except OSError:
            pass
    check(len(conns) >= 1024, "%d idle connections opened (past the limit, 1024)" % len(conns))
    good, worst = 0, 0.0
    for _ in range(3):
        st, body, dt = timed_get(host, port, timeout=60)
        worst = max(worst, dt)
        good += sv.scrape_ok(st, body) and dt < UNDER_ATTACK
    check(good == 3, "1,100 idle connections held: %d of 3 scrapes answered 200 within %d s (slowest %.1f s)"
          % (good, UNDER_ATTACK, worst))
    for c in conns:
        c.close()
    check(srv.poll() is None, "still running")


def fairness(e, sv):
    # An inactivity timeout longer than a scrape may take: a scrape that
    # waited for the slow clients would wait for it.
    srv, host, port = sv.start(timeout=LONG_TIMEOUT)
    idle, slow = [], []
    try:
        for _ in range(500):
            idle.append(socket.create_connection((host, port), timeout=et.TIMEOUT))
        for _ in range(50):
            s = socket.create_connection((host, port), timeout=et.TIMEOUT)
            s.sendall(b"GET /metrics HTTP/1.1\r\n")
            slow.append(s)
    except OSError as ex:
        check(False, "550 connections accepted (%d made: %s)" % (len(idle) + len(slow), ex))
    worst, bad = 0.0, 0
    t_end = time.monotonic() + 300
    for i in range(100):
        if i % 10 == 0:  # the slowloris clients dribble on
            for s in slow:
                try:
                    s.sendall(b"X")
                except OSError:
                    pass
        st, body, dt = timed_get(host, port, timeout=60)
        worst = max(worst, dt)
        if not sv.scrape_ok(st, body) or dt >= UNDER_ATTACK:
            bad += 1
        if time.monotonic() > t_end:
            break
    check(bad == 0, "500 idle + 50 slowloris: %d scrapes answered 200, none waiting for them "
          "(slowest %.3f s, %d bad)" % (i + 1, worst, bad))
    for s in idle + slow:
        s.close()


def slowloris(e, sv):
    check(more_descriptors(4096), "4096 descriptors for 1,100 connections (ulimit -Hn)")
    srv, host, port = sv.start(timeout=LONG_TIMEOUT)
    slow = []
    for _ in range(1100):
        try:
            s = socket.create_connection((host, port), timeout=et.TIMEOUT)
            s.setblocking(False)
            slow.append(s)
        except OSError:
            pass
    check(len(slow) >= 1024, "%d slowloris connections opened (past the limit, 1024)" % len(slow))
    stop_flag = threading.Event()

    def dribble():
        # A request line, then a header line every 3 s: slower than the
        # 1 s of shedding, far faster than any inactivity timeout.
        line = b"GET /metrics HTTP/1.1\r\n"
        while not stop_flag.is_set():
            for s in slow:
                try:
                    s.send(line)
                except OSError:
                    pass
            line = b"X-Slow: 1\r\n"
            stop_flag.wait(3)
    t = threading.Thread(target=dribble, daemon=True)
    t.start()
    good, worst = 0, 0.0
    for _ in range(3):
        st, body, dt = timed_get(host, port, timeout=60)
        worst = max(worst, dt)
        good += sv.scrape_ok(st, body) and dt < UNDER_ATTACK
        time.sleep(1)
    stop_flag.set()
    t.join(30)
    check(good == 3, "1,100 slowloris clients (a header line every 3 s): %d of 3 scrapes answered 200 within %d s "
          "(slowest %.1f s)" % (good, UNDER_ATTACK, worst))
    for c in slow:
        c.close()
    check(srv.poll() is None, "still running")


def body(e, sv):
    srv, host, port = sv.start(timeout=LONG_TIMEOUT)
    big = b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n"
    chunked = b"GET /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    results = queue.Queue()

    def announce(data):
        # Sends the headers only: the body never comes.
        results.put(et.exchange(host, port, data, wait=60))
    threads = [threading.Thread(target=announce, args=(big if i < 20 else chunked,), daemon=True)
               for i in range(25)]
    for t in threads:
        t.start()
    st, b, dt = timed_get(host, port)
    check(sv.scrape_ok(st, b), "a scrape beside 25 announced bodies: 200 with the value (%r, %.2f s)" % (st, dt))
    for t in threads:
        t.join(90)
    got = [results.get() for _ in range(results.qsize())]
    fine = [out for out, closed, secs in got if out.startswith("HTTP/1.1 400") and closed and secs < UNDER_ATTACK]
    check(len(got) == 25 and len(fine) == 25,
          "a GET announcing a 100 MB (or chunked) body: 400 and closed at once, %d of 25 (slowest %.1f s)"
          % (len(fine), max([secs for _, _, secs in got] or [0])))
    check(srv.poll() is None, "still running")


def gzip_refusal(e, sv):
    srv, host, port = sv.start()
    cases = [("gzip;q=0, *", False), ("gzip;q=0", False), ("identity", False), ("*;q=0", False),
             ("gzip", True), ("x-gzip", True), ("*", True), ("br, gzip;q=0.5", True), (None, False)]
    for ae, zipped in cases:
        st, hdrs, raw_body = et.get_bytes(host, port, {"Accept-Encoding": ae} if ae is not None else {})
        enc = hdrs.get("Content-Encoding")
        if zipped:
            try:
                text = gzip_module.decompress(raw_body).decode()
            except OSError:
                text = ""
            ok = st == 200 and enc == "gzip" and sv.marker in text
        else:
            ok = st == 200 and enc is None and sv.marker in raw_body.decode("utf-8", "replace")
        check(ok, "Accept-Encoding %r: %s (%r, Content-Encoding %r)"
              % (ae, "gzip" if zipped else "not compressed", st, enc))
        check("accept-encoding" in (hdrs.get("Vary") or "").lower(), "Accept-Encoding %r: Vary names it" % ae)


def wrongpass(e, sv):
    right = basic("prometheus", "s3cret")
    if sv.kind == "exposer":
        srv, host, port = sv.start(users={"prometheus": "s3cret"})
    else:
        web = os.path.join(e.tmp, "users.yml")
        with open(web, "w") as f:
            f.write("basic_auth_users:\n  prometheus: '%s'\n" % bcrypt_hash("s3cret", 4))
        srv, host, port = sv.start(web=web)
    st, b, _ = timed_get_with(host, port, right)
    check(sv.scrape_ok(st, b), "the right password: 200 with the value (%r)" % st)
    # A refusal is answered after half a second (a lower bound: a slow
    # machine only makes it later), so that clients cannot spin through
    # wrong passwords at the serving thread's cost.
    st, _, dt = timed_get_with(host, port, basic("prometheus", "nope"))
    check(st == 401 and dt >= 0.45, "a wrong password: 401 after the refusal's delay (%r, %.2f s)" % (st, dt))
    stop_flag, answers = threading.Event(), queue.Queue()

    def attacker(k):
        n = 0
        c = None
        while not stop_flag.is_set():
            n += 1
            try:
                c = c or http.client.HTTPConnection(host, port, timeout=60)
                c.request("GET", "/metrics", headers=basic("prometheus", "wrong-%d-%d" % (k, n)))
                r = c.getresponse()
                r.read()
                answers.put(r.status)
            except (OSError, http.client.HTTPException):
                c = None
        if c:
            c.close()
    threads = [threading.Thread(target=attacker, args=(k,), daemon=True) for k in range(8)]
    for t in threads:
        t.start()
    good, worst = 0, 0.0
    t_attack = time.monotonic()
    for _ in range(20):
        st, b, dt = timed_get_with(host, port, right)
        worst = max(worst, dt)
        good += sv.scrape_ok(st, b)
    stop_flag.set()
    for t in threads:
        t.join(90)
    attack = time.monotonic() - t_attack
    statuses = [answers.get() for _ in range(answers.qsize())]
    # Each of the 8 waits half a second per answer: at most 2 a second
    # each, however fast the machine (3 of slack per client: the one in
    # flight, the join). They got thousands when refused at once.
    bound = int(8 * (attack / 0.5 + 3))
    check(len(statuses) <= bound, "8 clients sending wrong passwords were answered %d times in %.1f s "
          "(at most %d: each refusal waits)" % (len(statuses), attack, bound))
    check(good == 20, "8 clients sending wrong passwords: %d of 20 scrapes with the right one answered 200 "
          "(slowest %.3f s)" % (good, worst))
    check(statuses and 200 not in statuses and 401 in statuses,
          "the wrong passwords: %d answers, never 200, 401 among them (%s)"
          % (len(statuses), sorted(set(statuses))))


def timed_get_with(host, port, headers, timeout=et.TIMEOUT):
    t0 = time.monotonic()
    try:
        st, _, b = et.get(host, port, headers=headers, timeout=timeout)
    except OSError as ex:
        return None, str(ex), time.monotonic() - t0
    return st, b, time.monotonic() - t0


def make_tls(e, users=None):
    """A certificate for 127.0.0.1 and a web configuration (TLS, and basic
    auth for `users`: name -> bcrypt hash) in e.tmp. Returns (web config
    path, an SSL context that trusts the certificate)."""
    d = os.path.join(e.tmp, "pki")
    os.makedirs(d, exist_ok=True)
    for tool in ("openssl", "htpasswd"):
        if not shutil.which(tool):
            raise SystemExit("FAIL: %s not installed: run scripts/install-deps.sh" % tool)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", "server.key", "-out", "server.crt", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], cwd=d, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    web = os.path.join(d, "web.yml")
    with open(web, "w") as f:
        f.write("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n")
        if users:
            f.write("basic_auth_users:\n")
            for name, h in users.items():
                f.write("  %s: '%s'\n" % (name, h))
    return web, ssl.create_default_context(cafile=os.path.join(d, "server.crt"))


def bcrypt_hash(password, cost):
    out = subprocess.run(["htpasswd", "-nbBC", str(cost), "u", password], capture_output=True, text=True,
                         check=True).stdout.strip()
    return out.split(":", 1)[1]


def basic(user, password):
    return {"Authorization": "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()}


# ---- the three servers ------------------------------------------------------------------
LONG_TIMEOUT = 300  # seconds of inactivity asked for (the Exposer's is 30)


class Server:
    """One of the servers the HTTP modes run against: start() returns
    (process, host, port); `marker` is in every good scrape's body."""

    def __init__(self, e, kind, program):
        self.e, self.kind, self.program = e, kind, program
        self.value = None
        if kind == "pcpustat":
            cnt, _ = e.fixture_start("count", "5150", "hostile")
            self.marker = 'test_events_total{pcpu_segment="hostile",pcpu_pid="%d"} 5150' % cnt.pid
        elif kind == "exposer":
            self.marker = "hostile_marker_total 5150"
        elif kind == "example":
            self.marker = 'example_requests_total{method="GET"}'
        else:
            raise SystemExit("unknown server %r" % kind)

    def start(self, timeout=None, web=None, users=None, preexec=None):
        """timeout: seconds of inactivity (None: the server's default);
        web: a web configuration file (pcpustat, example); users: {name:
        password} for the Exposer's RegisterAuth() (one user)."""
        if self.kind == "pcpustat":
            args = []
            if timeout:
                args += ["--timeout", str(timeout)]
            if web:
                args += ["--web.config.file", web]
            return self.e.serve(*args, preexec=preexec)
        if self.kind == "exposer":
            cmd = [self.program, "127.0.0.1:0"]
            for name, password in (users or {}).items():
                cmd += [name, password]
        else:
            cmd = [self.program, "127.0.0.1:0", web or "-", str(timeout or 10)]
        err = open(os.path.join(self.e.tmp, "server-%d.err" % len(self.e.procs)), "w+")
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, env=self.e.env, text=True,
                             preexec_fn=preexec)
        p.errfile = err.name
        self.e.procs.append(p)
        line = p.stdout.readline()
        if "://" not in line:
            err.seek(0)
            raise SystemExit("%s did not start: %r %s" % (self.kind, line, err.read()))
        host, port = line.split("://")[1].split("/")[0].rsplit(":", 1)
        return p, host, int(port)

    def scrape_ok(self, st, body):
        return st == 200 and self.marker in body


class Pending:
    """A request sent from `source` (a loopback address) on its own HTTPS
    connection, in a thread of its own (connecting may wait too): .answers
    gets (self, status), status None if the connection failed or closed
    unanswered."""

    def __init__(self, port, ctx, source, headers, answers):
        self.status = "waiting"
        threading.Thread(target=self._run, args=(port, ctx, source, headers, answers), daemon=True).start()

    def _run(self, port, ctx, source, headers, answers):
        try:
            c = http.client.HTTPSConnection("127.0.0.1", port, timeout=300, context=ctx,
                                            source_address=(source, 0))
            c.request("GET", "/metrics", headers=headers)
            r = c.getresponse()
            r.read()
            self.status = r.status
        except (OSError, http.client.HTTPException):
            self.status = None
        answers.put((self, self.status))


def next_answers(answers, n, what, timeout=60):
    """The next n answers, within a generous safety timeout."""
    got = []
    try:
        for _ in range(n):
            got.append(answers.get(timeout=timeout)[1])
    except queue.Empty:
        check(False, "%s: %d answers within %d s (got %r)" % (what, n, timeout, got))
        raise SystemExit(1)
    return got


def auth(e, sv):
    # "slow": bcrypt cost 31 (a valid hash, 2^27 times the work of cost 4):
    # the first check of a password for it keeps the checker busy far
    # longer than the test, so the queue behind it fills deterministically.
    slow = bcrypt_hash("x", 4).replace("$04$", "$31$", 1)
    web, ctx = make_tls(e, {"prometheus": bcrypt_hash("s3cret", 4), "slow": slow})
    srv, host, port = sv.start(web=web)
    right = basic("prometheus", "s3cret")

    def legit(conn=None):
        c = conn or http.client.HTTPSConnection(host, port, timeout=30, context=ctx)
        c.request("GET", "/metrics", headers=right)
        r = c.getresponse()
        body = r.read().decode()
        if conn is None:
            c.close()
        return r.status, body

    st, body = legit()
    check(sv.scrape_ok(st, body), "the right password (checked once): 200 with the value (%r)" % st)
    st, _ = et.get_tls(host, port, ctx, basic("prometheus", "nope"))
    check(st == 401, "a wrong password: 401 (%r)" % st)

    answers = queue.Queue()
    pw = iter("p%d" % i for i in range(1000))
    # One client address, three checks at once: AUTH_PER_CLIENT (2) are
    # taken (the first keeps the checker busy for good), the third is
    # refused at once.
    first = [Pending(port, ctx, "127.0.0.2", basic("slow", next(pw)), answers) for _ in range(3)]
    got = next_answers(answers, 1, "3 checks from 127.0.0.2")
    check(got == [429], "3 password checks at once from one address: one answered 429 at once (%r)" % got)
    # Four more addresses, two each: 2 + 8 checks for 1 running + 8
    # (AUTH_QUEUE) waiting: exactly one is refused, 503.
    more = [Pending(port, ctx, "127.0.0.%d" % a, basic("slow", next(pw)), answers)
            for a in range(3, 7) for _ in range(2)]
    got = next_answers(answers, 1, "8 checks from 4 addresses")
    check(got == [503], "the queue full: the check past it answered 503 at once (%r)" % got)

    # The checker saturated for good: the verified password is still
    # served, every time, on kept-alive and on new connections.
    c, oks = http.client.HTTPSConnection(host, port, timeout=30, context=ctx), 0
    for i in range(20):
        st, body = legit(c if i % 2 else None)
        oks += sv.scrape_ok(st, body)
    c.close()
    check(oks == 20, "checker saturated: 20 scrapes with the verified password, %d answered 200 with the value"
          % oks)
    st, _ = et.get_tls(host, port, ctx, basic("prometheus", "nope"))
    check(st == 401, "checker saturated: the wrong password seen before refused at once, 401 (%r)" % st)
    st, _ = et.get_tls(host, port, ctx, basic("prometheus", "new"), source="127.0.0.7")
    check(st == 503, "checker saturated: a password never seen, from a new address: 503 (%r)" % st)
    st, _ = et.get_tls(host, port, ctx, basic("prometheus", "new"), source="127.0.0.2")
    check(st == 429, "checker saturated: one more from an address with 2 checks waiting: 429 (%r)" % st)
    waiting = [p for p in first + more if p.status == "waiting"]
    check(len(waiting) == 9, "the 9 checks admitted are still waiting, unanswered (%d)" % len(waiting))

    # SIGTERM: the exporter stops although a check runs on; the waiting
    # requests are answered 503 or closed, never 200.
    t0 = time.monotonic()
    srv.send_signal(signal.SIGTERM)
    try:
        rc = srv.wait(timeout=30)
    except subprocess.TimeoutExpired:
        rc = None
    check(rc == 0, "SIGTERM with a check running for days: exits 0 (%r, %.1f s)" % (rc, time.monotonic() - t0))
    if rc == 0:
        got = next_answers(answers, len(waiting), "the waiting requests after SIGTERM")
        check(all(s in (503, None) for s in got), "the waiting requests: 503 or closed (%r)" % got)


def plaintext(e, sv):
    web, ctx = make_tls(e)
    srv, host, port = sv.start(web=web)
    answer = "Client sent an HTTP request to an HTTPS server.\n"
    for i in range(50):
        out, closed, _ = et.exchange(host, port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        head, _, body = out.partition("\r\n\r\n")
        ok = closed and head.startswith("HTTP/1.1 400 ") and body == answer
        if not ok or i == 0:
            check(ok, "plain HTTP to the HTTPS port: 400, %r, closed (%r, %s)"
                  % (answer, out[:200], "closed" if closed else "open"))
        if not ok:
            break
    # What a client library sees (Prometheus with http:// would report it).
    c = http.client.HTTPConnection(host, port, timeout=10)
    try:
        c.request("GET", "/metrics")
        r = c.getresponse()
        st, body = r.status, r.read().decode()
    except (OSError, http.client.HTTPException) as ex:
        st, body = ex, ""
    c.close()
    check(st == 400 and body == answer, "http.client: status 400 (%r)" % st)
    st, body = et.get_tls(host, port, ctx)
    check(sv.scrape_ok(st, body), "HTTPS on the same port: 200 with the value (%r)" % st)
    with open(srv.errfile) as f:
        said = f.read()
    check(said == "", "51 plain HTTP requests: nothing on stderr (%r)" % said[:300])
    # Not a letter, not TLS: closed unanswered, as before.
    out, closed, _ = et.exchange(host, port, b"\x00\x01\x02garbage\r\n\r\n")
    check(closed and out == "", "neither TLS nor HTTP: closed unanswered (%r)" % out[:80])
    st, body = et.get_tls(host, port, ctx)
    check(sv.scrape_ok(st, body), "HTTPS still: 200 with the value (%r)" % st)


SEGMENT_MODES = {"bounds": bounds, "segments": segments, "neighbours": neighbours, "junk": junk}
HTTP_MODES = {"idle": idle, "slowloris": slowloris, "fairness": fairness, "nofile": nofile, "body": body, "gzip": gzip_refusal,
              "wrongpass": wrongpass, "auth": auth, "plaintext": plaintext}
# What each server takes: the Exposer has no web configuration (TLS,
# bcrypt users), so the modes that need one are not its.
NOT_FOR = {"exposer": {"auth", "plaintext"}}


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else None
    if len(sys.argv) not in (4, 6) or (mode not in SEGMENT_MODES and mode not in HTTP_MODES):
        raise SystemExit(__doc__)
    kind = sys.argv[4] if len(sys.argv) == 6 else "pcpustat"
    if mode in SEGMENT_MODES and kind != "pcpustat" or mode in NOT_FOR.get(kind, ()):
        raise SystemExit("%s: not a mode for %s" % (mode, kind))
    e = et.Env(sys.argv[2], sys.argv[3])
    try:
        if mode in SEGMENT_MODES:
            SEGMENT_MODES[mode](e)
        else:
            HTTP_MODES[mode](e, Server(e, kind, sys.argv[5] if len(sys.argv) == 6 else None))
    finally:
        e.close()
    if et.FAILS:
        print("exporter_hostile_test: %d failed" % len(et.FAILS))
        sys.exit(1)
    print("exporter_hostile_test: ok")


if __name__ == "__main__":
    main()
