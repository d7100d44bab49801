#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""nginx's pcpu module stays up and bounded, whatever happens or clients send
(issue 63; README.md, "nginx"; docs/nginx.md, "Bounds" and "When statistics
cannot be kept").

  robust_test.py TEST MODULE_SO BUILD_DIR

TEST:
  full      the segment's tmpfs full: reloads that add zones, a reload that
            brings the module back, a start; nginx stays up, counts what it
            can, says what it refused (pcpu_stats_strict: a start fails)
  rename    a filter renamed on a full filters' zone: the master stays, each
            name admits its max_keys keys exactly
  bounded   proxy_pass with client-chosen hosts and ports: upstream names and
            peers bounded for the whole tree across workers and reloads,
            the rest under __other__, every attempt counted once
  expire    pcpu_stats_expire: a filter key not seen for that long leaves the
            display (every family of it), counted in nginx_pcpu_keys_expired;
            below the filter's bound, a key met again comes back with its
            whole count, and the bound still counts it (docs/nginx.md, "Expiry")
  reuse     pcpu_stats_expire at a filter's bound: expired keys lend their
            series to new keys, admitted under their own labels from zero
            (an old key met again is a new one), counts exact against the
            access log across a reload and a SIGKILLed worker
  reusepeers  the same for upstream peers at pcpu_stats_max_peers
  stopped   a worker stopped (SIGSTOP) holds lending back, nothing waits for
            it; once it runs again, the expired key's series is lent
  handover  the same across admission zones: a reload that makes a new zone
            (a bound changed) and a binary upgrade (nginx_pcpu_masters 2):
            series lent again once the old processes are gone
Exit 0 when the test passed, 77 when it cannot run here (ctest: skipped).
"""
import http.client
import os
import signal
import subprocess
import sys
import tempfile
import time
import glob

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import (Nginx, SKIP, eq, expect, free_port, gone, grown, log_lines, reload_survives,
                     series, total, wait_for)  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


# ---- bounded: what clients send cannot grow the tree ------------------------------

BOUNDED = """
    pcpu_stats on;
    pcpu_stats_max_upstreams %(max_upstreams)d;
    pcpu_stats_max_peers %(max_peers)d;
    server {
        listen 127.0.0.1:%(port)d;
        server_name p.test;
        # Client-chosen upstream names and peers: IP literals need no resolver.
        location / { proxy_pass http://$arg_h:$arg_p; }
    }
%(backends)s
"""


def test_bounded(module, build):
    """proxy_pass http://$arg_h:$arg_p with client-chosen hosts and ports: upstream
    names and peers are admitted for the whole tree (both workers, across
    reloads, a new zone seeded from the tree) up to their bounds, the rest
    count under __other__, every attempt counted once, refusals by reason."""
    ports = [free_port() for _ in range(4)]
    backends = "".join("""
    server {
        listen %d;
        server_name backend%d.test;
        pcpu_stats off;
        location / { return 200; }
    }""" % (p, i) for i, p in enumerate(ports))
    n = Nginx(module, BOUNDED, backends=backends, max_upstreams=20, max_peers=30).start()
    try:
        m = n.master()
        sent = 0

        def load(hosts):
            nonlocal sent
            for h in hosts:
                for p in ports:
                    eq(n.get("/?h=127.0.%d.%d&p=%d" % (h // 250, 1 + h % 250, p), host="p.test")[0], 200,
                       "proxied to 127.0.%d.%d:%d" % (h // 250, 1 + h % 250, p))
                    sent += 1
            return grown(n, lambda s: total(s, "nginx_http_upstream_responses"), sent)

        def check(s, ups, peers, what):
            got = series(s, "nginx_http_upstream_responses")
            eq(sum(v for l, v in got), sent, "%s: every attempt counted once" % what)
            names = {l["upstream"] for l, v in got if l["upstream"] != "__other__"}
            pairs = {(l["upstream"], l["peer"]) for l, v in got if l["peer"] != "__other__"}
            eq(len(names), ups, "%s: upstream names" % what)
            eq(len(pairs), peers, "%s: peers" % what)
            expect(all(l["peer"] == "__other__" for l, v in got if l["upstream"] == "__other__"),
                   "%s: a name not admitted has no peers of its own" % what)
            dur = series(s, "nginx_http_upstream_response_duration_seconds")
            expect(len(dur) <= ups + 1 + peers, "%s: duration series bounded: %d" % (what, len(dur)))
            return names, pairs

        # 60 hosts x 4 ports: the first 20 hosts are upstreams, the first 30
        # of their peers admitted.
        s = load(range(60))
        names, pairs = check(s, 20, 30, "first load")
        eq(names, {"127.0.0.%d" % (1 + h) for h in range(20)}, "the first 20 hosts")
        eq(total(s, "nginx_http_upstream_responses", upstream="__other__"), 40 * 4, "hosts 21-60")
        eq(total(s, "nginx_pcpu_series_refused", reason="upstreams"), 160, "refused: upstream names")
        eq(total(s, "nginx_pcpu_series_refused", reason="peers"), 20 * 4 - 30, "refused: peers")
        keys = {l["source"]: v for l, v in series(s, "nginx_pcpu_keys")}
        eq((keys.get("upstreams"), keys.get("peers"), keys.get("zones")), (20, 30, 1),
           "self-metrics: names, peers, zones (p.test: the others count nothing)")
        bounds = {l["source"]: v for l, v in series(s, "nginx_pcpu_keys_max")}
        eq((bounds.get("upstreams"), bounds.get("peers")), (20, 30), "self-metrics: the bounds")
        # Reloads keep the bounds (the same zone): more hosts add nothing.
        reload_survives(n, m)
        s = load(range(60, 400))
        check(s, 20, 30, "after a reload")
        reload_survives(n, m)
        s = load(range(400, 700))
        check(s, 20, 30, "after two reloads")
        # New bounds: a new zone, seeded with the tree's 20 names and 30
        # peers, then 5 names and 10 peers more, no more.
        n.max_upstreams, n.max_peers = 25, 40
        n.write_conf()
        reload_survives(n, m)
        s = load(range(700, 800))
        names2, pairs2 = check(s, 25, 40, "after new bounds")
        keys = {l["source"]: v for l, v in series(s, "nginx_pcpu_keys")}
        bounds = {l["source"]: v for l, v in series(s, "nginx_pcpu_keys_max")}
        eq((keys["upstreams"], keys["peers"], bounds["upstreams"], bounds["peers"]), (25, 40, 25, 40),
           "self-metrics after new bounds")
        expect(names <= names2 and pairs <= pairs2, "the admitted keep their series")
        print("bounded: %d attempts from %d hosts: %d upstream names, %d peers" % (
            sent, 800, len(names2), len(pairs2)))
    finally:
        n.stop()
    # The case at the default bounds: 10^4 client-chosen upstream
    # names on two workers, over one keep-alive connection per worker's
    # worth of load: 1000 names, 1024 peers, nothing more.
    n = Nginx(module, BOUNDED.replace("pcpu_stats_max_upstreams %(max_upstreams)d;", "")
              .replace("pcpu_stats_max_peers %(max_peers)d;", ""), backends=backends).start()
    try:
        import http.client
        conns = [http.client.HTTPConnection("127.0.0.1", n.port, timeout=30) for _ in range(2)]
        names = 10000
        for h in range(names):
            c = conns[h % 2]
            c.request("GET", "/?h=127.%d.%d.%d&p=%d" % (1 + h // 62500, h // 250 % 250, 1 + h % 250,
                                                          ports[h % 4]), headers={"Host": "p.test"})
            r = c.getresponse()
            r.read()
            eq(r.status, 200, "proxied")
        for c in conns:
            c.close()
        s = grown(n, lambda s: total(s, "nginx_http_upstream_responses"), names)
        got = series(s, "nginx_http_upstream_responses")
        eq(sum(v for l, v in got), names, "every attempt counted once")
        eq(len({l["upstream"] for l, v in got if l["upstream"] != "__other__"}), 1000, "upstream names")
        eq(len({(l["upstream"], l["peer"]) for l, v in got if l["peer"] != "__other__"}), 1000,
           "peers: one per admitted name")
        keys = {l["source"]: v for l, v in series(s, "nginx_pcpu_keys")}
        eq((keys["upstreams"], keys["peers"]), (1000, 1000), "self-metrics")
        eq(total(s, "nginx_pcpu_series_refused", reason="upstreams"), names - 1000, "refused names")
        nseries = sum(len(f["metrics"]) for f in s["families"])
        # Per admitted peer: a status code, three times (response, connect,
        # header) and the bytes both ways; the rest a few dozen.
        expect(nseries < 6 * 1000 + 100, "series: %d" % nseries)
        print("bounded: 10^4 upstream names: 1000 admitted, %d series, segment %d KiB" % (
            nseries, total(s, "nginx_pcpu_segment_bytes") // 1024))
    finally:
        n.stop()
    # The segment's budget (pcpu_stats_max_series): a flood of filter keys
    # past it is refused, counted, and nginx goes on.
    n = Nginx(module, """
    pcpu_stats on;
    pcpu_stats_max_series 400;
    pcpu_stats_filter k $arg_k max_keys=5000;
    server {
        listen 127.0.0.1:%(port)d;
        server_name b.test;
        location / { return 200; }
    }
""").start()
    try:
        for i in range(300):
            eq(n.get("/?k=key%d" % i, host="b.test")[0], 200, "served past the budget")
        s = grown(n, lambda s: total(s, "nginx_http_requests"), 300)
        eq(total(s, "nginx_http_requests"), 300, "the zone counts on")
        nseries = sum(len(f["metrics"]) for f in s["families"])
        expect(nseries + len(s["families"]) <= 400, "within the budget: %d series, %d families" % (
            nseries, len(s["families"])))
        expect(total(s, "nginx_pcpu_series_refused", reason="segment_full") > 0, "refusals counted")
        eq(total(s, "nginx_pcpu_series_max"), 400, "self-metric: the budget")
        expect(total(s, "nginx_pcpu_segment_bytes") > 0, "self-metric: the segment's bytes")
        eq(total(s, "nginx_pcpu_keys", source="filter:k"), 300, "filter k admitted every key")
        print("bounded: the budget of 400 held %d series" % nseries)
    finally:
        n.stop()


# ---- full: statistics never take nginx down ----------------------------------------

CLONE_NEWNS, MS_REC, MS_PRIVATE = 0x00020000, 16384, 1 << 18


def private_tmpfs(size):
    """A tmpfs of `size` bytes on a new directory, mounted in a mount
    namespace of this process's own (nginx, its child, inherits it; nothing
    is left mounted when the test ends, however it ends). The directory, or
    None with the reason printed when this process may not (not root)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0 or libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        print("no mount namespace here: %s" % os.strerror(ctypes.get_errno()))
        return None
    d = tempfile.mkdtemp(prefix="pcpu-nginx-tmpfs-")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%d,mode=0700" % size, "pcpu-nginx-full", d],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print("no tmpfs here: %s" % r.stderr)
        return None
    return d


def fill(d):
    """Takes the file system of `d` to its last byte; the filler's path (remove
    it to give the space back)."""
    path = os.path.join(d, "filler")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 20, 4096, 1):
            block = b"x" * size
            while True:
                try:
                    if os.write(fd, block) < size:
                        break
                except OSError:
                    break
    finally:
        os.close(fd)
    return path


