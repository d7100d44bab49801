"""What the prometheus::Gateway tests share: the Pushgateway (Debian
prometheus-pushgateway) found, started on 127.0.0.1 without persistence,
waited for, and read back through its /api/v1/metrics."""
import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

# Generous bounds: the machine may be loaded; nothing here measures time.
HANG = 120


def find_pushgateway():
    """The binary; exit 1 (FAIL) when the Debian package could be installed
    but is not, 77 (skip) only where no package exists."""
    for name in ("prometheus-pushgateway", "pushgateway"):
        p = shutil.which(name)
        if p:
            return p
    installable = False
    if shutil.which("apt-cache"):
        out = subprocess.run(["apt-cache", "policy", "prometheus-pushgateway"], capture_output=True,
                             text=True).stdout
        installable = "Candidate:" in out and "Candidate: (none)" not in out
    if installable:
        print("FAIL: prometheus-pushgateway is not installed but the Debian package is available: "
              "run scripts/install-deps.sh")
        sys.exit(1)
    print("SKIP: no prometheus-pushgateway package can be installed here; the Gateway tests need it")
    sys.exit(77)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def get(url, auth=None, timeout=60):
    req = urllib.request.Request(url)
    if auth:
        token = base64.b64encode(("%s:%s" % auth).encode()).decode()
        req.add_header("Authorization", "Basic " + token)
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read()


class Pushgateway:
    """A Pushgateway on 127.0.0.1:port (a free one unless given), its log in
    tmp; `web_config`: its --web.config.file."""

    def __init__(self, binary, tmp, port=None, web_config=None, auth=None):
        self.auth = auth
        for attempt in range(5):
            self.port = port or free_port()
            self.base = "http://127.0.0.1:%d" % self.port
            self.log = os.path.join(tmp, "pushgateway-%d.log" % self.port)
            args = [binary, "--web.listen-address=127.0.0.1:%d" % self.port, "--persistence.file=",
                    "--log.level=warn"]
            if web_config:
                args.append("--web.config.file=" + web_config)
            with open(self.log, "w") as log:
                self.proc = subprocess.Popen(args, stdout=log, stderr=log)
            if self._ready():
                return
            if port:
                break  # a fixed port: no other to try
        raise SystemExit("FAIL: the Pushgateway did not start: %s" % open(self.log).read()[-2000:])

    def _ready(self):
        deadline = time.monotonic() + HANG
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False  # the port was taken meanwhile: another try
            try:
                status, _ = get(self.base + "/-/ready", self.auth, timeout=10)
                if status == 200:
                    return True
            except OSError as e:
                if getattr(e, "code", None) == 401:
                    raise SystemExit("FAIL: the Pushgateway refuses the test's own credentials")
            time.sleep(0.2)
        self.proc.kill()
        raise SystemExit("FAIL: the Pushgateway not ready within %d s: %s" % (HANG, open(self.log).read()[-2000:]))

    def groups(self):
        """{frozenset(grouping labels): {family name: family}}, the
        Pushgateway's push_time_seconds and push_failure_time_seconds
        families left out (checked to be there and, for the failure one, 0)."""
        _, body = get(self.base + "/api/v1/metrics", self.auth)
        d = json.loads(body)
        if d.get("status") != "success":
            raise SystemExit("FAIL: /api/v1/metrics: %r" % d)
        out = {}
        for g in d["data"]:
            labels = g.pop("labels")
            if g.pop("last_push_successful", None) is not True:
                raise SystemExit("FAIL: group %r: last push not successful: %r" % (labels, g))
            for k in ("push_time_seconds", "push_failure_time_seconds"):
                if k not in g:
                    raise SystemExit("FAIL: group %r lacks %s" % (labels, k))
            g.pop("push_time_seconds")
            if g.pop("push_failure_time_seconds")["metrics"][0]["value"] != "0":
                raise SystemExit("FAIL: group %r had a failed push" % labels)
            out[frozenset(labels.items())] = g
        return out

    def groups_once(self, done):
        """groups() once done(groups) holds, or as last read after HANG
        seconds. For reads after a DELETE: the Pushgateway answers it 202
        Accepted and applies it afterwards, from its write queue, whereas a
        push is answered only once applied. Reading at once raced the
        queue (seen once in CI: the {job} group still there)."""
        deadline = time.monotonic() + HANG
        while True:
            g = self.groups()
            if done(g) or time.monotonic() >= deadline:
                return g
            time.sleep(0.05)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=HANG)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def values(family):
    """{frozenset(series labels): value string} of one family; labels with
    an empty value left out (no label, in Prometheus' data model: the
    Pushgateway adds instance="" to series without an instance)."""
    return {frozenset((k, v) for k, v in m["labels"].items() if v): m["value"] for m in family["metrics"]}
