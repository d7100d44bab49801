#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""nginx's stream module, ngx_stream_pcpu_module, against a real nginx
(docs/nginx.md).

  stream_test.py TEST MODULE_SO BUILD_DIR

TEST:
  stream    sessions by server and status, bytes and session times, in the
            http module's tree and display, equal to the stream access log
            across a reload and a killed worker
Exit 0 when the test passed, 77 when it cannot run here (ctest: skipped).
"""
import os
import random
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import Nginx, eq, expect, free_port, total, wait_for  # noqa: E402


# ---- stream ----------------------------------------------------------------------------

STREAM_MODULE = "/usr/lib/nginx/modules/ngx_stream_module.so"  # libnginx-mod-stream

STREAM = """
load_module %(stream_core)s;
load_module %(stream_pcpu)s;
stream {
    log_format s '$server_port $status $bytes_received $bytes_sent $session_time';
    access_log %(prefix)s/logs/stream.log s;
    pcpu_stats on;
    server { listen 127.0.0.1:%(proxy_port)d; proxy_pass 127.0.0.1:%(echo_port)d; }
    server { listen 127.0.0.1:%(dead_port)d; proxy_pass 127.0.0.1:%(closed_port)d;
             proxy_connect_timeout 5s; }
    server { listen 127.0.0.1:%(echo_port)d; return "hello from the stream\\n"; }
    server { listen 127.0.0.1:%(off_port)d; pcpu_stats off; return "not counted\\n"; }
}
"""


def stream_session(port, send):
    """One TCP session: sends `send`, reads until nginx closes."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        try:
            if send:
                s.sendall(send)
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # nginx closed first (a `return` server, a 502): it read what it read
        try:
            while s.recv(65536):
                pass
        except ConnectionResetError:
            pass
    finally:
        s.close()


def stream_log(n):
    """{(server, status): (sessions, bytes received, bytes sent)} of the stream access log."""
    out = {}
    with open(os.path.join(n.prefix, "logs", "stream.log")) as f:
        for line in f:
            port, status, rx, tx, _ = line.split()
            k = ("127.0.0.1:%s" % port, status)
            c, r, t = out.get(k, (0, 0, 0))
            out[k] = (c + 1, r + int(rx), t + int(tx))
    return out


def test_stream(module, build):
    """ngx_stream_pcpu_module: sessions by server and status, bytes and
    session times, in the http module's tree and display, equal to the
    stream access log across a reload and a killed worker."""
    stream_pcpu = os.path.join(os.path.dirname(module), "ngx_stream_pcpu_module.so")
    expect(os.path.exists(STREAM_MODULE), "%s (libnginx-mod-stream: scripts/install-deps.sh)" % STREAM_MODULE)
    expect(os.path.exists(stream_pcpu), "%s built beside the http module" % stream_pcpu)
    ports = dict(proxy_port=free_port(), dead_port=free_port(), echo_port=free_port(),
                 off_port=free_port(), closed_port=free_port())
    n = Nginx(module, "pcpu_stats on;", main=STREAM % dict(ports, stream_core=STREAM_MODULE,
                                                           stream_pcpu=stream_pcpu,
                                                           prefix="%(prefix)s"), **ports)
    n.main = n.main.replace("%(prefix)s", n.prefix)
    n.write_conf()
    n.start()
    try:
        rnd = random.Random(7)
        sent = counted = 0
        for phase in range(3):
            for i in range(120):
                data = os.urandom(rnd.randrange(0, 3000))
                sent += len(data)
                stream_session(n.proxy_port, data)
                counted += 2  # the proxy's session and the echo server's behind it
                if i % 10 == 0:
                    stream_session(n.echo_port, b"x" * i)
                    counted += 1
                if i % 40 == 0:
                    stream_session(n.dead_port, b"")
                    stream_session(n.off_port, b"y")
                    counted += 1
            if phase == 0:
                n.reload()
            elif phase == 1:
                n.kill_worker()
        # nginx logs a session before it closes the client's connection,
        # but the proxy's client may see its close before the echo server
        # behind it logged: wait for every line.
        wait_for(lambda: sum(c for (srv, st), (c, r, t) in stream_log(n).items()
                             if srv != "127.0.0.1:%d" % n.off_port) >= counted,
                 "the stream access log's %d lines" % counted, timeout=60)
        log = stream_log(n)
        d = n.stats()
        for (srv, status), (c, rx, tx) in sorted(log.items()):
            if srv == "127.0.0.1:%d" % n.off_port:
                eq(total(d, "nginx_stream_sessions", server=srv), 0, "pcpu_stats off: not counted")
                continue
            eq(total(d, "nginx_stream_sessions", server=srv, status=status), c,
               "sessions of %s, status %s" % (srv, status))
        for srv in {k[0] for k in log if k[0] != "127.0.0.1:%d" % n.off_port}:
            rx = sum(v[1] for k, v in log.items() if k[0] == srv)
            tx = sum(v[2] for k, v in log.items() if k[0] == srv)
            c = sum(v[0] for k, v in log.items() if k[0] == srv)
            eq(total(d, "nginx_stream_received_bytes", server=srv), rx, "bytes received by " + srv)
            eq(total(d, "nginx_stream_sent_bytes", server=srv), tx, "bytes sent by " + srv)
            eq(total(d, "nginx_stream_session_duration_seconds", server=srv), c,
               "session time histogram count of " + srv)
        expect(0 < total(d, "nginx_stream_received_bytes", server="127.0.0.1:%d" % n.proxy_port) <= sent,
               "the proxy received some of what the clients sent (its backend may close first)")
        statuses = {k[1] for k in log}
        expect({"200", "502"} <= statuses, "statuses met: %s" % statuses)
        text = n.stats("prometheus")
        expect('nginx_stream_sessions_total{server="127.0.0.1:%d",status="502"}' % n.dead_port in text,
               "the stream families on the http display")
    finally:
        n.stop()


TESTS = {"stream": test_stream}

if __name__ == "__main__":
    sys.exit(harness.main(TESTS, __doc__, "stream_test"))
