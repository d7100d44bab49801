# SPDX-License-Identifier: MIT
"""A prometheus_client collector that re-exports pcpu segments.

    from prometheus_client import REGISTRY, start_http_server
    from pcpu.prometheus import PcpuCollector

    REGISTRY.register(PcpuCollector(["forwarder"]))   # None: every segment
    start_http_server(9465)

Every scrape opens each segment afresh and takes one snapshot of it, as
`pcpustat serve` does, with the same conventions: every series gets the
labels pcpu_segment="NAME" and pcpu_pid="PID", and pcpu_segment_up{...,
reason="..."} is 1 with an empty reason for a segment that was read and
exposed, 0 for one that was not, with the reason: why it could not be read
(pcpu.reason() of the reader's errno: "corrupt", "writer_gone",
"permission", ...), or "conflict" where its metrics clash with an earlier
segment's (same name, another type, help, unit, labels or buckets). A
segment is exposed whole or not at all.

The merge, its conflict rules, the scaling, the exposed buckets and their
`le` strings are libpcpu's own (pcpu_snapshot_merge_add(),
pcpu_stats_scale(), pcpu_snapshot_histogram_buckets(),
pcpu_snapshot_bucket_le()), called through ctypes: the collector exposes
what `pcpustat serve` and pcpu_snapshot_write() expose, by construction.
"""
import ctypes
import errno
from typing import Iterable, List, Optional, Union

from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                    HistogramMetricFamily)
try:
    from prometheus_client.registry import Collector
except ImportError:  # prometheus_client before 0.14
    Collector = object

import pcpu
from . import _lib
from . import _s  # bytes from C to str

EXTRA_LABELS = ("pcpu_segment", "pcpu_pid")
# A type's class, by its kind in the Prometheus data model (the type
# table's prom, _lib.type_info()).
_METRIC_CLASSES = {_lib.PROM_COUNTER: CounterMetricFamily, _lib.PROM_GAUGE: GaugeMetricFamily,
                   _lib.PROM_HISTOGRAM: HistogramMetricFamily}


def _family_names(snap):
    return {snap.families[i].name for i in range(snap.nfamilies)}


class _Merge:
    """A pcpu_snapshot_merge_t and everything it references (the reader
    snapshots, the extra label arrays), freed together."""

    def __init__(self):
        self.lib = _lib.lib()
        self.m = self.lib.pcpu_snapshot_merge_new()
        if not self.m:
            raise MemoryError("pcpu_snapshot_merge_new")
        self.held = []   # (reader snapshot, label arrays): must outlive m
        self.names = set()

    def add(self, rs, labels) -> bool:
        """Adds reader snapshot rs (owned from here on) with the extra
        labels (None: none); False when the library refuses it (a conflict
        with a segment merged before, or an invalid snapshot)."""
        snap = rs.contents.snapshot
        if labels is None:
            n, names, values = 0, None, None
            # Unlabelled, two segments' series of one family would be
            # indistinguishable: the later segment is refused.
            fams = _family_names(snap)
            if fams & self.names:
                self.lib.pcpu_reader_snapshot_free(rs)
                return False
        else:
            n = len(EXTRA_LABELS)
            names = (ctypes.c_char_p * n)(*(x.encode() for x in EXTRA_LABELS))
            values = (ctypes.c_char_p * n)(*(x.encode() for x in labels))
        self.held.append((rs, names, values))
        if self.lib.pcpu_snapshot_merge_add(self.m, ctypes.byref(snap), n, names, values) != 0:
            if ctypes.get_errno() == errno.ENOMEM:
                raise MemoryError("pcpu_snapshot_merge_add")
            return False
        self.names |= _family_names(snap)
        return True

    def result(self):
        res = self.lib.pcpu_snapshot_merge_result(self.m)
        if not res:
            raise MemoryError("pcpu_snapshot_merge_result")
        return res.contents

    def free(self):
        self.lib.pcpu_snapshot_merge_free(self.m)
        self.m = None
        for rs, _, _ in self.held:
            self.lib.pcpu_reader_snapshot_free(rs)
        self.held = []


def _buckets(lib, fam, counts, idx, cum, le):
    """(le, cumulative count) of each bucket the C writers expose."""
    n = lib.pcpu_snapshot_histogram_buckets(ctypes.byref(fam), counts, idx, cum, fam.nbuckets)
    return [(le[idx[k]], cum[k]) for k in range(n)]


