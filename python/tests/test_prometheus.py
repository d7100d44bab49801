# SPDX-License-Identifier: MIT
"""The prometheus_client collector."""
import os

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_om
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
from prometheus_client.parser import text_string_to_metric_families

import pcpu
from pcpu.prometheus import PcpuCollector


def samples(text, parser=text_string_to_metric_families):
    return {(s.name, tuple(sorted(s.labels.items())), s.value)
            for fam in parser(text) for s in fam.samples}


def scrape(collector):
    reg = CollectorRegistry()
    reg.register(collector)
    return generate_latest(reg).decode()


def test_same_samples_as_the_c_writer(golden):
    """Unlabelled, the collector's exposition carries exactly the samples of
    libpcpu's own writer: names, labels (hostile ones included), scaled
    values, cumulative buckets, sums and counts."""
    with pcpu.open_segment("golden") as seg:
        c_side = samples(seg.exposition("prometheus"))
    py_side = samples(scrape(PcpuCollector(["golden"], labels=False)))
    py_side = {s for s in py_side if not s[0].startswith("pcpu_segment_up")}
    assert py_side == c_side


def test_openmetrics_through_the_strict_parser(golden):
    reg = CollectorRegistry()
    reg.register(PcpuCollector())
    text = generate_om(reg).decode()
    got = samples(text, parse_om)
    pid = str(golden.pid)
    assert ("app_requests_total", (("code", "200"), ("method", "GET"),
                                   ("pcpu_pid", pid), ("pcpu_segment", "golden")), 1234.0) in got
    assert ("pcpu_segment_up", (("pcpu_pid", pid), ("pcpu_segment", "golden"), ("reason", "")),
            1.0) in got
    assert ("app_temperature_celsius", (("pcpu_pid", pid), ("pcpu_segment", "golden")), 21.5) in got


def test_live_forwarder(forwarder):
    text = scrape(PcpuCollector(["forwarder"]))
    pid = str(forwarder.pid)
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    rx = [s for s in fams["fwd_rx_packets"].samples if s.name == "fwd_rx_packets_total"]
    assert len(rx) == 1 and rx[0].value > 0
    assert rx[0].labels == {"pcpu_segment": "forwarder", "pcpu_pid": pid}
    lat = fams["fwd_latency_seconds"].samples
    buckets = [s for s in lat if s.name.endswith("_bucket")]
    count = [s.value for s in lat if s.name.endswith("_count")]
    assert buckets[-1].labels["le"] == "+Inf" and [buckets[-1].value] == count
    assert [b.value for b in buckets] == sorted(b.value for b in buckets)  # cumulative
    up = [s for s in fams["pcpu_segment_up"].samples]
    assert [(s.labels["pcpu_segment"], s.value) for s in up] == [("forwarder", 1.0)]


def test_a_broken_segment_is_left_out_whole(golden, segdir):
    with open(os.path.join(segdir, f"pcpu.{os.getpid()}.broken"), "wb") as f:
        f.write(b"\0" * 4096)
    text = scrape(PcpuCollector())
    up = {s.labels["pcpu_segment"]: (s.value, s.labels["reason"])
          for fam in text_string_to_metric_families(text) if fam.name == "pcpu_segment_up"
          for s in fam.samples}
    # All zeros: no magic yet, as a segment still being created (EAGAIN).
    assert up == {"golden": (1.0, ""), "broken": (0.0, "not_ready")}
    assert "app_requests_total" in text


def test_two_writers_of_one_name_are_told_apart_by_pid(segdir):
    from conftest import start_fixture
    a = start_fixture(segdir, "count", "5", "twin")
    b = start_fixture(segdir, "count", "7", "twin")
    try:
        got = samples(scrape(PcpuCollector(["twin"])))
        assert ("test_events_total", (("pcpu_pid", str(a.pid)), ("pcpu_segment", "twin")), 5.0) in got
        assert ("test_events_total", (("pcpu_pid", str(b.pid)), ("pcpu_segment", "twin")), 7.0) in got
    finally:
        for p in (a, b):
            p.stdin.close()
            p.wait(timeout=30)