FULL = """
    pcpu_stats on;
    pcpu_stats_filter k $arg_k max_keys=50;
    server {
        listen 127.0.0.1:%(port)d;
        server_name a.test;
        location / { return 200 "a\\n"; }
        location /missing { return 404; }
    }
%(more)s
"""


def zones(port, count):
    """`count` more server zones, each with a location zone."""
    return "".join("""
    server {
        listen 127.0.0.1:%d;
        server_name z%d.test;
        location / { return 200; }
        location /loc/ { pcpu_stats on; return 200; }
    }""" % (port, i) for i in range(count))


def test_full(module, build):
    """The segment's tmpfs full: reloads that add zones, a reload that brings
    the module back (publishing fails), a start; nginx stays up, counts what it
    can, says what it refused; pcpu_stats_strict makes a start fail instead."""
    d = private_tmpfs(16 << 20)
    if d is None:
        return SKIP
    os.environ["PCPU_SEGMENT_DIR"] = d
    n = Nginx(module, FULL, more="").start()
    try:
        m = n.master()
        for i in range(10):
            n.get("/?k=a%d" % (i % 2), host="a.test")
        s = grown(n, lambda s: total(s, "nginx_http_requests", server="a.test"), 10)
        eq(total(s, "nginx_http_requests", server="a.test"), 10, "before the tmpfs is full")
        filler = fill(d)
        # A reload that adds 20 server zones and 20 location zones.
        n.more = zones(n.port, 20)
        n.write_conf()
        reload_survives(n, m)
        for i in range(40):
            n.get("/missing?k=new%d" % i, host="a.test")
        for z in range(20):
            for j in range(3):
                eq(n.get("/loc/x", host="z%d.test" % z)[0], 200, "z%d.test served" % z)
        for i in range(5):
            n.get("/?k=a0", host="a.test")
        s = grown(n, lambda s: total(s, "nginx_http_requests", server="a.test", code="200"), 15)
        eq(total(s, "nginx_http_requests", server="a.test", code="200"), 15, "a.test counted on")
        eq(total(s, "nginx_http_filter_requests", filter="k", key="a0"), 10, "a known key counted on")
        made = 0
        for z in range(20):
            got = series(s, "nginx_http_requests")
            if any(l["server"] == "z%d.test" % z for l, v in got):
                made += 1
                eq(total(s, "nginx_http_requests", server="z%d.test" % z), 3,
                   "z%d.test: exact where its series were made" % z)
        refused = total(s, "nginx_pcpu_series_refused", reason="segment_full")
        expect(refused > 0, "refusals counted: %s" % series(s, "nginx_pcpu_series_refused"))
        said = log_lines(n, "segment is full")
        expect(0 < len(said) <= 1 + 2 * 2, "said once per process, not per request: %s" % said)
        print("full: %d of 20 new server zones had series, %d refusals" % (made, refused))
        # Full still: nginx -s reload works, again and again.
        reload_survives(n, m)
        reload_survives(n, m)
        # Space again: a reload makes the new zones' series, exact from then.
        os.unlink(filler)
        reload_survives(n, m)
        s = n.stats()
        before = {z: total(s, "nginx_http_location_requests", server="z%d.test" % z) for z in range(20)}
        for z in range(20):
            for j in range(4):
                n.get("/loc/y", host="z%d.test" % z)
        s = grown(n, lambda s: total(s, "nginx_http_location_requests", server="z19.test") - before[19], 4)
        for z in range(20):
            eq(total(s, "nginx_http_location_requests", server="z%d.test" % z) - before[z], 4,
               "z%d.test /loc/ once there is space" % z)
            eq(len([1 for l, v in series(s, "nginx_http_responses") if l["server"] == "z%d.test" % z]),
               6, "z%d.test's classes made" % z)
        # A reload that brings the module back into a full tmpfs: the tree
        # cannot be published; nginx serves on, statistics off, and says so.
        n.write_conf_without_module()
        old = set(n.workers(m))
        n.run("-s", "reload")
        wait_for(lambda: not glob.glob(os.path.join(d, "pcpu.*")), "the tree to end without the module")
        wait_for(lambda: n.workers(m) and not (set(n.workers(m)) & old), "new workers")
        filler = fill(d)
        n.write_conf()
        reload_survives(n, m)
        expect(log_lines(n, "[alert]") and log_lines(n, "statistics off"),
               "an alert: statistics off:\n" + n.error_log()[-2000:])
        eq(n.get("/", host="a.test")[0], 200, "serving with statistics off")
        eq(n.get("/", port=n.status_port)[0], 503, "the display: statistics off")
        reload_survives(n, m)
        os.unlink(filler)
        reload_survives(n, m)
        for i in range(3):
            n.get("/", host="a.test")
        s = grown(n, lambda s: total(s, "nginx_http_requests", server="a.test"), 3)
        eq(total(s, "nginx_http_requests", server="a.test"), 3, "statistics on again, a new tree")
        # A binary upgrade into a full tmpfs: the new master joins the tree,
        # the old one quits, and the series there are count on, exactly.
        filler = fill(d)
        old, new = n.upgrade()
        wait_for(lambda: gone(old), "the old master to quit")
        expect(log_lines(n, "joined the old master's statistics"), "the new master joined:\n" +
               n.error_log()[-2000:])
        for i in range(2):
            n.get("/", host="a.test")
        s = grown(n, lambda s: total(s, "nginx_http_requests", server="a.test"), 5)
        eq(total(s, "nginx_http_requests", server="a.test"), 5, "counting on after the upgrade")
        reload_survives(n, new)
        os.unlink(filler)
    finally:
        n.stop()
    # At startup, a segment that cannot be made: nginx starts with
    # statistics off and an alert, or, with pcpu_stats_strict on, does not.
    filler = fill(d)
    n = Nginx(module, FULL, more="").start()
    try:
        eq(n.get("/", host="a.test")[0], 200, "started and serving, statistics off")
        eq(n.get("/", port=n.status_port)[0], 503, "the display: statistics off")
        expect(log_lines(n, "[alert]") and log_lines(n, "statistics off"),
               "an alert at startup:\n" + n.error_log()[-2000:])
    finally:
        n.stop()
    n = Nginx(module, FULL, more="")
    n.write_conf(extra_http="pcpu_stats_strict on;")
    r = n.run(check=False)
    if r.returncode == 0:
        n.stop()  # it started: none left behind by the failure
    expect(r.returncode != 0, "pcpu_stats_strict on: nginx does not start")
    expect(log_lines(n, "[emerg]"), "pcpu_stats_strict on: an emerg:\n" + n.error_log()[-2000:])
    os.unlink(filler)
    n.start()
    try:
        n.get("/", host="a.test")
        s = grown(n, lambda s: total(s, "nginx_http_requests", server="a.test"), 1)
        eq(total(s, "nginx_http_requests", server="a.test"), 1, "strict, with space: counting")
        # Strict is for a start only: a reload into a full tmpfs keeps nginx.
        filler = fill(d)
        n.more = zones(n.port, 5)
        n.write_conf(extra_http="pcpu_stats_strict on;")
        reload_survives(n, n.master())
        n.get("/", host="a.test")
        s = grown(n, lambda s: total(s, "nginx_http_requests", server="a.test"), 2)
        eq(total(s, "nginx_http_requests", server="a.test"), 2, "strict, a reload into a full tmpfs")
        os.unlink(filler)
    finally:
        n.stop()
    subprocess.run(["umount", d])  # (this process's namespace: the folder is empty outside)
    os.rmdir(d)
    print("full: nginx stayed up through every full tmpfs")


