# SPDX-License-Identifier: MIT
"""ctypes declarations of libpcpu-stats' reader API (pcpu/reader.h, pcpu/expose.h).

Only exported functions of libpcpu-stats.so.1 (and of libpcpu.so.1, which it
loads) are called, and only the public
structs of those headers are declared here: the segment format itself is
never parsed in Python. The struct layouts mirror the C declarations field
by field; tests/test_layout.py compares every field's offset and size and
every struct's size with what the compiler says (tests/layout_probe.c),
and fails on a field that moved, changed type, or is declared on one side
only.
"""
import ctypes
import ctypes.util
import os
import threading
from typing import NamedTuple

c_int64_p = ctypes.POINTER(ctypes.c_int64)
c_uint64_p = ctypes.POINTER(ctypes.c_uint64)
c_char_p_p = ctypes.POINTER(ctypes.c_char_p)
pid_t = ctypes.c_int
uid_t = ctypes.c_uint32
c_enum = ctypes.c_int

# enum pcpu_value_kind: where a series of a type keeps its value (the type's
# description, pcpu_metric_type_info(), says which: type_info() below)
VALUE_UNSIGNED = 1
VALUE_SIGNED = 2
VALUE_BUCKETS = 3
# enum pcpu_prom_kind: a type in the Prometheus data model
PROM_COUNTER = 1
PROM_GAUGE = 2
PROM_HISTOGRAM = 3
# enum pcpu_segment_state
SEGMENT_STATES = {1: "live", 2: "closed", 3: "gone", 4: "unknown"}
# enum pcpu_format
FORMATS = {"prometheus": 1, "openmetrics": 2, "json": 3}
# struct pcpu_reader_options flags
READER_OWNER = 1 << 0
READER_ANY_OWNER = 1 << 1
READER_ALLOW_STALE = 1 << 2
# pcpu_reader_snapshot() flags
READER_PER_SLOT = 1 << 0
# struct pcpu_snapshot_family flags
SNAPSHOT_SPARSE_BUCKETS = 1 << 0
SNAPSHOT_NANOS = 1 << 3  # counters and gauges with billionths beside the units


class ReaderOptions(ctypes.Structure):
    """struct pcpu_reader_options"""
    _fields_ = [
        ("dir", ctypes.c_char_p),
        ("flags", ctypes.c_uint),
        ("owner", uid_t),
        ("max_bytes", ctypes.c_size_t),
    ]


class SegmentInfo(ctypes.Structure):
    """struct pcpu_segment_info"""
    _fields_ = [
        ("name", ctypes.c_char * 65),
        ("file", ctypes.c_char * 96),
        ("pid", pid_t),
        ("owner", uid_t),
        ("error", ctypes.c_int),
        ("state", c_enum),
        ("nfamilies", ctypes.c_uint64),
        ("nseries", ctypes.c_uint64),
        ("created_ns", ctypes.c_uint64),
        ("nslots", ctypes.c_uint),
        ("state_errno", ctypes.c_int),
        ("flags", ctypes.c_uint),
    ]


class _Histogram(ctypes.Structure):
    _fields_ = [("counts", c_uint64_p), ("sum", ctypes.c_int64), ("residue", ctypes.c_double)]


class _Fixed(ctypes.Structure):
    _fields_ = [("whole", ctypes.c_uint64), ("nanos", ctypes.c_int64),
                ("residue", ctypes.c_double)]


class _Value(ctypes.Union):
    _fields_ = [("counter", ctypes.c_uint64), ("gauge", ctypes.c_int64),
                ("histogram", _Histogram), ("fixed", _Fixed)]


class SnapshotSeries(ctypes.Structure):
    """struct pcpu_snapshot_series"""
    _fields_ = [("label_values", c_char_p_p), ("value", _Value)]


class SnapshotFamily(ctypes.Structure):
    """struct pcpu_snapshot_family"""
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("help", ctypes.c_char_p),
        ("unit", ctypes.c_char_p),
        ("type", c_enum),
        ("scale_exp10", ctypes.c_int),
        ("flags", ctypes.c_uint),
        ("nlabels", ctypes.c_uint),
        ("label_names", c_char_p_p),
        ("nbuckets", ctypes.c_size_t),
        ("bucket_upper", c_int64_p),
        ("nseries", ctypes.c_size_t),
        ("series", ctypes.POINTER(SnapshotSeries)),
        ("export_buckets", ctypes.POINTER(ctypes.c_uint32)),
        ("nexport", ctypes.c_size_t),
        ("native_schema", ctypes.c_int),
        ("native_index", ctypes.c_int32),
    ]


