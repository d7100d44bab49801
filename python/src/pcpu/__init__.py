# SPDX-License-Identifier: MIT
"""Read pcpu statistics segments from Python.

A program that uses pcpu publishes its statistics registry in a shared
segment (pcpu_segment_publish(), a file in /dev/shm). This module lists the
segments on the machine, opens one and takes snapshots of it as plain Python
data, through libpcpu's own reader (pcpu/reader.h, called with ctypes): it
never parses the segment itself, so it inherits the reader's checks (a
hostile or corrupted segment is an error, never a crash) and reads every
format version the installed libpcpu reads.

    import pcpu
    for info in pcpu.list_segments():
        print(info.name, info.pid, info.state)
    with pcpu.open_segment("forwarder") as seg:
        snap = seg.snapshot()
        print(snap.to_dict())

Errors are OSError with the reader's errno and message: FileNotFoundError
(no such segment), PermissionError, ProcessLookupError (ESRCH: the writer is
gone; open with allow_stale=True to read its last values), and OSError with
errno EBADMSG (corrupted), EPROTONOSUPPORT (a format this libpcpu does not
read), ENOTUNIQ (a name several processes publish: give a pid) and so on.

pcpu.prometheus.PcpuCollector re-exports segments from a prometheus_client
exporter.
"""
import ctypes
import dataclasses
import math
import os
from typing import Dict, List, Optional, Tuple, Union

from . import _lib

__all__ = ["SegmentInfo", "Histogram", "Series", "Family", "Snapshot", "Segment", "FlowsTable",
           "list_segments", "open_segment", "prune_segments", "scale", "reason"]
__version__ = "0.2.0"


def _s(b):
    return None if b is None else b.decode("utf-8", "replace")


@dataclasses.dataclass(frozen=True)
class SegmentInfo:
    """One segment of pcpu_segment_list() (struct pcpu_segment_info)."""
    name: str
    file: str
    pid: int
    owner: int
    #: 0 when the segment could be read, else the errno opening it would
    #: fail with (EACCES, EBADMSG...); the fields below are then 0.
    error: int
    #: "live", "closed" (unpublished) or "gone" (writer died)
    state: Optional[str]
    nfamilies: int
    nseries: int
    created_ns: int
    nslots: int


@dataclasses.dataclass(frozen=True)
class Histogram:
    """A histogram series' value: per-bucket counts (not cumulative, one per
    bucket of Family.buckets plus the last, +Inf), and the sum: `sum` in
    units of 10^scale_exp10 (an int) plus `residue`, what that integer
    could not hold, in exposed units (a float, 0.0 but for families with
    fractions: pcpu_histogram_observe())."""
    counts: Tuple[int, ...]
    sum: int
    residue: float = 0.0

    @property
    def count(self) -> int:
        return sum(self.counts)


@dataclasses.dataclass(frozen=True)
class Series:
    labels: Dict[str, str]
    #: int for counters (0..2^64-1) and gauges (signed); Histogram for
    #: histograms. Unscaled: see Family.scale_exp10 and scaled(). In a
    #: family with fractions (Family.fractions) an int where the billionths
    #: add whole units only, else a float: the units plus the billionths,
    #: as pcpu_snapshot_value() computes it.
    value: Union[int, float, Histogram]
    #: With per_slot=True: each slot's part of the value (a histogram's
    #: observations per slot), else None.
    slots: Optional[Tuple[int, ...]] = None

    def scaled(self, family: "Family") -> Union[float, Histogram]:
        """The exposed value, value * 10^scale_exp10, as the nearest float
        (a histogram's sum scaled the same way; counts are unchanged)."""
        if isinstance(self.value, Histogram):
            h = self.value
            return Histogram(h.counts, scale(h.sum, family.scale_exp10) + h.residue)
        return scale(self.value, family.scale_exp10)


@dataclasses.dataclass(frozen=True)
class Family:
    name: str                  #: without a counter's _total suffix
    help: Optional[str]
    unit: Optional[str]
    type: str                  #: "counter", "gauge" or "histogram"
    scale_exp10: int           #: exposed value = value * 10^scale_exp10
    label_names: Tuple[str, ...]
    #: Several label sets of one name (PCPU_FAMILY_LABELSET): one Family
    #: whose series carry labels of any of them; label_names is then the
    #: names of all, in order of appearance, and label_sets each set.
    #: Histograms: inclusive upper bounds of the buckets but the last (+Inf).
    buckets: Tuple[int, ...]
    #: Histograms: indices of the buckets whose bound is exposed as an `le`
    #: (the same set at every scrape; +Inf always), None for every bucket.
    export_buckets: Optional[Tuple[int, ...]]
    series: Tuple[Series, ...]
    #: A family with fractions (PCPU_SNAPSHOT_NANOS: pcpu/fraction.h):
    #: counters and gauges with billionths and a residue, histograms
    #: observed as doubles.
    fractions: bool = False
    #: The label sets of its name (one for most: label_names).
    label_sets: Tuple[Tuple[str, ...], ...] = ()