RENAME = """
    pcpu_stats on;
    pcpu_stats_filter %(fname)s $arg_k max_keys=200;
    server {
        listen 127.0.0.1:%(port)d;
        server_name f.test;
        location / { return 200; }
    }
"""


def test_rename(module, build):
    """A filter renamed twice, each time after its 200 keys of 250 bytes took
    their room in the filters' shared zone: the master stays, and each name
    admits its 200 keys exactly, the rest under __other__."""
    n = Nginx(module, RENAME, fname="a").start()
    try:
        m = n.master()
        for name in ("a", "b", "c"):
            if name != "a":
                n.fname = name
                n.write_conf()
                reload_survives(n, m)
            for i in range(300):
                eq(n.get("/?k=%s%03d%s" % (name, i, "x" * 246), host="f.test")[0], 200, "served")
            s = grown(n, lambda s: total(s, "nginx_http_filter_requests", filter=name), 300)
            keys = {l["key"]: v for l, v in series(s, "nginx_http_filter_requests") if l["filter"] == name}
            eq(len([k for k in keys if k != "__other__"]), 200, "filter %s: keys admitted" % name)
            expect(all(v == 1 for k, v in keys.items() if k != "__other__"), "one request a key")
            eq(keys.get("__other__"), 100, "filter %s: __other__" % name)
        eq(total(s, "nginx_pcpu_series_refused", reason="max_keys"), 300,
           "refusals: the requests that went to __other__")
        eq((total(s, "nginx_pcpu_keys", source="filter:c"), total(s, "nginx_pcpu_keys_max", source="filter:c")),
           (200, 200), "self-metrics: filter c's keys and bound")
        reload_survives(n, m)
    finally:
        n.stop()


