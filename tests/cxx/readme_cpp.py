#!/usr/bin/env python3
"""Compiles every ```cpp block of README.md that has a main() with
-std=c++17 -Wall -Wextra -Werror against the build tree (pcpu.hpp and the
prometheus-cpp layer's headers) and runs it: it must exit 0.
Usage: readme_cpp.py SRC_DIR BUILD_DIR CXX"""
import re
import subprocess
import sys
import tempfile

src, build, cxx = sys.argv[1:4]
text = open(src + "/README.md").read()
blocks = re.findall(r"^```cpp\n(.*?)^```", text, re.S | re.M)
ran = 0
for i, b in enumerate(blocks):
    if "int main" not in b:
        continue
    with tempfile.TemporaryDirectory() as d:
        with open(d + "/b.cpp", "w") as f:
            f.write(b)
        # The layer's library only where the block uses the layer, as a
        # user links it: -lpcpu-prometheus refuses a program none of whose
        # units includes its headers (compat/prometheus-cpp/src/headers_check.c).
        layer = ["-lpcpu-prometheus"] if "<prometheus/" in b else []
        subprocess.run([cxx, "-std=c++17", "-Wall", "-Wextra", "-Werror", "-I" + src + "/include",
                        "-I" + build + "/include", "-I" + src + "/compat/prometheus-cpp/include",
                        d + "/b.cpp", "-o", d + "/b", "-L" + build + "/compat/prometheus-cpp", "-L" + build,
                        "-Wl,-rpath," + build + "/compat/prometheus-cpp:" + build,
                        *layer, "-lpcpu-stats", "-lpcpu", "-pthread"], check=True)
        subprocess.run([d + "/b"], check=True, stdout=subprocess.DEVNULL)
        ran += 1
if ran == 0:
    sys.exit("no ```cpp block with a main() in README.md")
print("README C++ blocks: %d compiled and ran" % ran)
