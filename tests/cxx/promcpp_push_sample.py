#!/usr/bin/env python3
"""prometheus-cpp 1.0.1's own push example, unchanged, on pcpu's layer.

  promcpp_push_sample.py SRC_DIR BUILD_DIR CXX

push/tests/integration/sample_client.cc from prometheus-cpp's source
(Debian's source package, fetched as promcpp_peer.sh fetches it, or
$PCPU_PROMCPP_SRC) is compiled as it is against the layer's headers (first
on the include path) and linked with -lpcpu-prometheus-push
-lpcpu-prometheus -lpcpu-stats -lpcpu. It pushes to 127.0.0.1:9091, written into its
source, once a second, forever; so it runs in a network namespace of its
own (unshare -rn: a loopback nobody else uses), with a real Pushgateway
(Debian prometheus-pushgateway) listening there on 127.0.0.1:9091. Where
no user namespace can be made, the host's 9091 is used if it is free, and
the test fails if it is not.

What proves the pushes right: after the sample has printed "returnCode is
200" a few times it is stopped (SIGSTOP), while it sleeps; the Pushgateway
then holds exactly one group, {job="sample_client", instance=<hostname>}
(GetInstanceLabel), with time_running_seconds_total{label="value",
another_label="value", yet_another_label="value"} (COUNTER, its help) equal
to the number of lines printed, every one 200 -- each push carried the
counter's value at the time. Stopped in the middle of a push instead (the
Pushgateway one ahead of the lines), it is resumed and stopped again after
its next line: no timing is assumed.

Exit 77 only where prometheus-pushgateway cannot be installed.
"""
import fcntl
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from promcpp_push_common import HANG, Pushgateway, find_pushgateway, values  # noqa: E402

LINE = "returnCode is 200"
PORT = 9091  # sample_client.cc's


def loopback_up():
    """ip link set lo up, without iproute2: SIOCGIFFLAGS / SIOCSIFFLAGS."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    req = struct.pack("16sH14x", b"lo", 0)
    flags = struct.unpack("16sH14x", fcntl.ioctl(s, 0x8913, req))[1]
    fcntl.ioctl(s, 0x8914, struct.pack("16sH14x", b"lo", flags | 1))  # IFF_UP
    s.close()


def build(src, bin_dir, cxx, work):
    peer = os.environ.get("PCPU_PROMCPP_SRC") or subprocess.run(
        [os.path.join(src, "tests/cxx/promcpp_peer.sh"), "--fetch-only", src, bin_dir],
        check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    sample = os.path.join(peer, "push/tests/integration/sample_client.cc")
    if not os.path.isfile(sample):
        raise SystemExit("FAIL: %s not found" % sample)
    exe = os.path.join(work, "sample_client")
    libdirs = [os.path.join(bin_dir, "compat/prometheus-cpp"), bin_dir]
    cmd = [cxx, "-std=c++17", "-O1", "-g", "-pthread",
           "-I" + os.path.join(src, "compat/prometheus-cpp/include"), "-I" + os.path.join(src, "include"),
           "-I" + os.path.join(bin_dir, "include"), sample, "-o", exe] + ["-L" + d for d in libdirs] + [
           "-Wl,-rpath," + ":".join(libdirs), "-lpcpu-prometheus-push", "-lpcpu-prometheus", "-lpcpu"]
    print("+ " + " ".join(cmd))
    subprocess.run(cmd, check=True)
    return exe


class Lines:
    """The sample's stdout, read without blocking once it is stopped."""

    def __init__(self, proc):
        self.proc, self.buf, self.lines = proc, b"", []
        self.fd = proc.stdout.fileno()
        os.set_blocking(self.fd, False)

    def _read(self, wait):
        r, _, _ = select.select([self.fd], [], [], wait)
        if not r:
            return False
        try:
            chunk = os.read(self.fd, 65536)
        except BlockingIOError:
            return False
        if not chunk:
            raise SystemExit("FAIL: the sample exited (%r): %r" % (self.proc.wait(), self.lines))
        self.buf += chunk
        *done, self.buf = self.buf.split(b"\n")
        self.lines += [x.decode() for x in done]
        return True

    def wait_for(self, n):
        deadline = time.monotonic() + HANG
        while len(self.lines) < n:
            if time.monotonic() > deadline:
                raise SystemExit("FAIL: %d lines from the sample within %d s: %r" % (n, HANG, self.lines))
            self._read(1.0)

    def drain(self):
        while self._read(0):
            pass


