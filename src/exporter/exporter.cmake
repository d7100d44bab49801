# libpcpu-exporter (issue 51): the Prometheus exporter's HTTP side -- one
# implementation that `pcpustat serve`, the prometheus-cpp layer's Exposer
# and programs serving their own registry use (pcpu/exporter.h). Above
# libpcpu-stats, below the tools; libpcpu and libpcpu-stats stay free of
# its dependencies, Debian packages all: libmicrohttpd-dev (with GnuTLS),
# zlib1g-dev, libyaml-dev, libcrypt-dev, libgnutls28-dev
# (scripts/install-deps.sh). pkg-config pcpu-exporter, CMake pcpu::exporter.
# Without them it is left out (and so are pcpustat and the Exposer), with a
# message; with the test suite on, the configuration fails instead
# (tools/CMakeLists.txt says how to get them).
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(PCPU_EXPORTER_DEPS QUIET libmicrohttpd zlib yaml-0.1 libcrypt gnutls)
endif()
if(PCPU_EXPORTER_DEPS_FOUND)
  add_library(pcpu_exporter SHARED
    src/exporter/exporter.c    # settings, listening sockets, descriptors, daemons
    src/exporter/sources.c     # sources by path; the registry source
    src/exporter/request.c     # one request: checks, routing, responses
    src/exporter/conn.c        # connections: shedding, plain HTTP to TLS, the log
    src/exporter/auth.c        # bcrypt off the serving threads
    src/exporter/penalty.c     # refusals of basic authentication answered late
    src/exporter/basic_auth.c  # Authorization: Basic
    src/exporter/webconfig.c   # the exporter toolkit's web configuration
    src/exporter/gzip.c        # pcpu_exporter_gzip()
    src/exporter/error.c       # pcpu_exporter_error()
  )
  pcpu_setup_library(pcpu_exporter)
  target_include_directories(pcpu_exporter PRIVATE ${PCPU_EXPORTER_DEPS_INCLUDE_DIRS})
  target_link_directories(pcpu_exporter PRIVATE ${PCPU_EXPORTER_DEPS_LIBRARY_DIRS})
  # Plain library names, not an imported target: nothing of the
  # dependencies appears in the exported CMake package of a shared library.
  target_link_libraries(pcpu_exporter PUBLIC pcpu_stats PRIVATE ${PCPU_EXPORTER_DEPS_LIBRARIES})
  set_target_properties(pcpu_exporter PROPERTIES OUTPUT_NAME pcpu-exporter EXPORT_NAME exporter
    VERSION ${PCPU_LIBRARY_VERSION} SOVERSION ${PCPU_SOVERSION}
    LINK_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/exporter/pcpu-exporter.map)
  target_compile_options(pcpu_exporter PRIVATE -Wall -Wextra -Werror)
  target_link_options(pcpu_exporter PRIVATE
    -Wl,--version-script=${CMAKE_CURRENT_SOURCE_DIR}/src/exporter/pcpu-exporter.map -Wl,-z,defs)
  if(PCPU_INSTALL_RUNPATH)
    set_target_properties(pcpu_exporter PROPERTIES INSTALL_RPATH "$ORIGIN")
  endif()
  add_library(pcpu::exporter ALIAS pcpu_exporter)
  # Its components (top-level CMakeLists.txt, "install"): exporter (the
  # shared object), exporter-dev (header, link, pkg-config, CMake targets;
  # its manual page is installed with the others').
  install(FILES include/pcpu/exporter.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/pcpu COMPONENT exporter-dev)
  install(TARGETS pcpu_exporter EXPORT pcpu-exporterTargets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT exporter NAMELINK_COMPONENT exporter-dev)
  install(EXPORT pcpu-exporterTargets NAMESPACE pcpu::
    DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/pcpu COMPONENT exporter-dev)
  pcpu_install_pkgconfig(COMPONENT exporter-dev FILES pcpu-exporter)
else()
  message(STATUS "libmicrohttpd, zlib, libyaml, libcrypt or GnuTLS not found (pkg-config; Debian: "
    "libmicrohttpd-dev zlib1g-dev libyaml-dev libcrypt-dev libgnutls28-dev): libpcpu-exporter is left out")
endif()
