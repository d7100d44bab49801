# Install-time part of pcpu's pkg-config files (included by the install(CODE)
# rule of pcpu_install_pkgconfig(), cmake/pcpuInstallPkgConfig.cmake, which
# sets PCPU_PC_FILES (names of
# PCPU_PC_SOURCE_DIR/<name>.pc.in templates), PCPU_PC_BINARY_DIR,
# PCPU_PC_LIBDIR, PCPU_PC_INCLUDEDIR, PCPU_PC_VERSION and
# PCPU_PC_SYSTEM_LIBDIRS, the toolchain's implicit link directories).
#
# CMAKE_INSTALL_PREFIX here is the prefix of this installation (`cmake
# --install --prefix` overrides the configured one), so pcpu.pc names it with
# absolute paths. Deriving the prefix from ${pcfiledir} instead breaks as soon
# as the libdir is more than one level deep (Debian's lib/x86_64-linux-gnu),
# and relative -I paths would also hide /usr/include from pkg-config's
# system-directory filter. A DESTDIR (package staging) is not part of the paths.
set(PCPU_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
foreach(kind LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${PCPU_PC_${kind}}")
    set(PCPU_PC_FULL_${kind} "${PCPU_PC_${kind}}")
  elseif(kind STREQUAL "LIBDIR")
    set(PCPU_PC_FULL_${kind} "\${exec_prefix}/${PCPU_PC_${kind}}")
  else()
    set(PCPU_PC_FULL_${kind} "\${prefix}/${PCPU_PC_${kind}}")
  endif()
endforeach()
if(IS_ABSOLUTE "${PCPU_PC_LIBDIR}")
  set(_pcpu_pc_libdir "${PCPU_PC_LIBDIR}")
else()
  set(_pcpu_pc_libdir "${CMAKE_INSTALL_PREFIX}/${PCPU_PC_LIBDIR}")
endif()
set(_pcpu_pc_dest "${_pcpu_pc_libdir}/pkgconfig")
# Installed where the loader does not look (a prefix such as $HOME/.local,
# /opt/pcpu, /usr/local), a program linked with `pkg-config --libs` must
# still start: Libs carries -Wl,-rpath,${libdir}, the run path CMake gives
# its own consumers in their build tree. Not in the toolchain's own
# directories (/usr, /usr/lib/<multiarch>): nothing to add, and Debian
# forbids run paths there. Decided here, from the prefix installed to.
get_filename_component(_pcpu_pc_libdir "${_pcpu_pc_libdir}" ABSOLUTE)
set(PCPU_PC_RPATH "")
list(FIND PCPU_PC_SYSTEM_LIBDIRS "${_pcpu_pc_libdir}" _pcpu_pc_system)
if(_pcpu_pc_system EQUAL -1)
  set(PCPU_PC_RPATH " -Wl,-rpath,\${libdir}")
endif()
foreach(pc ${PCPU_PC_FILES})
  configure_file("${PCPU_PC_SOURCE_DIR}/${pc}.pc.in" "${PCPU_PC_BINARY_DIR}/${pc}.pc" @ONLY)
  file(INSTALL DESTINATION "${_pcpu_pc_dest}" TYPE FILE FILES "${PCPU_PC_BINARY_DIR}/${pc}.pc")
endforeach()
