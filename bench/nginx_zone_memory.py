#!/usr/bin/env python3
"""Segment bytes per nginx server zone and per filter key, at the CPU slots
PCPU_NSLOTS gives (issue 63: "the memory per key and per zone at 2, 64 and
256 possible CPUs").

For each slot count: nginx (2 workers, `pcpu_stats on`) with 1 server,
then with 41, three requests to each; the tree file's allocated bytes
(st_blocks) with the workers running, the difference over 40 servers is a
zone's bytes. Then one server with a filter given 1 and 2,001 distinct
keys, the difference over 2,000. pcpustat -j confirms the segment's slot
count. Run as root (the workers run as nobody) or as the user nginx runs
as; Debian's nginx and the module built by the project's CMake build:

    python3 bench/nginx_zone_memory.py [--module build/integrations/nginx/ngx_http_pcpu_module.so]
        [--pcpustat build/tools/pcpustat] [--slots 2,64,256]
"""
import argparse
import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

PORT_BASE = 18200


def request(port, host, path="/"):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        s.sendall(b"GET %s HTTP/1.0\r\nHost: %s\r\n\r\n" % (path.encode(), host.encode()))
        while s.recv(4096):
            pass
    finally:
        s.close()


def measure(a, root, slots, name, servers, port, requests):
    """The tree file's allocated bytes and slot count, nginx running with
    `servers` (the http{} body) after `requests` (host, path) were served."""
    d = os.path.join(root, name)
    os.makedirs(os.path.join(d, "logs"))
    conf = os.path.join(d, "nginx.conf")
    with open(conf, "w") as f:
        f.write("load_module %s;\nworker_processes 2;\npid %s/nginx.pid;\nerror_log %s/logs/error.log;\n"
                "events {}\nhttp {\n access_log off;\n pcpu_stats on;\n pcpu_stats_segment %s;\n%s\n}\n"
                % (a.module, d, d, name, servers))
    env = dict(os.environ, PCPU_NSLOTS=str(slots))
    subprocess.run([a.nginx, "-p", d, "-c", conf], check=True, env=env)
    try:
        time.sleep(0.5)
        for host, path in requests:
            request(port, host, path)
        time.sleep(1.5)  # the last requests' log phases
        files = glob.glob("/dev/shm/pcpu-*/pcpu.*.%s" % name)
        if len(files) != 1:
            sys.exit("nginx_zone_memory: segment files for %s: %r" % (name, files))
        used = os.stat(files[0]).st_blocks * 512
        out = subprocess.run([a.pcpustat, "-j", files[0]], capture_output=True, text=True, check=True).stdout
        return used, json.loads(out)["slots"]
    finally:
        subprocess.run([a.nginx, "-p", d, "-c", conf, "-s", "stop"], env=env)
        time.sleep(0.5)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--module", default=os.path.join(here, "..", "build", "integrations", "nginx",
                                                    "ngx_http_pcpu_module.so"))
    p.add_argument("--pcpustat", default=os.path.join(here, "..", "build", "tools", "pcpustat"))
    p.add_argument("--nginx", default="/usr/sbin/nginx")
    p.add_argument("--slots", default="2,64,256")
    a = p.parse_args()
    a.module = os.path.abspath(a.module)
    root = tempfile.mkdtemp(prefix="pcpu-zone-memory-")
    os.chmod(root, 0o755)
    tag = "zm%d" % os.getpid()
    try:
        print("| CPU slots (present CPUs: %d) | bytes per server zone | bytes per filter key |" % os.cpu_count())
        print("|---|---|---|")
        for k, slots in enumerate(int(s) for s in a.slots.split(",")):
            port = PORT_BASE + 4 * k

            def servers(n):
                return "\n".join(" server { listen 127.0.0.1:%d; server_name s%d.test; location / { return 200; } }"
                                 % (port, i) for i in range(n))

            def zones(n):
                return measure(a, root, slots, "%s-%d-z%d" % (tag, slots, n), servers(n), port,
                               [("s%d.test" % i, "/") for i in range(n) for _ in range(3)])

            def keys(n):
                body = " pcpu_stats_filter k $arg_k max_keys=5000;\n" + servers(1)
                return measure(a, root, slots, "%s-%d-k%d" % (tag, slots, n), body, port,
                               [("s0.test", "/?k=%d" % i) for i in range(n)])
            (z1, s1), (z41, s41) = zones(1), zones(41)
            (k1, _), (k2001, _) = keys(1), keys(2001)
            if s1 != slots or s41 != slots:
                sys.exit("nginx_zone_memory: the segment has %s slots, PCPU_NSLOTS=%d" % (s1, slots))
            print("| %d | %.0f | %.0f |" % (slots, (z41 - z1) / 40, (k2001 - k1) / 2000))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