class Snapshot(ctypes.Structure):
    """struct pcpu_snapshot"""
    _fields_ = [("nfamilies", ctypes.c_size_t),
                ("families", ctypes.POINTER(SnapshotFamily))]


class ReaderSnapshot(ctypes.Structure):
    """struct pcpu_reader_snapshot"""
    _fields_ = [
        ("snapshot", Snapshot),
        ("generation", ctypes.c_uint64),
        ("changed", ctypes.c_size_t),
        ("stable", ctypes.c_int),
        ("incomplete", ctypes.c_int),
        ("state", c_enum),
        ("nslots", ctypes.c_uint),
        ("nospace", ctypes.c_int),
    ]


class ReaderFlows(ctypes.Structure):
    """struct pcpu_reader_flows (a flows table, segment format 2.9)"""
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("help", ctypes.c_char_p),
        ("nflows", ctypes.c_size_t),
        ("ncounters", ctypes.c_uint),
        ("counter_names", c_char_p_p),
    ] + [(f, ctypes.c_uint64) for f in ("pcpu__entry", "pcpu__seq", "pcpu__id", "pcpu__off")]


class MetricTypeInfo(ctypes.Structure):
    """struct pcpu_metric_type_info"""
    _fields_ = [
        ("type", c_enum),
        ("name", ctypes.c_char_p),
        ("text_type", ctypes.c_char_p),
        ("openmetrics_type", ctypes.c_char_p),
        ("sample_suffix", ctypes.c_char_p),
        ("suffixes", c_char_p_p),
        ("nsuffixes", ctypes.c_size_t),
        ("bucket_suffix", ctypes.c_char_p),
        ("sum_suffix", ctypes.c_char_p),
        ("count_suffix", ctypes.c_char_p),
        ("bucket_label", ctypes.c_char_p),
        ("value", c_enum),
        ("flags", ctypes.c_uint),
        ("prom", c_enum),
        ("otlp", c_enum),
    ]


STRUCTS = {
    "pcpu_metric_type_info": MetricTypeInfo,
    "pcpu_reader_options": ReaderOptions,
    "pcpu_segment_info": SegmentInfo,
    "pcpu_snapshot_series": SnapshotSeries,
    "pcpu_snapshot_family": SnapshotFamily,
    "pcpu_snapshot": Snapshot,
    "pcpu_reader_snapshot": ReaderSnapshot,
    "pcpu_reader_flows": ReaderFlows,
}