def _le_strings(lib, fam):
    """The `le` string of every bucket (pcpu_snapshot_bucket_le())."""
    out = ctypes.create_string_buffer(_lib.FORMAT_NUMBER_MAX)
    les = []
    for b in range(fam.nbuckets):
        if lib.pcpu_snapshot_bucket_le(ctypes.byref(fam), b, out, len(out)) < 0:
            raise OSError(ctypes.get_errno(), "pcpu_snapshot_bucket_le")
        les.append(out.value.decode())
    return les


def _metric_family(lib, fam):
    """A merged snapshot family as a prometheus_client metric family."""
    info = _lib.type_info(fam.type)
    buckets = info.value == _lib.VALUE_BUCKETS
    names = [_s(fam.label_names[k]) for k in range(fam.nlabels)]
    kw = {"labels": names}
    unit = _s(fam.unit)
    if unit:
        # pcpu checked that a unit is the name's last component, so
        # prometheus_client keeps the name as it is.
        kw["unit"] = unit
    metric = _METRIC_CLASSES[info.prom](_s(fam.name), _s(fam.help) or "", **kw)
    if buckets:
        le = _le_strings(lib, fam)
        idx = (ctypes.c_size_t * fam.nbuckets)()
        cum = (ctypes.c_uint64 * fam.nbuckets)()
    for i in range(fam.nseries):
        se = fam.series[i]
        values = [_s(se.label_values[k]) for k in range(fam.nlabels)]
        if buckets:
            h = se.value.histogram
            metric.add_metric(values, _buckets(lib, fam, h.counts, idx, cum, le),
                              lib.pcpu_snapshot_sum(ctypes.byref(fam), ctypes.byref(se)))
        else:  # the exposed value, a fraction included (pcpu_snapshot_value())
            metric.add_metric(values, lib.pcpu_snapshot_value(ctypes.byref(fam), ctypes.byref(se)))
    return metric


class PcpuCollector(Collector):
    """Collects the statistics of pcpu segments.

    targets: segment names, pids or file names to export (each may match
    several segments of that name, one per publishing process); None exports
    every segment of the directory that can be read. dir, owner, any_owner:
    as for pcpu.list_segments(). labels: add pcpu_segment and pcpu_pid to
    every series (default; turn off to re-export one segment as it is).
    """

    def __init__(self, targets: Optional[Iterable[Union[str, int]]] = None,
                 dir: Optional[str] = None, owner: Optional[int] = None,
                 any_owner: bool = False, labels: bool = True):
        self.targets = None if targets is None else [str(t) for t in targets]
        self.dir = dir
        self.owner = owner
        self.any_owner = any_owner
        self.labels = labels

    def describe(self):
        # The metric names are only known by reading the segments; an empty
        # description keeps registration from scraping them.
        return []

    def _segments(self) -> List["pcpu.SegmentInfo"]:
        infos = pcpu.list_segments(self.dir, self.owner, self.any_owner)
        if self.targets is None:
            return infos
        return [i for i in infos
                if i.name in self.targets or str(i.pid) in self.targets or i.file in self.targets]

    def _snapshot(self, info):
        """(reader snapshot, "") or (None, reason)."""
        if info.error:
            return None, pcpu.reason(info.error)
        try:
            with pcpu.open_segment(info.file, dir=self.dir, owner=self.owner,
                                   any_owner=self.any_owner) as seg:
                return seg._take(False), ""
        except OSError as e:
            return None, pcpu.reason(e.errno or 0)

    def collect(self):
        lib = _lib.lib()
        up = GaugeMetricFamily("pcpu_segment_up",
                               "1 if the pcpu segment was read and exposed, else 0 and the reason.",
                               labels=list(EXTRA_LABELS) + ["reason"])
        merge = _Merge()
        try:
            for info in self._segments():
                labels = [info.name, str(info.pid)]
                rs, why = self._snapshot(info)
                ok = rs is not None and merge.add(rs, labels if self.labels else None)
                if rs is not None and not ok:
                    why = "conflict"
                up.add_metric(labels + [why], 1 if ok else 0)
            res = merge.result()
            metrics = []
            for i in range(res.nfamilies):
                m = _metric_family(lib, res.families[i])
                if metrics and metrics[-1].name == m.name:
                    # Another label set of the name (PCPU_FAMILY_LABELSET):
                    # its samples under the same metric family.
                    metrics[-1].samples.extend(m.samples)
                else:
                    metrics.append(m)
        finally:
            merge.free()
        yield from metrics
        yield up
