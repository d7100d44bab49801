#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""nginx's pcpu module: client-chosen upstream names stay bounded with
pcpu_stats_expire, and an expired name frees its place (issue 63: series not
seen for a configurable time expire, every label source bounded;
docs/nginx.md, "Expiry" and "Bounds").

  names_test.py TEST MODULE_SO BUILD_DIR

TEST:
  reusenames  pcpu_stats_max_upstreams 2: a third name counts under
              upstream="__other__" until a name's peers have all expired;
              then it is admitted under its own name, from zero, and the
              expired name met again is a new name (past the bound); with
              the peers at their bound and below it
Exit 0 when the test passed, 77 when it cannot run here (ctest: skipped).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import Nginx, eq, expect, free_port, grown, series, total, wait_for  # noqa: E402

REUSE_NAMES = """
    pcpu_stats on;
    pcpu_stats_expire 2s;
    pcpu_stats_max_upstreams 2;
    pcpu_stats_max_peers %(max_peers)d;
    log_format names "$arg_h";
    server {
        listen 127.0.0.1:%(port)d;
        access_log logs/names.log names;
        # Client-chosen names: the upstream is the host ($arg_h), its one
        # peer host:port.
        location / { proxy_pass http://$arg_h:%(backend)d; }
    }
    server {
        listen %(backend)d;
        pcpu_stats off;
        access_log off;
        location / { return 200; }
    }
"""


def test_reusenames(module, build):
    for max_peers in (2, 10):
        reusenames(module, max_peers)


def reusenames(module, max_peers):
    """pcpu_stats_max_upstreams 2, pcpu_stats_expire 2s, names u1, u2, u3
    (127.0.0.1-3), one peer each: u1 and u2 admitted, u3 under
    upstream="__other__"; u1 expires (u2 met at each poll), its name's place goes
    to u3, admitted under its own name, from zero -- with pcpu_stats_max_peers 2
    on u1's peer's series; with 10 on a new one, u1's peer retired with its name
    (hidden, its series waiting for a peer past the bound); u1 met again is a new
    name, past the bound: "__other__". Every count exact against the access
    log."""
    n = Nginx(module, REUSE_NAMES, backend=free_port(), max_peers=max_peers).start()
    try:
        u = [None] + ["127.0.0.%d" % i for i in (1, 2, 3)]
        sent = [0, 0, 0, 0]

        def send(i):
            eq(n.get("/?h=" + u[i])[0], 200, "proxied as u%d" % i)
            sent[i] += 1

        def names(s):
            got = {}
            for l, v in series(s, "nginx_http_upstream_responses"):
                got[l["upstream"]] = got.get(l["upstream"], 0) + v
            return got

        def logged(h):
            with open(os.path.join(n.prefix, "logs", "names.log")) as f:
                return sum(1 for l in f if l.split()[0] == h)

        for i in (1, 2, 3):  # one at a time: the names admitted are the log phases' order
            send(i)
            s = grown(n, lambda s: sum(names(s).values()), i)
        eq(names(s), {u[1]: 1, u[2]: 1, "__other__": 1}, "u3 past pcpu_stats_max_upstreams 2")
        eq(total(s, "nginx_pcpu_series_refused", reason="upstreams"), 1, "u3 refused for the bound")

        def ready():
            send(2)
            s = n.stats()
            return s if [total(s, "nginx_pcpu_keys_reusable", source=src) for src in ("upstreams", "peers")] \
                == [1, 1] else None
        s = wait_for(ready, "u1's name and peer to be free (max_peers %d)" % max_peers, timeout=12)
        eq(total(s, "nginx_pcpu_keys_expired", source="peers"), 1, "u1's peer expired")
        send(3)
        send(3)
        s = grown(n, lambda s: names(s).get(u[3], 0), 2)
        got = names(s)
        expect(u[1] not in got and got.get(u[3]) == 2 and got.get("__other__") == 1,
               "max_peers %d: u3 admitted in u1's place, from zero: %r" % (max_peers, got))
        eq(total(s, "nginx_pcpu_keys", source="peers"), 2 if max_peers == 2 else 3,
           "peers: u1's lent at the bound, kept below it")
        send(1)
        s = grown(n, lambda s: names(s).get("__other__", 0), 2)
        eq(names(s).get("__other__"), 2, "u1 met again: a new name, past the bound")
        wait_for(lambda: logged(u[2]) == sent[2], "the access log's lines of u2")
        wait_for(lambda: logged(u[3]) == sent[3], "the access log's lines of u3")
        # u3's first request counted under __other__
        eq([names(s).get(u[i]) for i in (2, 3)], [logged(u[2]), logged(u[3]) - 1], "u2, u3: the access log's")
        eq(sum(names(s).values()), sum(sent) - 1, "every attempt counted once, but u1's first (its series lent)")
        eq([total(s, m, source="upstreams") for m in ("nginx_pcpu_keys", "nginx_pcpu_keys_reusable")],
           [2, 0], "upstream names held, reusable")
        eq(total(s, "nginx_pcpu_series_refused", reason="upstreams"), 2, "u3 and u1 again refused")
    finally:
        n.stop()


TESTS = {"reusenames": test_reusenames}


if __name__ == "__main__":
    sys.exit(harness.main(TESTS, __doc__, "names_test"))
