# SPDX-License-Identifier: MIT
"""The reader binding against live writers."""
import errno
import json
import os
import math
import subprocess
import sys
import time

import pytest

import pcpu
from conftest import start_fixture, tool


def test_list_segments_sees_the_forwarder(forwarder, segdir):
    infos = pcpu.list_segments()
    assert [(i.name, i.pid, i.state, i.error) for i in infos] == \
        [("forwarder", forwarder.pid, "live", 0)]
    info = infos[0]
    assert info.file == f"pcpu.{forwarder.pid}.forwarder"
    assert info.owner == os.geteuid()
    assert info.nslots >= 1 and info.nfamilies >= 5 and info.nseries >= info.nfamilies
    assert abs(info.created_ns / 1e9 - time.time()) < 120
    # The directory may also be given explicitly.
    assert pcpu.list_segments(dir=segdir) == infos


def test_forwarder_snapshots(forwarder):
    with pcpu.open_segment("forwarder") as seg:
        assert (seg.name, seg.pid) == ("forwarder", forwarder.pid)
        assert seg.nslots >= 1 and seg.slot_index in ("cpu", "mm_cid")
        assert seg.state() == "live"
        first = seg.snapshot()
        time.sleep(0.2)
        second = seg.snapshot()
    types = {f.name: f.type for f in first.families}
    assert types["fwd_rx_packets"] == "counter"
    assert types["fwd_flows_active"] == "gauge"
    assert types["fwd_latency_seconds"] == "histogram"
    assert first.state == "live" and first.nslots == seg.nslots
    # Counters only ever added to never decrease between snapshots.
    for name in ("fwd_rx_packets", "fwd_tx_packets", "fwd_rx_bytes", "fwd_drops"):
        a = first.family(name).series[0].value
        b = second.family(name + "_total").series[0].value
        assert 0 < a <= b, name
    lat = second.family("fwd_latency_seconds")
    assert lat.unit == "seconds" and lat.scale_exp10 == -9
    h = lat.series[0].value
    assert len(h.counts) == len(lat.buckets) + 1 and h.count > 0 and h.sum > 0
    assert list(lat.buckets) == sorted(set(lat.buckets))
    flows = second.family("fwd_flow_packets")
    assert flows.label_names == ("flow",)
    assert all("->" in s.labels["flow"] for s in flows.series)
    # Plain Python data, all the way down.
    d = second.to_dict()
    assert json.loads(json.dumps(d)) == d
    with pytest.raises(KeyError):
        second.family("no_such_family")


def test_golden_values_exact(golden):
    with pcpu.open_segment("golden") as seg:
        snap = seg.snapshot()
    assert snap.stable and not snap.incomplete and snap.changed == 0
    req = snap.family("app_requests_total")
    assert req.name == "app_requests" and req.label_names == ("method", "code")
    assert req.help == "Requests served, by method and status code."
    by = {(s.labels["method"], s.labels["code"]): s.value for s in req.series}
    # Hostile label values come back byte for byte.
    assert by == {("GET", "200"): 1234, ("POST", "500"): 7, ("a\"b\\c\nd\x1b[31m", "é"): 1}
    assert snap.family("app_queue_depth").series[0].value == 42
    temp = snap.family("app_temperature_celsius")
    assert (temp.unit, temp.scale_exp10, temp.series[0].value) == ("celsius", -1, 215)
    assert temp.series[0].scaled(temp) == 21.5
    lat = snap.family("app_latency_seconds")
    assert lat.buckets == (1000, 10000, 100000) and lat.scale_exp10 == -6
    h = lat.series[0].value
    assert h.counts == (50, 40, 9, 1)
    assert h.sum == 50 * 500 + 40 * 5000 + 9 * 50000 + 500000
    assert lat.series[0].scaled(lat).sum == 1.175
    size = snap.family("app_message_size_bytes")
    assert size.export_buckets is not None and size.series[0].value.count == 64
    assert size.series[0].value.sum == sum(100 + i * 10 for i in range(64))
    assert snap.family("app_unused").series[0].value == 0