def inner(exe, binary, tmp):
    pg = Pushgateway(binary, tmp, port=PORT)
    proc = subprocess.Popen([exe], stdout=subprocess.PIPE)
    try:
        out = Lines(proc)
        host = socket.gethostname()
        key = frozenset({"job": "sample_client", **({"instance": host} if host else {})}.items())
        want_series = frozenset(dict(key, label="value", another_label="value", yet_another_label="value").items())
        target = 3
        for attempt in range(10):
            out.wait_for(target)
            proc.send_signal(signal.SIGSTOP)
            out.drain()  # stopped: whatever it wrote is in the pipe
            n = len(out.lines)
            bad = [x for x in out.lines if x != LINE]
            if bad:
                raise SystemExit("FAIL: the sample printed %r" % bad)
            groups = pg.groups()
            if set(groups) != {key}:
                raise SystemExit("FAIL: groups %r, want only %r" % (list(groups), dict(key)))
            fam = groups[key]
            if sorted(fam) != ["time_running_seconds_total"]:
                raise SystemExit("FAIL: families %r" % sorted(fam))
            f = fam["time_running_seconds_total"]
            if (f["type"], f["help"]) != ("COUNTER", "How many seconds is this server running?"):
                raise SystemExit("FAIL: type/help %r" % ((f["type"], f["help"]),))
            got = values(f)
            if set(got) != {want_series}:
                raise SystemExit("FAIL: series %r, want %r" % (list(got), dict(want_series)))
            v = got[want_series]
            print("after %d lines: the Pushgateway holds %s" % (n, v))
            if v == str(n):
                print("ok   group %r, time_running_seconds_total = %s = the pushes printed" % (dict(key), v))
                print("PASS: %d pushes, all 200, the last value exact" % n)
                return
            if v != str(n + 1):
                raise SystemExit("FAIL: the Pushgateway holds %s after %d pushes" % (v, n))
            # Stopped between a push and its line: once more, after the next.
            proc.send_signal(signal.SIGCONT)
            target = n + 1
        raise SystemExit("FAIL: never stopped between two pushes in 10 tries")
    finally:
        proc.kill()
        proc.wait()
        pg.stop()


def main():
    if sys.argv[1] == "--inner":
        if sys.argv[4] == "netns":
            loopback_up()
        # Removed after: a run left its Pushgateway's folder in /tmp.
        with tempfile.TemporaryDirectory(prefix="pcpu-promcpp-sample.") as tmp:
            inner(sys.argv[2], sys.argv[3], tmp)
        return
    src, bin_dir, cxx = sys.argv[1:4]
    binary = find_pushgateway()
    work = os.path.join(bin_dir, "promcpp-peer")
    os.makedirs(work, exist_ok=True)
    exe = build(src, bin_dir, cxx, work)
    me = [sys.executable, os.path.abspath(__file__), "--inner", exe, binary]
    if subprocess.run(["unshare", "-rn", "true"], capture_output=True).returncode == 0:
        print("a network namespace of its own: the Pushgateway on its 127.0.0.1:%d" % PORT)
        sys.exit(subprocess.run(["unshare", "-rn"] + me + ["netns"]).returncode)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", PORT))
    except OSError:
        raise SystemExit("FAIL: no user namespace here (unshare -rn) and 127.0.0.1:%d, where the "
                         "unchanged sample pushes, is taken" % PORT)
    s.close()
    print("no user namespace: the host's 127.0.0.1:%d, free" % PORT)
    sys.exit(subprocess.run(me + ["host"]).returncode)


if __name__ == "__main__":
    main()