@dataclasses.dataclass(frozen=True)
class Snapshot:
    families: Tuple[Family, ...]
    generation: int            #: directory generation at the start of the read
    changed: int               #: series left out: added or removed during the read
    stable: bool               #: the directory did not change during the read
    incomplete: bool           #: the writer's directory was full (series missing)
    state: Optional[str]       #: writer state at the time of the read
    nslots: int
    #: How many of the nslots are owned slots of pinned workers: the last
    #: ones (a Series' slots[nslots - owned_slots + j] is owned slot j);
    #: the others are CPU slots (pcpu_reader_owned_slots()).
    owned_slots: int = 0

    def family(self, name: str) -> Family:
        """The family called `name` (a counter also by its _total name)."""
        for f in self.families:
            info = _lib.type_named(f.type)
            if f.name == name or (info and info.sample_suffix and f.name + info.sample_suffix == name):
                return f
        raise KeyError(name)

    def to_dict(self) -> dict:
        """The snapshot as dicts, lists, ints, strings, bools and None:
        json.loads(json.dumps(d)) == d."""
        return _plain(dataclasses.asdict(self))


def _plain(x):
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


def _fraction_value(lib, fam, se, signed):
    """A value with billionths and a residue (PCPU_SNAPSHOT_NANOS): the
    exact int where they add whole units only, else the float
    pcpu_snapshot_value() gives (infinities and NaN included)."""
    nanos = se.value.fixed.nanos
    units, rest = divmod(abs(nanos), 10**9)  # C's division: toward zero
    residue = se.value.fixed.residue
    if rest or residue != 0.0 or math.copysign(1.0, residue) < 0:
        return lib.pcpu_snapshot_value(ctypes.byref(fam), ctypes.byref(se))
    v = (se.value.fixed.whole + (units if nanos >= 0 else -units)) % 2**64
    return v - 2**64 if signed and v >= 2**63 else v


def scale(value: int, scale_exp10: int) -> float:
    """value * 10^scale_exp10 as pcpu's writers expose it
    (pcpu_stats_scale(): 5000000 ns at -9 is 0.005, not
    0.005000000000000001)."""
    return _lib.lib().pcpu_stats_scale(float(value), int(scale_exp10))


def list_segments(dir: Optional[str] = None, owner: Optional[int] = None,
                  any_owner: bool = False) -> List[SegmentInfo]:
    """The segments in the segment directory (dir, else $PCPU_SEGMENT_DIR,
    else /dev/shm), readable or not, sorted by name and pid
    (pcpu_segment_list())."""
    lib = _lib.lib()
    opts = _lib.options(dir, owner, any_owner)
    arr = ctypes.POINTER(_lib.SegmentInfo)()
    n = ctypes.c_size_t()
    if lib.pcpu_segment_list(ctypes.byref(opts), ctypes.byref(arr), ctypes.byref(n)) != 0:
        _lib.raise_errno("pcpu_segment_list")
    try:
        return [SegmentInfo(name=_s(e.name), file=_s(e.file), pid=e.pid, owner=e.owner,
                            error=e.error, state=_lib.SEGMENT_STATES.get(e.state),
                            nfamilies=e.nfamilies, nseries=e.nseries,
                            created_ns=e.created_ns, nslots=e.nslots)
                for e in (arr[i] for i in range(n.value))]
    finally:
        if arr:
            _lib.free(ctypes.cast(arr, ctypes.c_void_p))


def prune_segments(dir: Optional[str] = None, any_owner: bool = False) -> int:
    """Removes the segments whose writer is gone (pcpu_segment_prune());
    returns how many."""
    removed = ctypes.c_size_t()
    opts = _lib.options(dir, None, any_owner)
    if _lib.lib().pcpu_segment_prune(ctypes.byref(opts), ctypes.byref(removed)) != 0:
        _lib.raise_errno("pcpu_segment_prune")
    return removed.value


class FlowsTable:
    """A flows table of a segment (segment format 2.9; the writer's
    pcpu_segment_flows_create()): `nflows` flows of the `counters`."""

    def __init__(self, name: str, help: Optional[str], nflows: int, counters: tuple):
        self.name = name
        self.help = help
        self.nflows = nflows
        self.counters = counters

    def __repr__(self):
        return f"FlowsTable({self.name!r}, {self.nflows} flows, counters {self.counters})"


