#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The README's nginx commands, as a newcomer runs them on Debian (issue 63).

  setup_test.py TEST MODULE_SO BUILD_DIR

TEST:
  quickstart  the README's nginx commands: its components install a handful
            of files, its load_module line and conf.d file pass nginx -t in
            Debian's nginx.conf as written, and a running nginx reloaded
            with them loads the module and counts
  install   cmake --install: the module in <prefix>/lib/nginx/modules finds
            the libraries installed beside it; nginx loads it
  configure the README's configure line in a folder without nginx-dev says
            why the module is not built, and its next build configures
            again once nginx-dev is there
Exit 0 when the test passed, 77 when it cannot run here (ctest: skipped).
"""
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import (SKIP, eq, expect, free_port, gone, wait_for)  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


# ---- quickstart, configure: the README's commands ---------------------------------

ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))


def readme_nginx_blocks():
    """The fenced blocks of the README's nginx section: [(info, text)]."""
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    sec = text[text.index("\n## nginx\n"):]
    sec = sec[:sec.index("\n## ", 1)]
    return re.findall(r"^```(\S*)[^\n]*\n(.*?)^```$", sec, re.M | re.S)


def test_quickstart(module, build):
    """The README's nginx quick start on Debian's nginx.conf: its components
    install the module and the libraries it loads (a handful of files, not
    the whole project), its load_module line and its conf.d file, as written,
    pass `nginx -t` inside Debian's nginx.conf, and a running nginx that gets
    them with `nginx -s reload` loads the module and counts."""
    if not os.path.exists("/etc/nginx/nginx.conf"):
        print("no /etc/nginx/nginx.conf (Debian's nginx package)")
        return SKIP
    blocks = readme_nginx_blocks()
    sh = "\n".join(t for info, t in blocks if info == "sh")
    conf = [t for info, t in blocks if info == "nginx"]
    eq(len(conf), 1, "one nginx block in the README's nginx section")
    comps = re.search(r"^for c in ([\w ]+); do sudo cmake --install build --component \$c; done$", sh, re.M)
    expect(comps, "the README installs components:\n" + sh)
    load = re.search(r"^echo '(load_module (\S+);)' \|\n\s+sudo tee (/etc/nginx/modules-enabled/\S+\.conf)$",
                     sh, re.M)
    expect(load, "the README's load_module line:\n" + sh)
    t = tempfile.mkdtemp(prefix="pcpu-nginx-quickstart-")
    harness.PREFIXES.append(t)
    prefix = os.path.join(t, "usr", "local")
    for c in comps.group(1).split():
        r = subprocess.run(["cmake", "--install", build, "--prefix", prefix, "--component", c],
                           capture_output=True, text=True)
        expect(r.returncode == 0, "cmake --install --component %s: %s" % (c, r.stderr[-2000:]))
    files = sorted(os.path.relpath(os.path.join(d, f), t) for d, _, fs in os.walk(t) for f in fs)
    expect(len(files) <= 6, "a handful of files for the module: %s" % files)
    so = load.group(2)
    expect(so.startswith("/usr/local/"), so)
    expect(os.path.exists(os.path.join(t, so.lstrip("/"))), "the load_module path is installed: %s" % files)
    # Debian's nginx.conf, its folders moved into t.
    etc = os.path.join(t, "etc")
    for d in ("modules-enabled", "conf.d", "sites-enabled", "logs", "shm"):
        os.makedirs(os.path.join(etc, d))
    with open("/etc/nginx/nginx.conf") as f:
        main = f.read()
    for d in ("modules-enabled", "conf.d", "sites-enabled"):
        main = main.replace("/etc/nginx/%s/" % d, "%s/%s/" % (etc, d))
    main = re.sub(r"^pid .*;$", "pid %s/nginx.pid;" % etc, main, flags=re.M)
    main = main.replace("/var/log/nginx/", etc + "/logs/")
    with open(os.path.join(etc, "nginx.conf"), "w") as f:
        f.write(main)
    with open(os.path.join(etc, "modules-enabled", os.path.basename(load.group(3))), "w") as f:
        f.write(load.group(1).replace(so, os.path.join(t, so.lstrip("/"))) + "\n")
    with open(os.path.join(etc, "conf.d", "pcpu.conf"), "w") as f:
        f.write(conf[0])
    site = ""
    if os.path.exists("/etc/nginx/sites-enabled/default"):
        with open("/etc/nginx/sites-enabled/default") as f:
            site = f.read()
        with open(os.path.join(etc, "sites-enabled", "default"), "w") as f:
            f.write(site)
    env = dict(os.environ, PCPU_SEGMENT_DIR=os.path.join(etc, "shm"))
    nginx = [harness.NGINX, "-c", os.path.join(etc, "nginx.conf")]
    r = subprocess.run(nginx + ["-t"], capture_output=True, text=True, env=env)
    expect(r.returncode == 0, "nginx -t with the README's file in Debian's nginx.conf:\n" + r.stderr)
    # Run it as an operator does: nginx running without the module, then the
    # two files and `nginx -t && nginx -s reload` (the module loaded by a
    # reload), on ports of its own.
    port, site_port = free_port(), free_port()
    enabled = os.path.join(etc, "modules-enabled", os.path.basename(load.group(3)))
    os.rename(enabled, enabled + ".off")
    os.unlink(os.path.join(etc, "conf.d", "pcpu.conf"))
    with open(os.path.join(etc, "sites-enabled", "default"), "w") as f:
        f.write("server { listen 127.0.0.1:%d default_server; location / { return 200; } }\n"
                % site_port)
    r = subprocess.run(nginx, capture_output=True, text=True, env=env)
    expect(r.returncode == 0, "nginx: " + r.stderr)
    pid = int(open(os.path.join(etc, "nginx.pid")).read())
    try:
        import urllib.request

        def get(p, path):
            try:
                return urllib.request.urlopen("http://127.0.0.1:%d%s" % (p, path), timeout=5).read().decode()
            except OSError:
                return None
        wait_for(lambda: get(site_port, "/") is not None, "nginx to answer")
        os.rename(enabled + ".off", enabled)
        with open(os.path.join(etc, "conf.d", "pcpu.conf"), "w") as f:
            f.write(conf[0].replace("127.0.0.1:8080", "127.0.0.1:%d" % port))
        for args in (["-t"], ["-s", "reload"]):
            r = subprocess.run(nginx + args, capture_output=True, text=True, env=env)
            expect(r.returncode == 0, "nginx %s: %s" % (" ".join(args), r.stderr))
        wait_for(lambda: get(port, "/metrics") is not None, "the reload to load the module")
        for i in range(4):
            get(site_port, "/")
        wait_for(lambda: (lambda b: b if b and re.search(
            r'nginx_http_requests_total\{server="_",code="200"\} 4', b) else None)(get(port, "/metrics")),
            "4 requests on /metrics")
        expect(not gone(pid), "the same master")
        print("quickstart: %d files installed; loaded by a reload of Debian's nginx.conf, it counts" % len(files))
    finally:
        os.kill(pid, signal.SIGQUIT)
        wait_for(lambda: gone(pid), "nginx to quit")


