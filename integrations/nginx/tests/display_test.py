#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""pcpu_stats_display off the event loop (issue 63), with a real nginx
(harness.py):

  display  the same exposition (text, gzip, JSON, HEAD) from nginx's
           default thread pool (the harness's status server), a pool the
           configuration names and the event loop (thread_pool=off); the
           scrape's work done by a thread of the pool, not the worker's
           own; bad parameters refused by nginx -t

Usage: display_test.py TEST MODULE_SO BUILD_DIR.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import Nginx, expect, eq, free_port, ungzip, steady  # noqa: E402

DISPLAY = """
    pcpu_stats on;
    pcpu_stats_filter k $arg_k;
    server {
        listen 127.0.0.1:%(port)d;
        location / { return 200 "d\\n"; }
    }
    server {
        listen 127.0.0.1:%(display_port)d;
        pcpu_stats off;
        location /inline { pcpu_stats_display thread_pool=off; }
        location /named { pcpu_stats_display thread_pool=pcpu; }
    }
"""


def refused(module, directive, want):
    """nginx -t refuses a pcpu_stats_display line, saying `want`."""
    n = Nginx(module, "server { listen 127.0.0.1:%d; location / { %s } }" % (free_port(), directive))
    r = n.run("-t", check=False)
    expect(r.returncode != 0 and want in r.stderr, "nginx -t with %r: %s" % (directive, r.stderr))


def pool_threads(pid):
    """The worker's threads but its first (nginx's pool threads)."""
    return [int(t) for t in os.listdir("/proc/%d/task" % pid) if int(t) != pid]


def test_display(module, build):
    n = Nginx(module, DISPLAY, main="thread_pool pcpu threads=1;", display_port=free_port(), workers=1)
    n.start()
    try:
        for i in range(50):
            n.get("/?k=key%d" % (i % 7))
        body = n.stats("prometheus").encode()
        st, h, default = n.get("/", port=n.status_port, headers={"Accept-Encoding": "identity"})
        eq(steady(default), steady(body), "the default pool's exposition")
        st, h, inline = n.get("/inline", port=n.display_port)
        eq(st, 200, "display in the event loop")
        eq(steady(inline), steady(body), "the event loop's exposition")
        st, h, named = n.get("/named", port=n.display_port, headers={"Accept-Encoding": "gzip"})
        eq(h.get("content-encoding"), "gzip", "gzip from the named pool")
        eq(steady(ungzip(named)), steady(body), "the named pool's exposition")
        st, h, js = n.get("/named", port=n.display_port, headers={"Accept": "application/json"})
        expect(st == 200 and js.startswith(b"{"), "JSON from the named pool")
        st, h, empty = n.get("/named", port=n.display_port, method="HEAD")
        expect(st == 200 and empty == b"", "HEAD from the named pool")
        # Who reads the segment: strace the worker's threads during one
        # scrape of each kind, and see which thread opened or read it.
        w = n.workers()[0]
        threads = pool_threads(w)
        expect(len(threads) >= 1 + 32, "the worker runs the pools' threads: %d" % len(threads))
        for path, in_pool in (("/named", True), ("/inline", False)):
            readers = harness.strace_readers(w, lambda: n.get(path, port=n.display_port))
            expect(readers, "someone read the segment for %s" % path)
            expect(all((t != w) == in_pool for t in readers),
                   "%s read by %s (worker %d)" % (path, readers, w))
    finally:
        n.stop()
    refused(module, "pcpu_stats_display bogus;", 'invalid parameter "bogus"')
    refused(module, "pcpu_stats_display thread_pool=nosuch;", 'unknown thread pool "nosuch"')
    refused(module, "pcpu_stats_display thread_pool=off off;", "invalid number of arguments")


TESTS = {"display": test_display}


if __name__ == "__main__":
    sys.exit(harness.main(TESTS, __doc__, "display_test"))
