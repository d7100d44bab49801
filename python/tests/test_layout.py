# SPDX-License-Identifier: MIT
"""The ctypes declarations match the C headers: every struct's sizeof, every
field's offsetof and sizeof (into unions and nested structs), and the
constants, as the compiler sees them (tests/layout_probe.c). A field that
moves, changes type, or is declared on one side only fails the test."""
import ctypes
import subprocess

import pcpu._lib as L
from conftest import tool


def ctypes_fields(cls, prefix="", base=0):
    """{dotted field path: (offset, size)} of a ctypes Structure or Union,
    nested ones included."""
    out = {}
    for name, ftype in cls._fields_:
        desc = getattr(cls, name)
        path = prefix + name
        out[path] = (base + desc.offset, desc.size)
        if isinstance(ftype, type) and issubclass(ftype, (ctypes.Structure, ctypes.Union)):
            out.update(ctypes_fields(ftype, path + ".", base + desc.offset))
    return out


def probe():
    return subprocess.run([tool("PCPU_LAYOUT_PROBE")], capture_output=True, text=True,
                          check=True).stdout


def check_layouts(out, structs):
    """The mismatches between the probe's lines and the ctypes structs."""
    bad = []
    seen = {name: set() for name in structs}
    for line in out.splitlines():
        w = line.split()
        if w[0] == "const":
            continue
        cls = structs.get(w[0])
        if cls is None:
            bad.append(f"{w[0]}: probed, not declared in _lib.py")
        elif w[1] == "size":
            if ctypes.sizeof(cls) != int(w[2]):
                bad.append(f"{line}: ctypes says {ctypes.sizeof(cls)}")
        else:
            fields = ctypes_fields(cls)
            seen[w[0]].add(w[1])
            want = (int(w[3]), int(w[5]))
            if w[1] not in fields:
                bad.append(f"{w[0]}.{w[1]}: in the C header, not in _lib.py")
            elif fields[w[1]] != want:
                bad.append(f"{line}: ctypes says offset {fields[w[1]][0]} size {fields[w[1]][1]}")
    for name, cls in structs.items():
        for path in sorted(set(ctypes_fields(cls)) - seen[name]):
            bad.append(f"{name}.{path}: in _lib.py, not checked against the C header "
                       "(add it to tests/layout_probe.c)")
    return bad


def test_struct_layouts_match_the_headers():
    bad = check_layouts(probe(), L.STRUCTS)
    assert not bad, "\n".join(bad)


def test_a_moved_field_is_caught():
    """The check can fail: a ctypes struct with two fields swapped."""
    class Swapped(ctypes.Structure):
        _fields_ = [("flags", ctypes.c_uint), ("dir", ctypes.c_char_p),
                    ("owner", L.uid_t), ("max_bytes", ctypes.c_size_t)]
    bad = check_layouts(probe(), dict(L.STRUCTS, pcpu_reader_options=Swapped))
    assert any(b.startswith("pcpu_reader_options dir offset") for b in bad), bad


def test_constants_match_the_headers():
    checked = 0
    for line in probe().splitlines():
        w = line.split()
        if w[0] != "const":
            continue
        value = int(w[2])
        name = w[1]
        if name.startswith("PCPU_METRIC_"):
            # The binding takes a type's name from the library's table.
            assert L.type_info(value).name == name[len("PCPU_METRIC_"):].lower()
        elif name.startswith("PCPU_SEGMENT_"):
            assert L.SEGMENT_STATES[value] == name[len("PCPU_SEGMENT_"):].lower()
        elif name.startswith("PCPU_FORMAT_") and name != "PCPU_FORMAT_NUMBER_MAX":
            assert L.FORMATS[name[len("PCPU_FORMAT_"):].lower()] == value
        else:
            assert getattr(L, name[len("PCPU_"):]) == value, name
        checked += 1
    assert checked >= 15


def test_type_table_through_ctypes():
    """The binding's view of the type table (pcpu_metric_type_info()):
    what it decides a family's value and prometheus_client class by."""
    assert L.type_info(1) == ("counter", "_total", L.VALUE_UNSIGNED, L.PROM_COUNTER)
    assert L.type_info(2) == ("gauge", "", L.VALUE_SIGNED, L.PROM_GAUGE)
    assert L.type_info(3) == ("histogram", "", L.VALUE_BUCKETS, L.PROM_HISTOGRAM)
    assert L.type_info(0) is None and L.type_info(4) is None
    assert L.type_named("gauge") == L.type_info(2) and L.type_named("summary") is None