def test_per_slot_values_add_up(golden):
    with pcpu.open_segment("golden") as seg:
        snap = seg.snapshot(per_slot=True)
        assert seg.snapshot().families[0].series[0].slots is None
    for fam in snap.families:
        for s in fam.series:
            assert len(s.slots) == snap.nslots
            if fam.type == "counter":
                assert sum(s.slots) % 2**64 == s.value
            elif fam.type == "gauge":
                assert sum(s.slots) == s.value
            else:
                assert sum(s.slots) == s.value.count


def test_count_from_four_threads(segdir):
    proc = start_fixture(segdir, "count", "1000003", "counted")
    try:
        with pcpu.open_segment(proc.pid) as seg:  # by pid
            assert seg.snapshot().family("test_events").series[0].value == 1000003
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def test_exposition_by_the_c_writer(golden):
    with pcpu.open_segment("golden") as seg:
        om = seg.exposition("openmetrics")
        prom = seg.exposition("prometheus")
        js = json.loads(seg.exposition("json"))
    assert om.endswith("# EOF\n")
    assert 'app_requests_total{method="GET",code="200"} 1234' in prom
    assert {f["name"] for f in js["families"]} >= {"app_requests", "app_latency_seconds"}
    assert pcpu.content_type("openmetrics").startswith("application/openmetrics-text")


def test_errors_are_oserrors(segdir, golden):
    with pytest.raises(FileNotFoundError):
        pcpu.open_segment("nobody_publishes_this")
    with pytest.raises(ValueError):
        with pcpu.open_segment("golden") as seg:
            pass
        seg.snapshot()  # closed
    # A corrupted segment, and a symbolic link, as the reader refuses them.
    bad = os.path.join(segdir, f"pcpu.{os.getpid()}.garbage")
    with open(bad, "wb") as f:
        f.write(b"\x7fELF not a segment" * 100)
    with pytest.raises(OSError) as e:
        pcpu.open_segment("garbage")
    assert e.value.errno == errno.EBADMSG, e.value
    assert "garbage" in str(e.value)
    link = os.path.join(segdir, f"pcpu.{os.getpid()}.link")
    os.symlink(os.path.join(segdir, f"pcpu.{golden.pid}.golden"), link)
    with pytest.raises(OSError) as e:
        pcpu.open_segment(link)
    assert e.value.errno == errno.ELOOP
    listed = {i.name: i.error for i in pcpu.list_segments()}
    assert listed["golden"] == 0 and listed["garbage"] == errno.EBADMSG


def test_gone_writer_and_prune(segdir):
    proc = start_fixture(segdir, "die", "dead")
    proc.wait(timeout=30)
    (info,) = pcpu.list_segments()
    assert (info.name, info.state) == ("dead", "gone")
    with pcpu.open_segment("dead") as seg:
        with pytest.raises(ProcessLookupError):
            seg.snapshot()
    with pcpu.open_segment("dead", allow_stale=True) as seg:
        snap = seg.snapshot()
    assert snap.state == "gone"
    assert snap.family("last_words").series[0].value == 3
    assert pcpu.prune_segments() == 1
    assert pcpu.list_segments() == []


def test_missing_library_says_so(tmp_path):
    code = "import pcpu; pcpu.list_segments()"
    env = dict(os.environ, PCPU_LIBRARY=str(tmp_path / "libpcpu-stats.so.1"),
               PYTHONPATH=os.path.join(os.path.dirname(__file__), "..", "src"))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode != 0 and "libpcpu-stats not found" in r.stderr, r.stderr


def test_owned_slots(segdir, monkeypatch):
    """segment_fixture owned (PCPU_OWNED_SLOTS=2): the last two slots are
    owned slots; test_packets_total has 7 in owned slot 0, 5 in owned
    slot 1 and 3 in the CPU slots."""
    monkeypatch.setenv("PCPU_OWNED_SLOTS", "2")
    proc = start_fixture(segdir, "owned", "owned")
    try:
        with pcpu.open_segment("owned") as seg:
            assert seg.owned_slots == 2
            snap = seg.snapshot(per_slot=True)
        assert snap.owned_slots == 2 and snap.nslots > 2
        s = snap.family("test_packets_total").series[0]
        first = snap.nslots - snap.owned_slots
        assert s.value == 15 and s.slots[first:] == (7, 5) and sum(s.slots[:first]) == 3
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0