# ---- expire: keys not seen leave the display ------------------------------------------

EXPIRE = """
    pcpu_stats on;
    pcpu_stats_expire 3s;
    upstream ua { server 127.0.0.1:%(pa)d; }
    upstream ub { server 127.0.0.1:%(pb)d; }
    server {
        listen 127.0.0.1:%(port)d;
        server_name e.test;
        # Below its bound: expiry only hides (test_reuse: at the bound).
        location / { pcpu_stats_filter k $arg_k max_keys=10 histogram; return 200 "ok\\n"; }
        location /ua { proxy_pass http://ua; }
        location /ub { proxy_pass http://ub; }
    }
    server {
        listen 127.0.0.1:%(pa)d;
        listen 127.0.0.1:%(pb)d;
        pcpu_stats off;
        location / { return 200; }
    }"""


def test_expire(module, build):
    """pcpu_stats_expire 3s (a margin for a loaded machine: a key met
    just before a read must not expire before it): key a, not met again, leaves every filter family
    of the display while key b, met at each poll, stays; a's requests come
    back with it, counted on (the filter is below its bound: expiry only
    hides). The same for upstream ua's peer against ub's."""
    n = Nginx(module, EXPIRE, pa=free_port(), pb=free_port()).start()
    try:
        def keys(s, family="nginx_http_filter_requests"):
            return {l["key"]: v for l, v in series(s, family) if l.get("filter") == "k"}

        def expired(s):
            return total(s, "nginx_pcpu_keys_expired", source="filter:k")

        def ups(s, family="nginx_http_upstream_responses"):
            return {l["upstream"]: v for l, v in series(s, family)}

        for k in ("a", "b", "b", "c"):
            eq(n.get("/?k=" + k)[0], 200, "request k=" + k)
        for u in ("ua", "ub"):
            eq(n.get("/" + u)[0], 200, "request /" + u)
        # the log phase counts a request's filter key before its upstream:
        # wait for both (CI read ub's key counted and its response not yet)
        s = grown(n, lambda s: total(s, "nginx_http_filter_requests", filter="k")
                  + sum(ups(s).values()), 4 + 2)
        eq(ups(s), {"ua": 1, "ub": 1}, "the upstreams before expiry")
        seen = ups(s, "nginx_http_upstream_last_seen_timestamp_seconds")
        eq(sorted(seen), ["ua", "ub"], "a last-seen time per peer")
        expect(all(abs(v - time.time()) < 60 for v in seen.values()), "peers last seen: now, %r" % seen)
        eq(total(s, "nginx_pcpu_keys_expired", source="peers"), 0, "no peer expired yet")
        eq(keys(s), {"a": 1, "b": 2, "c": 1}, "the keys before expiry")
        eq(expired(s), 0, "none expired yet")
        seen = {l["key"]: v for l, v in series(s, "nginx_http_filter_last_seen_timestamp_seconds")}
        eq(sorted(seen), ["a", "b", "c"], "a last-seen time per key, none for __other__")
        expect(all(abs(v - time.time()) < 60 for v in seen.values()), "last seen: now, %r" % seen)

        def b_only():
            eq(n.get("/?k=b")[0], 200, "request k=b")
            eq(n.get("/ub")[0], 200, "request /ub")
            s = n.stats()
            return s if "a" not in keys(s) and "ua" not in ups(s) else None
        # a and c are not met again: out of the display once 3 s have passed
        # (the poll meets b each time, so b stays).
        s = wait_for(b_only, "key a to expire", timeout=15)
        shown = keys(s)
        expect("b" in shown and "c" not in shown, "b shown, a and c not: %r" % shown)
        for fam in ("nginx_http_upstream_responses", "nginx_http_upstream_response_duration_seconds",
                    "nginx_http_upstream_received_bytes", "nginx_http_upstream_sent_bytes",
                    "nginx_http_upstream_last_seen_timestamp_seconds"):
            eq(sorted(ups(s, fam)), ["ub"], "%s: ua's peer left out" % fam)
        eq(total(s, "nginx_pcpu_keys_expired", source="peers"), 1, "nginx_pcpu_keys_expired: ua's peer")
        ub = ups(s)["ub"]
        for fmt in ("prometheus", "openmetrics"):
            text = n.stats(fmt)
            expect('nginx_pcpu_keys_expired{source="filter:k"} 2' in text and 'key="a"' not in text
                   and 'upstream="ua"' not in text, "%s: the same left out" % fmt)
        for fam in ("nginx_http_filter_responses", "nginx_http_filter_request_bytes",
                    "nginx_http_filter_response_bytes", "nginx_http_filter_request_duration_seconds",
                    "nginx_http_filter_last_seen_timestamp_seconds"):
            got = set(keys(s, fam))
            expect(got and not got & {"a", "c"}, "%s: a and c left out: %r" % (fam, got))
        eq(expired(s), 2, "nginx_pcpu_keys_expired: a and c")
        eq(total(s, "nginx_pcpu_keys", source="filter:k"), 3, "the bound still counts them")
        eq(total(s, "nginx_pcpu_keys_reusable", source="filter:k"), 0, "below the bound: none lent")
        eq(n.get("/?k=e")[0], 200, "request k=e")
        b = shown["b"]
        eq(n.get("/?k=a")[0], 200, "request k=a")
        eq(n.get("/ua")[0], 200, "request /ua")
        s = grown(n, lambda s: keys(s).get("a", 0) + keys(s).get("e", 0) + ups(s).get("ua", 0), 5)
        eq(ups(s), {"ua": 2, "ub": ub}, "ua's peer shown again, counted on")
        eq(total(s, "nginx_pcpu_keys_expired", source="peers"), 0, "no peer expired now")
        eq(keys(s).get("a"), 2, "a shown again, counted on")
        eq(keys(s).get("e"), 1, "e: a key of its own, the bound has room")
        eq(keys(s).get("b"), b, "b as it was")
        eq(expired(s), 1, "nginx_pcpu_keys_expired: c")
    finally:
        n.stop()