# (name, return type, argument types) of every function used.
_FUNCTIONS = [
    ("pcpu_segment_list", ctypes.c_int,
     [ctypes.POINTER(ReaderOptions), ctypes.POINTER(ctypes.POINTER(SegmentInfo)),
      ctypes.POINTER(ctypes.c_size_t)]),
    ("pcpu_segment_prune", ctypes.c_int,
     [ctypes.POINTER(ReaderOptions), ctypes.POINTER(ctypes.c_size_t)]),
    ("pcpu_reader_open", ctypes.c_void_p, [ctypes.c_char_p, ctypes.POINTER(ReaderOptions)]),
    ("pcpu_reader_open_fd", ctypes.c_void_p, [ctypes.c_int, ctypes.POINTER(ReaderOptions)]),
    ("pcpu_reader_close", None, [ctypes.c_void_p]),
    ("pcpu_reader_name", ctypes.c_char_p, [ctypes.c_void_p]),
    ("pcpu_reader_pid", pid_t, [ctypes.c_void_p]),
    ("pcpu_reader_nslots", ctypes.c_uint, [ctypes.c_void_p]),
    ("pcpu_reader_owned_slots", ctypes.c_uint, [ctypes.c_void_p]),
    ("pcpu_reader_slot_index", ctypes.c_uint, [ctypes.c_void_p]),
    ("pcpu_reader_state", ctypes.c_int, [ctypes.c_void_p]),
    ("pcpu_reader_snapshot", ctypes.c_int,
     [ctypes.c_void_p, ctypes.c_uint, ctypes.POINTER(ctypes.POINTER(ReaderSnapshot))]),
    ("pcpu_reader_snapshot_slots", c_int64_p,
     [ctypes.POINTER(ReaderSnapshot), ctypes.c_size_t, ctypes.c_size_t]),
    ("pcpu_reader_snapshot_free", None, [ctypes.POINTER(ReaderSnapshot)]),
    ("pcpu_reader_flows_list", ctypes.c_int,
     [ctypes.c_void_p, ctypes.POINTER(ctypes.POINTER(ReaderFlows)), ctypes.POINTER(ctypes.c_size_t)]),
    ("pcpu_reader_flows_read", ctypes.c_int,
     [ctypes.c_void_p, ctypes.POINTER(ReaderFlows), ctypes.c_size_t, ctypes.c_size_t, c_uint64_p]),
    ("pcpu_reader_flows_free", None, [ctypes.POINTER(ReaderFlows), ctypes.c_size_t]),
    ("pcpu_reader_error", ctypes.c_char_p, []),
    ("pcpu_reader_reason", ctypes.c_char_p, [ctypes.c_int]),
    ("pcpu_snapshot_write", ctypes.c_int,
     [ctypes.POINTER(Snapshot), c_enum, ctypes.POINTER(ctypes.c_void_p),
      ctypes.POINTER(ctypes.c_size_t)]),
    ("pcpu_format_content_type", ctypes.c_char_p, [c_enum]),
    # The one description of each metric type (type_info()).
    ("pcpu_metric_type_info", ctypes.POINTER(MetricTypeInfo), [c_enum]),
    ("pcpu_stats_error", ctypes.c_char_p, []),
    # Scaling and the exposed buckets, as the C writers compute them.
    ("pcpu_stats_scale", ctypes.c_double, [ctypes.c_double, ctypes.c_int]),
    ("pcpu_snapshot_value", ctypes.c_double,
     [ctypes.POINTER(SnapshotFamily), ctypes.POINTER(SnapshotSeries)]),
    ("pcpu_snapshot_sum", ctypes.c_double,
     [ctypes.POINTER(SnapshotFamily), ctypes.POINTER(SnapshotSeries)]),
    ("pcpu_snapshot_histogram_buckets", ctypes.c_size_t,
     [ctypes.POINTER(SnapshotFamily), c_uint64_p, ctypes.POINTER(ctypes.c_size_t), c_uint64_p,
      ctypes.c_size_t]),
    ("pcpu_snapshot_bucket_le", ctypes.c_int,
     [ctypes.POINTER(SnapshotFamily), ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]),
    # Several segments' snapshots in one exposition, with the C conflict rules.
    ("pcpu_snapshot_merge_new", ctypes.c_void_p, []),
    ("pcpu_snapshot_merge_add", ctypes.c_int,
     [ctypes.c_void_p, ctypes.POINTER(Snapshot), ctypes.c_uint, c_char_p_p, c_char_p_p]),
    ("pcpu_snapshot_merge_result", ctypes.POINTER(Snapshot), [ctypes.c_void_p]),
    ("pcpu_snapshot_merge_free", None, [ctypes.c_void_p]),
]

# PCPU_FORMAT_NUMBER_MAX: room for any number the library formats.
FORMAT_NUMBER_MAX = 40

_lock = threading.Lock()
_lib = None
_libc = None


SONAME = "libpcpu-stats.so.1"


def _installed_libdir():
    """The library directory of the pcpu install this package came from:
    `cmake --install` writes it into the copy of this package it installs
    (<prefix>/share/pcpu/python, src/pcpu/_installed.py), which
    `pip install <prefix>/share/pcpu/python` then carries into a virtual
    environment. None for a package installed from the sources."""
    try:
        from . import _installed
    except ImportError:
        return None
    return getattr(_installed, "LIBDIR", None)


def _beside_pcpustat():
    """The library of the pcpustat found on PATH, where that pcpustat finds
    it: its RUNPATH is $ORIGIN/../<libdir> (a prefix install), so
    <bindir>/../lib, lib64 or lib/<multiarch>."""
    import shutil
    import sysconfig
    tool = shutil.which("pcpustat")
    if not tool:
        return []
    prefix = os.path.dirname(os.path.dirname(os.path.realpath(tool)))
    libdirs = ["lib", "lib64"]
    multiarch = sysconfig.get_config_var("MULTIARCH")
    if multiarch:
        libdirs.append(os.path.join("lib", multiarch))
    return [os.path.join(prefix, d, SONAME) for d in libdirs]