def test_configure(module, build):
    """A build folder configured without nginx-dev (PCPU_NGINX_SRC missing)
    says so, and its next build configures again once it appears, with the
    module's target."""
    ninja = shutil.which("ninja") or shutil.which("ninja-build")
    if not ninja:
        return SKIP
    t = tempfile.mkdtemp(prefix="pcpu-nginx-configure-")
    harness.PREFIXES.append(t)
    src = os.path.join(t, "nginx", "src")
    b = os.path.join(t, "build")
    # The README's configure line, as written but for its folders.
    sh = "\n".join(t for info, t in readme_nginx_blocks() if info == "sh")
    line = re.search(r"^(cmake -S \. -B build [^&\n]*?)\s*&&", sh, re.M)
    expect(line, "the README's configure line:\n" + sh)
    args = shlex.split(line.group(1))
    args[args.index("-S") + 1], args[args.index("-B") + 1] = ROOT, b
    r = subprocess.run(args + ["-DPCPU_NGINX_SRC=" + src], capture_output=True, text=True)
    expect(r.returncode == 0, "configure: " + r.stdout[-2000:] + r.stderr[-2000:])
    expect("nginx module: not built: no %s/configure" % src in r.stdout, "said why:\n" + r.stdout[-3000:])

    def has_target():
        return subprocess.run([ninja, "-C", b, "-t", "query", "ngx_http_pcpu_module"],
                              capture_output=True).returncode == 0
    expect(not has_target(), "no module target without nginx-dev")
    # nginx-dev appears (here: the build's nginx tree where it was looked for).
    os.makedirs(os.path.dirname(src))
    os.symlink(os.path.realpath(os.path.join("/usr/share/nginx/src")), src)
    r = subprocess.run([ninja, "-C", b, "build.ninja"], capture_output=True, text=True)
    expect(r.returncode == 0 and "nginx module: built against" in r.stdout,
           "the next build configured again:\n" + r.stdout[-3000:] + r.stderr[-2000:])
    expect(has_target(), "the module's target once nginx-dev is there")
    print("configure: the module's target appeared once nginx-dev did")


# ---- install ---------------------------------------------------------------------------

def test_install(module, build):
    """`cmake --install` puts the module in <prefix>/lib/nginx/modules, finding
    the libraries installed beside it (not the build tree's), and nginx
    loads it from there."""
    prefix = tempfile.mkdtemp(prefix="pcpu-install-")
    try:
        r = subprocess.run(["cmake", "--install", build, "--prefix", prefix], capture_output=True,
                           text=True)
        expect(r.returncode == 0, "cmake --install: %s" % r.stderr[-2000:])
        so = os.path.join(prefix, "lib", "nginx", "modules", "ngx_http_pcpu_module.so")
        expect(os.path.exists(so), "installed in lib/nginx/modules")
        dyn = subprocess.run(["readelf", "-d", so], capture_output=True, text=True).stdout
        expect(build not in dyn, "no build-tree path left in the installed module:\n" + dyn)
        env = dict(os.environ)
        env.pop("LD_LIBRARY_PATH", None)
        ldd = subprocess.run(["ldd", so], capture_output=True, text=True, env=env).stdout
        for lib in ("libpcpu-stats.so.1", "libpcpu.so.1"):
            line = next((l for l in ldd.splitlines() if lib in l), "")
            expect(prefix in line or "/usr/lib" in line,
                   "%s found where installed: %s" % (lib, line))
        conf = os.path.join(prefix, "nginx.conf")
        with open(conf, "w") as f:
            f.write("load_module %s;\nevents {}\nhttp { pcpu_stats on; }\n" % so)
        r = subprocess.run(["/usr/sbin/nginx", "-t", "-q", "-g", "error_log /dev/null; pid %s/pid;" % prefix,
                            "-c", conf], capture_output=True, text=True, env=env)
        expect(r.returncode == 0, "nginx -t with the installed module: %s" % r.stderr)
        print("install: %s loads, its libraries found beside it" % so)
    finally:
        shutil.rmtree(prefix, ignore_errors=True)


TESTS = {"quickstart": test_quickstart, "configure": test_configure, "install": test_install}


if __name__ == "__main__":
    sys.exit(harness.main(TESTS, __doc__, "setup_test"))
