# Install-time part of the Python reader's install (included by an
# install(CODE) rule of the top-level CMakeLists.txt, which sets
# PCPU_PY_LIBDIR, PCPU_PY_DATADIR and PCPU_PY_BINARY_DIR).
#
# Writes src/pcpu/_installed.py into the copy of the Python package that
# the install puts in <datadir>/pcpu/python: the absolute library directory
# of this installation (CMAKE_INSTALL_PREFIX here is the prefix actually
# installed to: `cmake --install --prefix` overrides the configured one; a
# DESTDIR, package staging, is not part of it). `pip install
# <prefix>/share/pcpu/python` carries it into any virtual environment, and
# the package loads libpcpu-stats.so.1 from there with nothing in the
# environment (python/src/pcpu/_lib.py, _candidates()).
foreach(kind LIBDIR DATADIR)
  if(IS_ABSOLUTE "${PCPU_PY_${kind}}")
    set(_pcpu_py_${kind} "${PCPU_PY_${kind}}")
  else()
    set(_pcpu_py_${kind} "${CMAKE_INSTALL_PREFIX}/${PCPU_PY_${kind}}")
  endif()
  get_filename_component(_pcpu_py_${kind} "${_pcpu_py_${kind}}" ABSOLUTE)
endforeach()
string(REPLACE "\\" "\\\\" _pcpu_py_quoted "${_pcpu_py_LIBDIR}")
string(REPLACE "\"" "\\\"" _pcpu_py_quoted "${_pcpu_py_quoted}")
file(WRITE "${PCPU_PY_BINARY_DIR}/python-install/_installed.py"
"# SPDX-License-Identifier: MIT
# Written by `cmake --install` (cmake/pcpuPythonInstall.cmake): where this
# package's pcpu install put libpcpu-stats.so.1 (_lib.py looks there).
LIBDIR = \"${_pcpu_py_quoted}\"
")
file(INSTALL DESTINATION "${_pcpu_py_DATADIR}/pcpu/python/src/pcpu" TYPE FILE
  FILES "${PCPU_PY_BINARY_DIR}/python-install/_installed.py")
