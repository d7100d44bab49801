#!/usr/bin/env python3
"""prometheus::Gateway (libpcpu-prometheus-push) against a real Pushgateway.

  promcpp_push_test.py DRIVER

DRIVER (promcpp_push_driver.cpp) calls the Gateway API one step at a time;
after each step this script checks what arrived, exactly:

 - at a recording receiver (the wire): Push is POST, PushAdd PUT (as in
   prometheus-cpp 1.0.1), Delete*
   DELETE; the path of the grouping key, escaped (base64url for empty
   values and values holding '/', percent-encoding for the rest); the
   Content-Type; the basic authentication header; the body in the text
   format; one request per collectable; 200 returned, or the failing code;
 - at a real Pushgateway (Debian prometheus-pushgateway, 127.0.0.1, a free
   port, no persistence), through its /api/v1/metrics: Push replaces the
   metric names it sends only (two collectables of one group both stay),
   PushAdd replaces the group, per-collectable
   labels make groups of their own, Delete removes the job's group,
   DeleteForInstance the Gateway's, the async forms do the same, and the
   grouping labels arrive exactly as given (empty, '/', '.', spaces, '%',
   UTF-8, a job name with '/');
 - a second Pushgateway requiring basic authentication (--web.config.file,
   a bcrypt hash from htpasswd): the right credentials push, wrong or none
   get 401 and nothing arrives;
 - an invalid label name fails with -3 and sends nothing; an unreachable
   gateway returns -7 (CURLE_COULDNT_CONNECT), also through the futures;
 - an expired collectable is skipped; a Gateway destroyed while its
   AsyncPush() is under way completes it.

Exit 77 only where prometheus-pushgateway cannot be installed.
"""
import base64
import http.server
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from promcpp_push_common import Pushgateway, find_pushgateway, values  # noqa: E402

CT = "text/plain; version=0.0.4; charset=utf-8"
checks = 0


def ok(what):
    global checks
    checks += 1
    print("ok   " + what)


def expect(got, want, what):
    if got != want:
        raise SystemExit("FAIL: %s: got %r, want %r" % (what, got, want))
    ok("%s: %r" % (what, got))