# ---- reuse: at the bound, expired keys lend their series ------------------------------

REUSE = """
    pcpu_stats on;
    pcpu_stats_expire 2s;
    pcpu_stats_filter k $arg_k max_keys=3 histogram;
    log_format keys "$arg_k $arg_p";
    server {
        listen 127.0.0.1:%(port)d;
        server_name r.test;
        access_log logs/keys.log keys;
        location / { return 200 "ok\\n"; }
    }"""


def test_reuse(module, build):
    """max_keys=3, pcpu_stats_expire 2s (a key read just after its requests must
    not expire before the read, on a loaded machine), two workers: a, b, c admitted, d under
    __other__; a and c expire (b is met at each poll) and, once every worker let
    go of them (nginx_pcpu_keys_reusable), e and f take their series: own labels,
    every family from zero, a and c gone from the tree, g past the bound again.
    Then a reload and a SIGKILLed worker, e and f expire; e met again is live
    again, counted on; a (met again: a new key, from zero) takes f's series, h
    none. Each key's count is the access log's requests of it since its
    admission (the phase of each request is logged)."""
    n = Nginx(module, REUSE).start()
    try:
        def keys(s, family="nginx_http_filter_requests"):
            return {l["key"]: v if isinstance(v, (int, float)) else v["count"]
                    for l, v in series(s, family) if l.get("filter") == "k" and l.get("class", "2xx") == "2xx"}

        def metric(s, name):
            return total(s, name, source="filter:k")

        def send(phase, *ks):
            for k in ks:
                eq(n.get("/?k=%s&p=%d" % (k, phase))[0], 200, "request k=%s" % k)

        def lent(phase, want):
            # b met at each poll; the others not, until `want` are lendable
            def ready():
                send(phase, "b")
                s = n.stats()
                return s if metric(s, "nginx_pcpu_keys_reusable") == want else None
            return wait_for(ready, "%d keys to lend their series" % want, timeout=12)

        def logged(k, since):
            with open(os.path.join(n.prefix, "logs", "keys.log")) as f:
                return sum(1 for l in f if l.split()[0] == k and int(l.split()[1]) >= since)

        def exact(admitted):
            # the access log's lines since each key's admission (the last
            # poll's count may come just after its response)
            want = {k: logged(k, since) for k, since in admitted.items()}
            got = keys(grown(n, lambda s: all(keys(s).get(k) == v for k, v in want.items()), True))
            for k, since in admitted.items():
                eq(got.get(k), want[k], "key %s: the access log's requests since phase %d" % (k, since))

        # which keys a filter admits is the order of the workers' log
        # phases: d once a, b and c are counted
        send(0, "a", "b", "c")
        grown(n, lambda s: sum(keys(s).values()), 3)
        send(0, "d")
        s = grown(n, lambda s: sum(keys(s).values()), 4)
        eq(keys(s), {"a": 1, "b": 1, "c": 1, "__other__": 1}, "d past max_keys=3")
        s = lent(1, 2)
        eq(metric(s, "nginx_pcpu_keys_expired"), 2, "a and c expired")
        eq(metric(s, "nginx_pcpu_keys"), 3, "the keys holding a series, retired ones among them")
        send(2, "e", "e", "f", "f", "f")
        s = grown(n, lambda s: keys(s).get("e", 0) + keys(s).get("f", 0), 5)
        for fam in ("nginx_http_filter_requests", "nginx_http_filter_responses",
                    "nginx_http_filter_request_duration_seconds"):
            got = keys(s, fam)
            eq((got.get("e"), got.get("f"), "a" in got or "c" in got), (2, 3, False),
               "%s: e and f from zero, a and c gone" % fam)
        eq(sorted(keys(s, "nginx_http_filter_last_seen_timestamp_seconds")), ["b", "e", "f"], "last seen")
        eq([metric(s, m) for m in ("nginx_pcpu_keys", "nginx_pcpu_keys_reusable", "nginx_pcpu_keys_expired")],
           [3, 0, 0], "keys, reusable, expired after the lending")
        send(2, "g")
        s = grown(n, lambda s: keys(s).get("__other__", 0), 2)
        eq(keys(s).get("__other__"), 2, "g: no series to lend, __other__ (which never expires)")
        eq(total(s, "nginx_pcpu_series_refused", reason="max_keys"), 2, "refused: d and g")
        exact({"b": 0, "e": 2, "f": 2})
        n.reload()
        n.kill_worker()
        wait_for(lambda: len(n.workers()) == 2, "the worker respawned")
        s = lent(3, 2)
        send(4, "e")
        s = grown(n, lambda s: keys(s).get("e", 0), 3)
        eq(keys(s).get("e"), 3, "e met again before its series went: live again, counted on")
        send(4, "a", "h")
        s = grown(n, lambda s: keys(s).get("a", 0) + keys(s).get("__other__", 0), 1 + 3)
        eq((keys(s).get("a"), keys(s).get("__other__"), "f" in keys(s)), (1, 3, False),
           "a met again: a new key, from zero (f's series); h: none left to lend, __other__")
        exact({"b": 0, "e": 2, "a": 4})
    finally:
        n.stop()