def _flows_list(lib, r):
    out = ctypes.POINTER(_lib.ReaderFlows)()
    n = ctypes.c_size_t()
    if lib.pcpu_reader_flows_list(r, ctypes.byref(out), ctypes.byref(n)) != 0:
        _lib.raise_errno("pcpu_reader_flows_list")
    return out, n.value


class Segment:
    """An open segment (pcpu_reader_open()). Use as a context manager, or
    call close(). Snapshots are independent of it once taken."""

    def __init__(self, target: Union[str, int], dir: Optional[str] = None,
                 owner: Optional[int] = None, any_owner: bool = False,
                 allow_stale: bool = False, max_bytes: int = 0):
        lib = _lib.lib()
        self._opts = _lib.options(dir, owner, any_owner, allow_stale, max_bytes)
        target = str(target)
        self._r = lib.pcpu_reader_open(os.fsencode(target), ctypes.byref(self._opts))
        if not self._r:
            _lib.raise_errno(f"segment {target!r}")
        self.name = _s(lib.pcpu_reader_name(self._r))
        self.pid = lib.pcpu_reader_pid(self._r)
        self.nslots = lib.pcpu_reader_nslots(self._r)
        #: The last owned_slots of the nslots are pinned workers' owned slots.
        self.owned_slots = lib.pcpu_reader_owned_slots(self._r)
        #: What a slot stands for: "cpu" (CPU number) or "mm_cid".
        self.slot_index = {1: "cpu", 2: "mm_cid"}.get(lib.pcpu_reader_slot_index(self._r))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def close(self):
        r, self._r = getattr(self, "_r", None), None
        if r:
            _lib.lib().pcpu_reader_close(r)

    def _reader(self):
        if not self._r:
            raise ValueError("segment closed")
        return self._r

    def state(self) -> str:
        """The writer's state now: "live", "closed" or "gone"."""
        st = _lib.lib().pcpu_reader_state(self._reader())
        if st < 0:
            _lib.raise_errno(f"segment {self.name!r}")
        return _lib.SEGMENT_STATES[st]

    def _take(self, per_slot):
        out = ctypes.POINTER(_lib.ReaderSnapshot)()
        flags = _lib.READER_PER_SLOT if per_slot else 0
        if _lib.lib().pcpu_reader_snapshot(self._reader(), flags, ctypes.byref(out)) != 0:
            _lib.raise_errno(f"segment {self.name!r}")
        return out

    def snapshot(self, per_slot: bool = False) -> Snapshot:
        """A snapshot (pcpu_reader_snapshot()) as plain Python data. Every
        series in it is consistent; values are read as pcpu_counter_fetch()
        reads them (not a point-in-time snapshot)."""
        lib = _lib.lib()
        rs = self._take(per_slot)
        try:
            s = rs.contents
            fams = []
            for f in range(s.snapshot.nfamilies):
                fam = s.snapshot.families[f]
                info = _lib.type_info(fam.type)
                ftype = info.name if info else str(fam.type)
                kind = info.value if info else None
                names = tuple(_s(fam.label_names[k]) for k in range(fam.nlabels))
                nb = fam.nbuckets if kind == _lib.VALUE_BUCKETS else 0
                bounds = tuple(fam.bucket_upper[k] for k in range(nb - 1)) if nb else ()
                series = []
                for i in range(fam.nseries):
                    se = fam.series[i]
                    labels = {names[k]: _s(se.label_values[k]) for k in range(fam.nlabels)}
                    if kind == _lib.VALUE_BUCKETS:
                        h = se.value.histogram
                        value = Histogram(tuple(h.counts[k] for k in range(nb)), h.sum, h.residue)
                    elif fam.flags & _lib.SNAPSHOT_NANOS:
                        value = _fraction_value(lib, fam, se, kind == _lib.VALUE_SIGNED)
                    elif kind == _lib.VALUE_SIGNED:
                        value = se.value.gauge
                    else:
                        value = se.value.counter
                    slots = None
                    if per_slot:
                        p = lib.pcpu_reader_snapshot_slots(rs, f, i)
                        if not p:
                            _lib.raise_errno("pcpu_reader_snapshot_slots")
                        slots = tuple(p[k] for k in range(s.nslots))
                    series.append(Series(labels, value, slots))
                if fams and fams[-1].name == _s(fam.name):
                    # Another label set of the name (PCPU_FAMILY_LABELSET),
                    # next to the first: one metric, its series with theirs.
                    prev = fams[-1]
                    fams[-1] = dataclasses.replace(
                        prev, series=prev.series + tuple(series),
                        label_names=prev.label_names + tuple(n for n in names
                                                             if n not in prev.label_names),
                        label_sets=prev.label_sets + (names,))
                    continue
                fams.append(Family(name=_s(fam.name), help=_s(fam.help),
                                   unit=_s(fam.unit) or None, type=ftype,
                                   scale_exp10=fam.scale_exp10, label_names=names,
                                   buckets=bounds,
                                   export_buckets=(tuple(fam.export_buckets[k]
                                                         for k in range(fam.nexport))
                                                   if fam.export_buckets else None),
                                   series=tuple(series),
                                   fractions=bool(fam.flags & _lib.SNAPSHOT_NANOS),
                                   label_sets=(names,)))
            return Snapshot(families=tuple(fams), generation=s.generation, changed=s.changed,
                            stable=bool(s.stable), incomplete=bool(s.incomplete),
                            state=_lib.SEGMENT_STATES.get(s.state), nslots=s.nslots,
                            owned_slots=self.owned_slots)
        finally:
            lib.pcpu_reader_snapshot_free(rs)

    def exposition(self, fmt: str = "prometheus") -> str:
        """A snapshot written by libpcpu's own writer (pcpu_snapshot_write()):
        fmt "prometheus" (text 0.0.4), "openmetrics" or "json"."""
        lib = _lib.lib()
        code = _lib.FORMATS[fmt]
        rs = self._take(False)
        try:
            buf = ctypes.c_void_p()
            n = ctypes.c_size_t()
            if lib.pcpu_snapshot_write(ctypes.byref(rs.contents.snapshot), code,
                                       ctypes.byref(buf), ctypes.byref(n)) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"pcpu_snapshot_write: {_s(lib.pcpu_stats_error())}")
            try:
                return ctypes.string_at(buf, n.value).decode("utf-8")
            finally:
                _lib.free(buf)
        finally:
            lib.pcpu_reader_snapshot_free(rs)

    def flows_tables(self) -> list:
        """The segment's flows tables now (pcpu_reader_flows_list()): a list of
        FlowsTable, in directory order. Tables are not part of a snapshot (a
        million flows are 16 MB of words): read one with read_flows()."""
        lib = _lib.lib()
        out, n = _flows_list(lib, self._reader())
        try:
            return [FlowsTable(_s(out[i].name), _s(out[i].help) if out[i].help else None,
                               out[i].nflows,
                               tuple(_s(out[i].counter_names[k]) for k in range(out[i].ncounters)))
                    for i in range(n)]
        finally:
            lib.pcpu_reader_flows_free(out, n)

    def read_flows(self, table: str, first: int = 0, n: Optional[int] = None) -> list:
        """The counters of flows first .. first + n - 1 (n None: to the end) of
        the table named `table` (pcpu_reader_flows_read()): a list of one tuple
        of its counters per flow. The values are the table's shared words:
        every add that returned before the writer's last collection of its
        registry, and maybe later ones. KeyError: no such table; OSError
        ESTALE: it was destroyed or replaced during the read."""
        lib = _lib.lib()
        out, count = _flows_list(lib, self._reader())
        try:
            for i in range(count):
                if _s(out[i].name) == table:
                    t = out[i]
                    break
            else:
                raise KeyError(table)
            nc = t.ncounters
            if n is None:
                n = t.nflows - first
            if n <= 0:
                return []
            buf = (ctypes.c_uint64 * (n * nc))()
            if lib.pcpu_reader_flows_read(self._reader(), ctypes.byref(t), first, n, buf) != 0:
                _lib.raise_errno(f"flows table {table!r}")
            return [tuple(buf[f * nc:(f + 1) * nc]) for f in range(n)]
        finally:
            lib.pcpu_reader_flows_free(out, count)


def open_segment(target: Union[str, int], **kw) -> Segment:
    """Opens a segment: a name (the one live segment of that name), a pid,
    a file name "pcpu.PID.NAME" or a path. Keywords: dir, owner (uid),
    any_owner, allow_stale, max_bytes (see Segment)."""
    return Segment(target, **kw)


def content_type(fmt: str) -> str:
    """HTTP Content-Type of an exposition format."""
    return _s(_lib.lib().pcpu_format_content_type(_lib.FORMATS[fmt]))


def reason(errnum: int) -> str:
    """pcpu_reader_reason(): the short fixed word an exporter puts in the
    `reason` label of a segment it could not serve ("missing", "corrupt",
    "writer_gone", ... "error"), for an errno of the reader."""
    return _lib.lib().pcpu_reader_reason(int(errnum)).decode()