class Driver:
    def __init__(self, exe):
        self.p = subprocess.Popen([exe], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def __call__(self, *fields):
        self.p.stdin.write("\t".join(str(f) for f in fields) + "\n")
        self.p.stdin.flush()
        answer = self.p.stdout.readline()
        if not answer:
            raise SystemExit("FAIL: the driver died at %r (status %r)" % (fields, self.p.wait()))
        answer = answer.rstrip("\n")
        if answer.startswith("error"):
            raise SystemExit("FAIL: driver: %s" % answer)
        return answer

    def close(self):
        self.p.stdin.close()
        if self.p.wait() != 0:
            raise SystemExit("FAIL: the driver exited with %d" % self.p.returncode)


class Receiver:
    """Records every request; answers 200 (202 to DELETE), or `status`."""

    def __init__(self):
        self.requests = []
        self.status = None
        rec = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def handle_one(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n).decode()
                rec.requests.append((self.command, self.path, dict(self.headers), body))
                code = rec.status or (202 if self.command == "DELETE" else 200)
                self.send_response(code)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")  # the library must not print it

            do_PUT = do_POST = do_DELETE = handle_one

            def log_message(self, *a):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def take(self):
        r, self.requests = self.requests, []
        return r


def b64(s):
    return base64.urlsafe_b64encode(s.encode()).decode() if s else "="


def wire(d, rec):
    """What goes out: methods, paths, headers, bodies, codes."""
    d("gw", "w", "127.0.0.1", rec.port, "wjob", "", "", "instance", "i1")
    expect(d("push", "w"), "200", "Push with nothing registered")
    expect(rec.take(), [], "requests for no collectable")
    d("reg", "w", "r1", "0")
    d("counter", "r1", "w_total", "3", "k", "v")
    d("reg", "w", "r2", "1", "shard", "s2")
    d("gauge", "r2", "w_gauge", "-1.5")
    for cmd, method in (("push", "POST"), ("pushadd", "PUT"), ("apush", "POST"), ("apushadd", "PUT")):
        expect(d(cmd, "w"), "200", cmd + " code")
        reqs = rec.take()
        expect([(m, p) for m, p, _, _ in reqs],
               [(method, "/metrics/job/wjob/instance/i1"), (method, "/metrics/job/wjob/instance/i1/shard/s2")],
               cmd + ": one request per collectable, method and grouping key")
        expect([h.get("Content-Type") for _, _, h, _ in reqs], [CT, CT], cmd + ": Content-Type")
        expect(["Authorization" in h for _, _, h, _ in reqs], [False, False], cmd + ": no credentials")
        expect(reqs[0][3], "# HELP w_total counter w_total\n# TYPE w_total counter\nw_total{k=\"v\"} 3\n",
               cmd + ": body of the first collectable")
        expect(reqs[1][3], "# HELP w_gauge gauge w_gauge\n# TYPE w_gauge gauge\nw_gauge -1.5\n",
               cmd + ": body of the second collectable")
    for cmd, path in (("delete", "/metrics/job/wjob"), ("deleteinst", "/metrics/job/wjob/instance/i1"),
                      ("adelete", "/metrics/job/wjob"), ("adeleteinst", "/metrics/job/wjob/instance/i1")):
        expect(d(cmd, "w"), "202", cmd + " code")
        expect([(m, p, b) for m, p, _, b in rec.take()], [("DELETE", path, "")], cmd + ": request")
    # Escaping on the wire.
    labels = {"path": "a/b", "empty": "", "sp": "x y?#%&=+@", "dot": ".", "dots": "..", "utf": "\u00e9t\u00e9"}
    args = [x for kv in sorted(labels.items()) for x in kv]
    d("gw", "e", "127.0.0.1", rec.port, "job/with/slash", "", "", *args)
    d("reg", "e", "r1", "0")
    expect(d("push", "e"), "200", "push with escaped labels")
    want = ("/metrics/job@base64/" + b64("job/with/slash") + "/dot@base64/" + b64(".") + "/dots@base64/" + b64("..")
            + "/empty@base64/=" + "/path@base64/" + b64("a/b") + "/sp/x%20y%3F%23%25%26%3D%2B%40"
            + "/utf/%C3%A9t%C3%A9")
    expect([p for _, p, _, _ in rec.take()], [want], "escaped grouping key on the wire")
    # Credentials.
    d("gw", "a", "127.0.0.1", rec.port, "ajob", "us:er", "p@ss:word")
    d("reg", "a", "r1", "0")
    expect(d("push", "a"), "200", "push with credentials")
    (_, _, h, _), = rec.take()
    expect(h.get("Authorization"), "Basic " + base64.b64encode(b"us:er:p@ss:word").decode(), "basic auth header")
    # A failing answer: the first failure stops Push, the async form sends all.
    rec.status = 500
    expect(d("push", "w"), "500", "Push when the receiver answers 500")
    expect(len(rec.take()), 1, "Push stops at the first failure: requests")
    expect(d("apushadd", "w"), "500", "AsyncPushAdd when the receiver answers 500")
    expect(len(rec.take()), 2, "AsyncPushAdd sends every collectable: requests")
    rec.status = None
    # An invalid label name: -3, nothing sent.
    d("gw", "bad", "127.0.0.1", rec.port, "bjob", "", "", "bad-name", "v")
    d("reg", "bad", "r1", "0")
    for cmd in ("push", "pushadd", "apush", "apushadd", "deleteinst", "adeleteinst"):
        expect(d(cmd, "bad"), "-3", cmd + " with an invalid label name")
    d("reg", "w", "r3", "1", "0bad", "v")
    expect(d("push", "w"), "-3", "push with a collectable's invalid label name")
    rec.take()
    expect(d("delete", "bad"), "202", "Delete (the job's group: no label) still works")
    rec.take()
    # An expired collectable is skipped.
    d("gw", "x", "127.0.0.1", rec.port, "xjob", "", "")
    d("reg", "x", "rx", "0")
    d("reg", "x", "ry", "0")
    d("drop", "rx")
    expect(d("push", "x"), "200", "push with one collectable expired")
    expect(len(rec.take()), 1, "requests with one collectable expired")
    # Many threads pushing through one Gateway while another registers.
    expect(d("concurrent", "x", 4, 25), "0", "4 threads x 25 Push/AsyncPushAdd beside RegisterCollectable: failures")
    reqs = rec.take()
    expect((len(reqs), {p for _, p, _, _ in reqs}), (100, {"/metrics/job/xjob"}), "requests from the threads")
    expect(d("apushgone", "x"), "200", "AsyncPush of a Gateway destroyed before its future is read")
    expect(len(rec.take()), 1, "requests of the destroyed Gateway's AsyncPush")


def group(**labels):
    return frozenset(labels.items())


def pushgateway(d, pg):
    gl = dict(job="pjob", instance="i1")
    d("gw", "g1", "127.0.0.1", pg.port, "pjob", "", "", "instance", "i1")
    d("gw", "g2", "127.0.0.1", pg.port, "pjob", "", "", "instance", "i1")
    d("reg", "g1", "p1", "0")
    d("counter", "p1", "a_total", "5")
    d("counter", "p1", "b_total", "7", "k", "v")
    d("reg", "g2", "p2", "0")
    d("counter", "p2", "c_total", "3")
    expect(d("push", "g1"), "200", "g1 Push")
    g = pg.groups()
    expect(set(g), {group(**gl)}, "groups after Push")
    fam = g[group(**gl)]
    expect(sorted(fam), ["a_total", "b_total"], "families after Push")
    expect(values(fam["a_total"]), {group(**gl): "5"}, "a_total")
    expect(values(fam["b_total"]), {group(k="v", **gl): "7"}, "b_total")
    expect((fam["b_total"]["type"], fam["b_total"]["help"]), ("COUNTER", "counter b_total"), "b_total type, help")
    expect(d("push", "g2"), "200", "g2 Push")
    expect(sorted(pg.groups()[group(**gl)]), ["a_total", "b_total", "c_total"], "Push (POST) adds c_total")
    expect(d("pushadd", "g2"), "200", "g2 PushAdd")
    expect(sorted(pg.groups()[group(**gl)]), ["c_total"], "PushAdd (PUT) replaces the group")
    d("counter", "p1", "a_total", "1")
    expect(d("apush", "g1"), "200", "g1 AsyncPush")
    fam = pg.groups()[group(**gl)]
    expect(sorted(fam), ["a_total", "b_total", "c_total"], "AsyncPush adds")
    expect(values(fam["a_total"]), {group(**gl): "6"}, "a_total after the increment")
    expect(d("apushadd", "g2"), "200", "g2 AsyncPushAdd")
    expect(sorted(pg.groups()[group(**gl)]), ["c_total"], "AsyncPushAdd replaces the group")
    # Two collectables of one Gateway in one group: Push keeps both (a PUT
    # per collectable would leave only the last one's metrics).
    d("reg", "g1", "p2", "0")
    expect(d("push", "g1"), "200", "g1 Push of two collectables")
    expect(sorted(pg.groups()[group(**gl)]), ["a_total", "b_total", "c_total"],
           "Push of two collectables to one group keeps both")
    # Per-collectable labels: a group each.
    d("gw", "g3", "127.0.0.1", pg.port, "sjob", "", "")
    d("reg", "g3", "p3", "1", "shard", "s1")
    d("reg", "g3", "p4", "1", "shard", "s2")
    d("gauge", "p3", "depth", "11")
    d("gauge", "p4", "depth", "-4")
    expect(d("push", "g3"), "200", "g3 Push")
    g = pg.groups()
    for shard, v in (("s1", "11"), ("s2", "-4")):
        key = group(job="sjob", shard=shard)
        expect(values(g[key]["depth"]), {group(job="sjob", shard=shard): v}, "group shard=%s" % shard)
    # Delete: the job's group without labels; DeleteForInstance: the Gateway's.
    d("gw", "g4", "127.0.0.1", pg.port, "pjob", "", "")
    d("reg", "g4", "p5", "0")
    d("counter", "p5", "plain_total", "1")
    expect(d("push", "g4"), "200", "g4 Push (group {job} alone)")
    expect(group(job="pjob") in pg.groups(), True, "group {job=pjob} present")
    expect(d("delete", "g1"), "202", "g1 Delete")
    g = pg.groups_once(lambda g: group(job="pjob") not in g)
    expect((group(job="pjob") in g, group(**gl) in g), (False, True), "Delete removes {job} only")
    expect(d("deleteinst", "g1"), "202", "g1 DeleteForInstance")
    expect(group(**gl) in pg.groups_once(lambda g: group(**gl) not in g), False,
           "DeleteForInstance removes {job, instance}")
    expect(d("push", "g2"), "200", "g2 Push again")
    expect(d("push", "g4"), "200", "g4 Push again")
    expect(d("adeleteinst", "g2"), "202", "g2 AsyncDeleteForInstance")
    expect(d("adelete", "g2"), "202", "g2 AsyncDelete")
    g = pg.groups_once(lambda g: group(job="pjob") not in g and group(**gl) not in g)
    expect((group(job="pjob") in g, group(**gl) in g), (False, False), "the async deletes")
    # Grouping labels needing escaping arrive exactly.
    labels = {"path": "a/b", "empty": "", "sp": "x y?#%&=+@", "dot": ".", "dots": "..", "utf": "\u00e9t\u00e9"}
    args = [x for kv in sorted(labels.items()) for x in kv]
    d("gw", "e", "127.0.0.1", pg.port, "job/with/slash", "", "", *args)
    d("reg", "e", "p6", "1", "more", "c/d")
    d("counter", "p6", "esc_total", "2")
    expect(d("push", "e"), "200", "push with escaped labels")
    want = dict(labels, job="job/with/slash", more="c/d")
    got = [dict(k) for k in pg.groups() if dict(k).get("job") == "job/with/slash"]
    expect(got, [want], "grouping labels needing escaping (the empty one kept in the key)")
    fam = pg.groups()[frozenset(want.items())]
    # The series: an empty label value is no label in Prometheus' data model.
    series = frozenset((k, v) for k, v in want.items() if v)
    expect(values(fam["esc_total"]), {series: "2"}, "esc_total in that group")


def auth(d, binary, tmp):
    for tool in ("htpasswd",):
        if not shutil.which(tool):
            raise SystemExit("FAIL: %s not installed: run scripts/install-deps.sh" % tool)
    hashed = subprocess.run(["htpasswd", "-nbBC", "5", "pushuser", "pushpass"], check=True,
                            capture_output=True, text=True).stdout.strip().split(":", 1)[1]
    cfg = os.path.join(tmp, "web.yml")
    with open(cfg, "w") as f:
        f.write("basic_auth_users:\n  pushuser: %s\n" % hashed)
    pg = Pushgateway(binary, tmp, web_config=cfg, auth=("pushuser", "pushpass"))
    try:
        d("gw", "ok", "127.0.0.1", pg.port, "authjob", "pushuser", "pushpass")
        d("gw", "wrong", "127.0.0.1", pg.port, "authjob", "pushuser", "nope")
        d("gw", "none", "127.0.0.1", pg.port, "authjob", "", "")
        for g in ("ok", "wrong", "none"):
            d("reg", g, "ra_" + g, "0")
            d("counter", "ra_" + g, "auth_" + g + "_total", "1")
        expect(d("push", "wrong"), "401", "Push with a wrong password")
        expect(d("push", "none"), "401", "Push without credentials")
        expect(d("delete", "none"), "401", "Delete without credentials")
        expect(pg.groups(), {}, "nothing arrived")
        expect(d("push", "ok"), "200", "Push with the right credentials")
        expect(sorted(pg.groups()[group(job="authjob")]), ["auth_ok_total"], "what arrived")
        expect(d("delete", "ok"), "202", "Delete with the right credentials")
        expect(pg.groups_once(lambda g: not g), {}, "deleted")
    finally:
        pg.stop()


def unreachable(d):
    # A bound socket that does not listen: connections are refused, at once.
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    try:
        d("gw", "u", "127.0.0.1", port, "ujob", "", "")
        d("reg", "u", "ru", "0")
        for cmd in ("push", "pushadd", "delete", "deleteinst", "apush", "apushadd", "adelete", "adeleteinst"):
            expect(d(cmd, "u"), "-7", cmd + " to an unreachable gateway")
    finally:
        s.close()


def main():
    exe = sys.argv[1]
    binary = find_pushgateway()
    tmp = tempfile.mkdtemp(prefix="pcpu-promcpp-push.")
    d = Driver(exe)
    rec = Receiver()
    pg = None
    try:
        expect(d("instance", "myhost"), "instance=myhost;", "GetInstanceLabel(\"myhost\")")
        expect(d("instance", ""), "empty", "GetInstanceLabel(\"\")")
        wire(d, rec)
        unreachable(d)
        pg = Pushgateway(binary, tmp)
        pushgateway(d, pg)
        auth(d, binary, tmp)
        d.close()
    finally:
        if pg:
            pg.stop()
        if d.p.poll() is None:
            d.p.kill()
        rec.srv.shutdown()
    shutil.rmtree(tmp, ignore_errors=True)
    print("PASS: %d checks" % checks)


if __name__ == "__main__":
    main()