HANDOVER = """
    pcpu_stats on;
    pcpu_stats_expire 2s;
    pcpu_stats_max_peers %(max_peers)d;
    pcpu_stats_filter k $arg_k max_keys=2;
    server {
        listen 127.0.0.1:%(port)d;
        server_name h.test;
        location / { return 200 "ok\\n"; }
    }"""


def test_handover(module, build):
    """max_keys=2, pcpu_stats_expire 2s: a reload that changes a bound (a new
    admission zone, seeded with the tree's keys; the old zone lends no more) lends
    a's and b's series to c and d once the old workers are gone; a binary upgrade
    has nginx_pcpu_masters at 2 while both masters run (nothing lent), and the new
    master's zone lends c's and d's series to e and f once the old master quit."""
    n = Nginx(module, HANDOVER, max_peers=100).start()
    try:
        def keys(s):
            return {l["key"]: v for l, v in series(s, "nginx_http_filter_requests") if l.get("filter") == "k"}

        def admit(*ks):
            # one at a time: which keys are admitted is the log phases' order
            for k in ks:
                eq(n.get("/?k=" + k)[0], 200, "request k=" + k)
                grown(n, lambda s: keys(s).get(k, 0), 1)
            return grown(n, lambda s: sum(keys(s).values()), 2)

        def lent(want):
            def ready():
                s = n.stats()
                return s if total(s, "nginx_pcpu_keys_reusable", source="filter:k") == want else None
            return wait_for(ready, "%d keys to lend their series" % want, timeout=12)

        s = admit("a", "b")
        eq((keys(s), total(s, "nginx_pcpu_masters")), ({"a": 1, "b": 1}, 1), "a and b; one master")
        n.max_peers = 101
        n.write_conf()
        n.reload()
        lent(2)
        s = admit("c", "d")
        eq(keys(s), {"c": 1, "d": 1}, "the new zone: c and d on a's and b's series, from zero")
        old = n.master()
        os.kill(old, signal.SIGUSR2)
        new = wait_for(lambda: n.master() if n.master() not in (None, old) else None, "the new master")
        n.masters.append(new)
        wait_for(lambda: n.workers(new), "the new master's workers")
        eq(total(n.stats(), "nginx_pcpu_masters"), 2, "two masters during the upgrade")
        os.kill(old, signal.SIGQUIT)
        wait_for(lambda: gone(old), "the old master")
        lent(2)
        s = admit("e", "f")
        eq((keys(s), total(s, "nginx_pcpu_masters")), ({"e": 1, "f": 1}, 1),
           "the new master's zone: e and f on c's and d's series; one master")
    finally:
        n.stop()