def test_values_beyond_words_and_label_sets(segdir):
    """segment_fixture beyond (segment format 2.8): gauges past the integer
    words (16e9, 1e-12, 1e300, +-Inf, NaN), exact where the words are (0.1
    added ten times is 1, an int), a histogram's sum past 2^63 billionths,
    and three label sets of one name read as one Family."""
    proc = start_fixture(segdir, "beyond", "beyond")
    try:
        with pcpu.open_segment("beyond") as seg:
            snap = seg.snapshot()
            text = seg.exposition()
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    mem = snap.family("test_mem_bytes")
    got = {s.labels["k"]: s.value for s in mem.series}
    assert got["big"] == 16000000000 and isinstance(got["big"], int)
    assert got["tenth"] == 1 and isinstance(got["tenth"], int)
    assert got["tiny"] == 1e-12 and got["huge"] == 1e300 and got["third"] == 1 / 3
    assert math.isinf(got["inf"]) and got["inf"] > 0 and math.isnan(got["nan"])
    xfer = snap.family("test_transfer_bytes")
    h = xfer.series[0].scaled(xfer)
    assert h.count == 1001 and h.sum == 5e12 + 0.5
    assert xfer.series[0].value.residue == 5e12 and xfer.fractions
    jobs = [f for f in snap.families if f.name == "test_jobs"]
    assert len(jobs) == 1, "three label sets of one name are one family"
    jobs = jobs[0]
    assert jobs.label_sets == ((), ("queue",), ("queue", "prio"))
    assert jobs.label_names == ("queue", "prio")
    assert [(s.labels, s.value) for s in jobs.series] == [
        ({}, 3), ({"queue": "q1"}, 4), ({"queue": "q1", "prio": "hi"}, 5)]
    assert text.count("# TYPE test_jobs_total counter") == 1
    assert 'test_mem_bytes{k="nan"} NaN\n' in text and 'test_mem_bytes{k="big"} 16000000000\n' in text
    assert "test_transfer_bytes_sum 5.0000000000005e+12\n" in text


def test_flows_table_skipped(segdir):
    """segment_fixture flows (segment format 2.9): a segment holding a flows
    table (pcpu_segment_flows_create(): a FLOWS entry, its words far out in
    the file) reads as before -- the table is not a family, the counter
    beside it reads to its value, and the exposition has it alone."""
    proc = start_fixture(segdir, "flows", "flows")
    try:
        with pcpu.open_segment("flows") as seg:
            snap = seg.snapshot()
            text = seg.exposition()
            tables = seg.flows_tables()
            rows = seg.read_flows("flow_traffic")
            part = seg.read_flows("flow_traffic", 5, 3)
            with pytest.raises(KeyError):
                seg.read_flows("no_such_table")
            with pytest.raises(OSError) as e:
                seg.read_flows("flow_traffic", 999, 2)
            assert e.value.errno == errno.EINVAL
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    assert [f.name for f in snap.families] == ["test_events"]
    assert snap.family("test_events").series[0].value == 5
    assert "test_events_total 5" in text and "flow_traffic" not in text
    # The table itself, read through pcpu_reader_flows_*(): the fixture
    # added 1500 bytes to flow 7 and collected.
    assert [(t.name, t.help, t.nflows, t.counters) for t in tables] == \
        [("flow_traffic", "Per-flow traffic.", 1000, ("packets", "bytes"))]
    assert len(rows) == 1000 and rows[7] == (0, 1500)
    assert all(r == (0, 0) for i, r in enumerate(rows) if i != 7)
    assert part == [(0, 0), (0, 0), (0, 1500)]
