#!/usr/bin/env python3
"""`pcpustat push --otlp-grpc` into a real gRPC server (grpcio, PyPI) that
implements OTLP's MetricsService/Export with the published schema
(opentelemetry-proto's generated service), issue 42.

  push_grpc_test.py PCPUSTAT FIXTURE

 - the request the server decodes is the one push_otlp_test.py checks
   over HTTP: every counter, gauge and histogram value exact (its
   check_request(), run on the gRPC request);
 - HTTP/2 cleartext with prior knowledge (grpcio speaks nothing else);
   --compression gzip sends the message gzipped with grpc-encoding: gzip
   (the server decompresses it: the values are exact again; a message
   flagged compressed without that header, or the reverse, is refused by
   grpcio with INTERNAL, so exact values prove both);
 - OTEL_EXPORTER_OTLP_ENDPOINT with OTEL_EXPORTER_OTLP_PROTOCOL=grpc is
   the gRPC base URL, used as it is (no /v1/metrics);
 - status codes as OTLP/gRPC specifies: UNAVAILABLE is retried and the
   values arrive on the retry; INVALID_ARGUMENT is dropped, not retried;
   UNAUTHENTICATED is said to be refused credentials; RESOURCE_EXHAUSTED
   without RetryInfo is not retried;
 - a partial_success in the answer is logged;
 - http/json and an unknown protocol are refused at start (exit 2).
"""
import os
import shutil
import sys
import tempfile
import threading
from concurrent import futures

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from push_common import HANG, Fixture, metrics_of, point, run_push, stop  # noqa: E402

import grpc  # noqa: E402
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc  # noqa: E402

import push_otlp_test  # noqa: E402


def fail(msg):
    raise SystemExit("FAIL: " + msg)


class Service(metrics_service_pb2_grpc.MetricsServiceServicer):
    """Records every request with its metadata; answers with the codes
    queued in `fail_with` first, then OK."""

    def __init__(self):
        self.lock = threading.Lock()
        self.requests = []   # (metadata dict, ExportMetricsServiceRequest)
        self.attempts = 0
        self.fail_with = []  # grpc.StatusCode to answer, in order
        self.partial = None  # (rejected, message) for the next OK answer

    def Export(self, request, context):
        with self.lock:
            self.attempts += 1
            md = {k: v for k, v in context.invocation_metadata()}
            if self.fail_with:
                code = self.fail_with.pop(0)
                context.abort(code, "test says %s" % code.name)
            self.requests.append((md, request))
            resp = metrics_service_pb2.ExportMetricsServiceResponse()
            if self.partial:
                resp.partial_success.rejected_data_points = self.partial[0]
                resp.partial_success.error_message = self.partial[1]
                self.partial = None
            return resp