REUSE_PEERS = """
    pcpu_stats on;
    pcpu_stats_expire 2s;
    pcpu_stats_max_peers 2;
    log_format peers "$arg_p";
    server {
        listen 127.0.0.1:%(port)d;
        server_name p.test;
        access_log logs/peers.log peers;
        location / { proxy_pass http://127.0.0.1:$arg_p; }
        location /k { pcpu_stats_filter k $arg_k max_keys=1; return 200; }
    }
%(backends)s"""


def test_reusepeers(module, build):
    """pcpu_stats_max_peers 2, pcpu_stats_expire 2s, one upstream name (proxy_pass
    with a variable: "127.0.0.1") and three peers: p1 and p2 admitted, p3 under
    the upstream's __other__ peer; p2 expires (p1 is met at each poll) and p3 takes
    its series: every upstream family from zero, p2 gone; p1 exact against the
    access log. Beside it, a filter with max_keys=1: b, refused twice in a row on
    one connection (one worker, which remembers its last value), is admitted on
    a's series once a expired, on that connection."""
    ports = [free_port() for _ in range(3)]
    backends = "".join("""
    server {
        listen 127.0.0.1:%d;
        pcpu_stats off;
        access_log off;
        location / { return 200; }
    }""" % p for p in ports)
    n = Nginx(module, REUSE_PEERS, backends=backends).start()
    try:
        def peers(s, family="nginx_http_upstream_responses"):
            got = {}
            for l, v in series(s, family):
                got[l["peer"]] = got.get(l["peer"], 0) + (v if isinstance(v, (int, float)) else v["count"])
            return got

        sent = [0, 0, 0]

        def send(i, times=1):
            for _ in range(times):
                eq(n.get("/?p=%d" % ports[i])[0], 200, "proxied to peer %d" % (i + 1))
                sent[i] += 1

        def logged(port):
            with open(os.path.join(n.prefix, "logs", "peers.log")) as f:
                return sum(1 for l in f if l.split()[0] == str(port))

        conn = http.client.HTTPConnection("127.0.0.1", n.port, timeout=30)

        def key(k):
            conn.request("GET", "/k?k=" + k)
            r = conn.getresponse()
            r.read()
            eq(r.status, 200, "request k=" + k)

        def keys(s):
            return {l["key"]: v for l, v in series(s, "nginx_http_filter_requests") if l.get("filter") == "k"}
        key("a")
        grown(n, lambda s: keys(s).get("a", 0), 1)
        key("b")
        key("b")
        p1, p2, p3 = ("127.0.0.1:%d" % p for p in ports)
        for i in range(3):  # one at a time: which peers are admitted is the log phases' order
            send(i)
            s = grown(n, lambda s: sum(peers(s).values()), i + 1)
        eq(peers(s), {p1: 1, p2: 1, "__other__": 1}, "p3 past pcpu_stats_max_peers 2")

        def ready():
            send(0)
            s = n.stats()
            return s if [total(s, "nginx_pcpu_keys_reusable", source=src) for src in ("peers", "filter:k")] \
                == [1, 1] else None
        s = wait_for(ready, "p2 and key a to lend their series", timeout=12)
        eq(keys(s), {"__other__": 2}, "b refused twice, a expired")
        key("b")
        s = grown(n, lambda s: keys(s).get("b", 0), 1)
        eq(keys(s), {"__other__": 2, "b": 1}, "b, the connection's last value, admitted on a's series")
        eq(total(s, "nginx_pcpu_keys_expired", source="peers"), 1, "p2 expired")
        send(2, 2)
        s = grown(n, lambda s: peers(s).get(p3, 0) + peers(s).get(p1, 0), 2 + sent[0])
        for fam in ("nginx_http_upstream_responses", "nginx_http_upstream_response_duration_seconds",
                    "nginx_http_upstream_received_bytes", "nginx_http_upstream_sent_bytes",
                    "nginx_http_upstream_last_seen_timestamp_seconds"):
            got = peers(s, fam)
            # counts and times: p3's 2 attempts; bytes and last seen: there
            want = 2 if fam in ("nginx_http_upstream_responses",
                                "nginx_http_upstream_response_duration_seconds") else got.get(p3)
            expect(p2 not in got and p3 in got and got[p3] == want,
                   "%s: p3 from zero on p2's series, p2 gone: %r" % (fam, got))
        # the access log's line may come just after the count
        wait_for(lambda: logged(ports[0]) == sent[0], "the access log's lines of p1")
        eq(peers(s)[p1], logged(ports[0]), "p1: every attempt of the access log")
        eq(peers(s)["__other__"], 1, "nothing more under __other__")
        eq([total(s, m, source="peers") for m in ("nginx_pcpu_keys", "nginx_pcpu_keys_reusable")], [2, 0],
           "peers held, reusable")
    finally:
        n.stop()


