# SPDX-License-Identifier: MIT
"""The ctypes declarations match the C headers: sizeof, offsetof and the
constants, as the compiler sees them (tests/layout_probe.c)."""
import ctypes
import subprocess

import pcpu._lib as L
from conftest import tool


def test_struct_layouts_and_constants_match_the_headers():
    out = subprocess.run([tool("PCPU_LAYOUT_PROBE")], capture_output=True, text=True,
                         check=True).stdout
    checked = 0
    for line in out.splitlines():
        w = line.split()
        if w[0] == "const":
            value = int(w[2])
            name = w[1]
            if name.startswith("PCPU_METRIC_"):
                assert L.METRIC_TYPES[value] == name[len("PCPU_METRIC_"):].lower()
            elif name.startswith("PCPU_SEGMENT_"):
                assert L.SEGMENT_STATES[value] == name[len("PCPU_SEGMENT_"):].lower()
            elif name.startswith("PCPU_FORMAT_"):
                assert L.FORMATS[name[len("PCPU_FORMAT_"):].lower()] == value
            else:
                assert getattr(L, name[len("PCPU_"):]) == value, name
        elif w[1] == "size":
            assert ctypes.sizeof(L.STRUCTS[w[0]]) == int(w[2]), line
        else:
            assert getattr(L.STRUCTS[w[0]], w[1]).offset == int(w[3]), line
        checked += 1
    assert checked > 40