def main():
    pcpustat, fixture = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="pcpu-push-grpc.")
    segdir = os.path.join(tmp, "seg")
    os.mkdir(segdir, 0o700)
    env = dict(os.environ, PCPU_SEGMENT_DIR=segdir)
    for k in list(env):
        if k.startswith("OTEL_"):
            del env[k]
    svc = Service()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(svc, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    url = "http://127.0.0.1:%d" % port
    procs = []
    ok = False
    try:
        t0 = __import__("time").time_ns()
        app = Fixture(fixture, env)
        procs.append(app.p)
        app.cmd("add 12345678901", "post 7", "gauge -42", "temp 215",
                *["observe %d" % v for v in push_otlp_test.OBS])
        base = ["--count", "1", "--job", "pushtest", "--instance", "node1", "--label", "site=lab",
                "--min-backoff", "0.05", "--max-backoff", "0.1"]

        # The values, exact, over gRPC.
        rc, err = run_push(pcpustat, env, ["--otlp-grpc", url] + base, HANG)
        if rc != 0 or len(svc.requests) != 1:
            fail("push exited %d, %d requests: %s" % (rc, len(svc.requests), err))
        md, req = svc.requests[-1]
        if "application/grpc" not in md.get("content-type", "application/grpc"):
            fail("content-type %r" % md.get("content-type"))
        push_otlp_test.check_request({"Content-Type": "application/x-protobuf"}, req, app, t0)
        print("ok   gRPC: every value exact (push_otlp_test's checks)")

        # gzip: grpc-encoding: gzip, the server decompresses; exact again.
        # (grpcio decompresses before the servicer, and hides grpc-encoding
        # from its metadata: the agent's -v says what it sent.)
        rc, err = run_push(pcpustat, env, ["--otlp-grpc", url, "--compression", "gzip", "-v"] + base, HANG)
        md, req = svc.requests[-1]
        if rc != 0 or "gzipped to" not in err:
            fail("gzip: exit %d: %s" % (rc, err))
        push_otlp_test.check_request({"Content-Type": "application/x-protobuf"}, req, app, t0)
        print("ok   gRPC with grpc-encoding: gzip: every value exact")

        # The environment: the base URL as it is, over the protocol it names.
        e2 = dict(env, OTEL_EXPORTER_OTLP_ENDPOINT=url, OTEL_EXPORTER_OTLP_PROTOCOL="grpc")
        n = len(svc.requests)
        rc, err = run_push(pcpustat, e2, base, HANG)
        if rc != 0 or len(svc.requests) != n + 1:
            fail("OTEL_EXPORTER_OTLP_PROTOCOL=grpc: exit %d: %s" % (rc, err))
        print("ok   OTEL_EXPORTER_OTLP_ENDPOINT + OTEL_EXPORTER_OTLP_PROTOCOL=grpc")
        for proto, want in (("http/json", "not implemented"), ("smtp", "is not grpc or http/protobuf")):
            rc, err = run_push(pcpustat, dict(env, OTEL_EXPORTER_OTLP_ENDPOINT=url,
                                              OTEL_EXPORTER_OTLP_PROTOCOL=proto), base, HANG)
            if rc != 2 or want not in err:
                fail("protocol %s: exit %d, %r" % (proto, rc, err))
        print("ok   http/json and an unknown protocol refused at start (exit 2)")

        # UNAVAILABLE twice, then OK: retried (while the agent runs: a
        # last push at exit is tried once), the values arrive.
        app.cmd("add 5")
        svc.fail_with = [grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNAVAILABLE]
        a0, n = svc.attempts, len(svc.requests)
        rc, err = run_push(pcpustat, env, ["--otlp-grpc", url, "-i", "1"] + base[2:] + ["--count", "3"], HANG)
        failed = (svc.attempts - a0) - (len(svc.requests) - n)
        if rc != 0 or failed != 2 or "UNAVAILABLE" not in err:
            fail("UNAVAILABLE: exit %d, %d failed attempts: %s" % (rc, failed, err))
        p = point(metrics_of(svc.requests[-1][1])["push_requests"], "sum", method="GET")
        if p.as_int != 12345678901 + 5:
            fail("after UNAVAILABLE: %d" % p.as_int)
        print("ok   UNAVAILABLE retried: 2 failed attempts, then the value exact")

        # Permanent failures: one attempt each, said in the log.
        for code, words in ((grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT"),
                            (grpc.StatusCode.RESOURCE_EXHAUSTED, "RESOURCE_EXHAUSTED"),
                            (grpc.StatusCode.UNAUTHENTICATED, "refused the credentials")):
            svc.fail_with = [code]
            a0 = svc.attempts
            rc, err = run_push(pcpustat, env, ["--otlp-grpc", url] + base, HANG)
            if rc == 0 or svc.attempts != a0 + 1 or words not in err:
                fail("%s: exit %d, %d attempts: %s" % (code.name, rc, svc.attempts - a0, err))
            print("ok   %s: not retried (exit %d), the log says %r" % (code.name, rc, words))

        # partial_success is logged.
        svc.partial = (3, "three points refused")
        rc, err = run_push(pcpustat, env, ["--otlp-grpc", url] + base, HANG)
        if rc != 0 or "three points refused" not in err:
            fail("partial_success not logged: exit %d: %s" % (rc, err))
        print("ok   partial_success logged")
        ok = True
    finally:
        server.stop(0)
        stop(procs)
        shutil.rmtree(tmp, ignore_errors=True)
    print("push_grpc_test: ok" if ok else "push_grpc_test: FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