def _from_pkg_config():
    """The library in pkg-config's libdir for pcpu-stats (a prefix that
    pkg-config searches: /usr/local, or one on PKG_CONFIG_PATH)."""
    import subprocess
    try:
        r = subprocess.run(["pkg-config", "--variable=libdir", "pcpu-stats"],
                           capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return []
    libdir = r.stdout.strip()
    return [os.path.join(libdir, SONAME)] if r.returncode == 0 and libdir else []


def _candidates():
    """Where libpcpu-stats is looked for, in order; the first that loads is
    used (python/README.md, "Finding libpcpu-stats").

    1. PCPU_LIBRARY, alone when set: an explicit choice, no fallback.
    2. The library of the install this package came from (_installed.py):
       the same version, wherever the prefix is, with nothing in the
       environment -- a prefix install's library is where the loader does
       not look (~/.local/lib, /opt/pcpu/lib; /usr/local/lib before
       ldconfig runs).
    3. The dynamic loader's own search: the Debian package, a /usr install,
       LD_LIBRARY_PATH; then ctypes.util.find_library's.
    4. As the tools find theirs: beside the pcpustat on PATH.
    5. pkg-config's libdir for pcpu-stats.
    A path that does not exist is skipped; 4 and 5 are asked only when
    1-3 failed.
    """
    env = os.environ.get("PCPU_LIBRARY")
    if env:
        yield env
        return
    libdir = _installed_libdir()
    if libdir and os.path.exists(os.path.join(libdir, SONAME)):
        yield os.path.join(libdir, SONAME)
    yield SONAME
    found = ctypes.util.find_library("pcpu-stats")
    if found:
        yield found
    for path in _beside_pcpustat() + _from_pkg_config():
        if os.path.exists(path):
            yield path


def lib():
    """libpcpu-stats, loaded on first use, with the prototypes above declared."""
    global _lib, _libc
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        errors = []
        for name in _candidates():
            try:
                handle = ctypes.CDLL(name, use_errno=True)
                break
            except OSError as e:
                errors.append(f"{name}: {e}")
        else:
            raise ImportError(
                "libpcpu-stats not found. Install pcpu (the Debian package libpcpu-stats1, "
                "or `cmake --install` then `pip install <prefix>/share/pcpu/python`), put "
                "its pcpustat on PATH, or set PCPU_LIBRARY to the path of libpcpu-stats.so.1. "
                "Tried: " + "; ".join(errors))
        for fname, restype, argtypes in _FUNCTIONS:
            try:
                fn = getattr(handle, fname)
            except AttributeError:
                raise ImportError(f"{handle._name} does not export {fname}: "
                                  "a libpcpu too old for this module") from None
            fn.restype = restype
            fn.argtypes = argtypes
        libc = ctypes.CDLL(None)
        libc.free.restype = None
        libc.free.argtypes = [ctypes.c_void_p]
        _libc = libc
        _lib = handle
        return _lib


class TypeInfo(NamedTuple):
    """What the binding reads of a type's description."""
    name: str           #: "counter", "gauge", "histogram"
    sample_suffix: str  #: "_total" for a counter: its value sample's name
    value: int          #: VALUE_UNSIGNED, VALUE_SIGNED or VALUE_BUCKETS
    prom: int           #: PROM_COUNTER, PROM_GAUGE or PROM_HISTOGRAM


_types = {}


def type_info(t):
    """The description of metric type number t (pcpu_metric_type_info()),
    read once per type, or None for a number that is no type. The binding
    decides on a type only through it, as the C encoders do, so that a
    type the library adds needs no change here."""
    if t not in _types:
        p = lib().pcpu_metric_type_info(t)
        _types[t] = (TypeInfo(p.contents.name.decode(), p.contents.sample_suffix.decode(),
                              p.contents.value, p.contents.prom) if p else None)
    return _types[t]


def type_named(name):
    """The description of the type called `name` ("counter"), or None."""
    t = 1
    while type_info(t):  # the types are numbered from 1 without gaps
        if type_info(t).name == name:
            return type_info(t)
        t += 1
    return None


def free(ptr):
    """free(3) from the C library libpcpu allocated with."""
    lib()
    _libc.free(ptr)


def error_message():
    """pcpu_reader_error() of the calling thread, as text."""
    msg = lib().pcpu_reader_error()
    return msg.decode("utf-8", "replace") if msg else ""


def raise_errno(what):
    err = ctypes.get_errno()
    msg = error_message() or os.strerror(err)
    raise OSError(err, f"{what}: {msg}")


def options(dir=None, owner=None, any_owner=False, allow_stale=False, max_bytes=0):
    opts = ReaderOptions()
    if dir is not None:
        opts.dir = os.fsencode(dir)
    flags = 0
    if owner is not None:
        flags |= READER_OWNER
        opts.owner = owner
    if any_owner:
        flags |= READER_ANY_OWNER
    if allow_stale:
        flags |= READER_ALLOW_STALE
    opts.flags = flags
    opts.max_bytes = max_bytes
    return opts
