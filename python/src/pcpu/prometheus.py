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
"""
import os
from typing import Iterable, List, Optional, Union

from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                    HistogramMetricFamily)
try:
    from prometheus_client.registry import Collector
except ImportError:  # prometheus_client before 0.14
    Collector = object
from prometheus_client.utils import floatToGoString

import pcpu

EXTRA_LABELS = ("pcpu_segment", "pcpu_pid")


def _shape(fam: "pcpu.Family"):
    return (fam.type, fam.help, fam.unit, fam.label_names, fam.scale_exp10, fam.buckets)


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

    def collect(self):
        merged = {}   # family name -> (shape, metric family object)
        up = GaugeMetricFamily("pcpu_segment_up",
                               "1 if the pcpu segment was read and exposed, else 0 and the reason.",
                               labels=list(EXTRA_LABELS) + ["reason"])
        for info in self._segments():
            labels = [info.name, str(info.pid)]
            snap, why = None, ""
            if info.error == 0:
                try:
                    with pcpu.open_segment(info.file, dir=self.dir, owner=self.owner,
                                           any_owner=self.any_owner) as seg:
                        snap = seg.snapshot()
                except OSError as e:
                    why = pcpu.reason(e.errno or 0)
            else:
                why = pcpu.reason(info.error)
            ok = snap is not None and self._check(snap, merged)
            if snap is not None and not ok:
                why = "conflict"
            up.add_metric(labels + [why], 1 if ok else 0)
            if ok:
                for fam in snap.families:
                    self._add(fam, merged, labels)
        for _, metric in merged.values():
            yield metric
        yield up

    def _check(self, snap, merged) -> bool:
        for fam in snap.families:
            if self.labels and set(fam.label_names) & set(EXTRA_LABELS):
                return False
            if fam.name in merged and merged[fam.name][0] != _shape(fam):
                return False
            if not self.labels and fam.name in merged:
                return False  # two segments' series would collide unlabelled
        return True

    def _add(self, fam, merged, extra):
        names = list(fam.label_names) + (list(EXTRA_LABELS) if self.labels else [])
        if fam.name not in merged:
            kw = {"labels": names}
            if fam.unit:
                kw["unit"] = fam.unit
            cls = {"counter": CounterMetricFamily, "gauge": GaugeMetricFamily,
                   "histogram": HistogramMetricFamily}[fam.type]
            # pcpu checked that a unit is the name's last component, so
            # prometheus_client keeps the name as it is.
            merged[fam.name] = (_shape(fam), cls(fam.name, fam.help or "", **kw))
        metric = merged[fam.name][1]
        bounds = [floatToGoString(pcpu.scale(b, fam.scale_exp10)) for b in fam.buckets] + ["+Inf"]
        for s in fam.series:
            values = [s.labels[n] for n in fam.label_names] + (extra if self.labels else [])
            if fam.type == "histogram":
                buckets, cum = [], 0
                shown = None if fam.export_buckets is None else set(fam.export_buckets)
                for k, (le, c) in enumerate(zip(bounds, s.value.counts)):
                    cum += c
                    if shown is None or k in shown or le == "+Inf":
                        buckets.append((le, cum))
                metric.add_metric(values, buckets, pcpu.scale(s.value.sum, fam.scale_exp10))
            else:
                metric.add_metric(values, pcpu.scale(s.value, fam.scale_exp10))