def test_stopped(module, build):
    """max_keys=1, pcpu_stats_expire 2s, two workers, one of them stopped in its
    event loop (SIGSTOP): a expires, and while the worker is stopped nothing is
    lent -- b counts under __other__, the other worker serving on; once it runs
    again (SIGCONT), a's series goes to b, from zero."""
    n = Nginx(module, HANDOVER.replace("max_keys=2", "max_keys=1"), max_peers=100).start()
    stopped = None
    try:
        def keys(s):
            return {l["key"]: v for l, v in series(s, "nginx_http_filter_requests") if l.get("filter") == "k"}

        def reusable(s):
            return total(s, "nginx_pcpu_keys_reusable", source="filter:k")

        eq(n.get("/?k=a")[0], 200, "request k=a")
        grown(n, lambda s: keys(s).get("a", 0), 1)
        stopped = n.stop_worker()
        s = wait_for(lambda: (lambda s: s if total(s, "nginx_pcpu_keys_expired", source="filter:k") == 1
                              else None)(n.stats()), "a to expire", timeout=12)
        # A second and more for the running worker to retire a and reckon:
        # without the stopped one, it would lend (this can only pass when
        # too short, never fail).
        time.sleep(3)
        eq(n.get("/?k=b")[0], 200, "request k=b, a worker stopped")
        s = grown(n, lambda s: keys(s).get("__other__", 0), 1)
        eq((keys(s), reusable(s)), ({"__other__": 1}, 0), "nothing lent while a worker is stopped")
        os.kill(stopped, signal.SIGCONT)
        stopped = None
        wait_for(lambda: reusable(n.stats()) == 1, "a to lend its series", timeout=12)
        eq(n.get("/?k=b")[0], 200, "request k=b")
        s = grown(n, lambda s: keys(s).get("b", 0), 1)
        eq(keys(s), {"__other__": 1, "b": 1}, "b on a's series, from zero")
    finally:
        if stopped:
            os.kill(stopped, signal.SIGCONT)
        n.stop()


TESTS = {"full": test_full, "rename": test_rename, "bounded": test_bounded, "expire": test_expire,
         "reuse": test_reuse, "reusepeers": test_reusepeers, "handover": test_handover,
         "stopped": test_stopped}


if __name__ == "__main__":
    sys.exit(harness.main(TESTS, __doc__, "robust_test"))
