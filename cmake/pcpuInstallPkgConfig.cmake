# pcpu_install_pkgconfig(COMPONENT <component> FILES <name>... [LIBS_PRIVATE <flags>])
# Installs the pkg-config files <name>.pc, made from cmake/<name>.pc.in at
# install time (cmake/pcpuPkgConfig.cmake: the prefix is the one installed
# to, which `cmake --install --prefix` may change), with the component.
# Every library's -dev component calls it: one rule for all the .pc files.
function(pcpu_install_pkgconfig)
  cmake_parse_arguments(PC "" "COMPONENT;LIBS_PRIVATE" "FILES" ${ARGN})
  if(NOT PC_COMPONENT OR NOT PC_FILES)
    message(FATAL_ERROR "pcpu_install_pkgconfig: COMPONENT and FILES are needed")
  endif()
  install(CODE "
    set(PCPU_PC_FILES \"${PC_FILES}\")
    set(PCPU_PC_SOURCE_DIR \"${PROJECT_SOURCE_DIR}/cmake\")
    set(PCPU_PC_BINARY_DIR \"${PROJECT_BINARY_DIR}\")
    set(PCPU_PC_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
    set(PCPU_PC_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
    set(PCPU_PC_VERSION \"${PROJECT_VERSION}\")
    set(PCPU_PC_LIBS_PRIVATE \"${PC_LIBS_PRIVATE}\")
    set(PCPU_PC_SYSTEM_LIBDIRS \"${PCPU_SYSTEM_LIBDIRS}\")
    include(\"${PROJECT_SOURCE_DIR}/cmake/pcpuPkgConfig.cmake\")"
    COMPONENT ${PC_COMPONENT})
endfunction()
