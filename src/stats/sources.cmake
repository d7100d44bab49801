# Sources of the statistics layer (registry, gauges, histograms, consistent
# groups, exposition). Included by the top-level CMakeLists.txt; paths are
# relative to the repository root.
set(PCPU_STATS_SOURCES
  src/stats/validate.c     # names, labels, UTF-8, the per-thread error message
  src/stats/error.c        # the per-thread error messages of libpcpu-stats' layers, by domain
  src/stats/metric_type.c  # the one description of each metric type, every encoder reads
  src/stats/format.c       # output buffer, exact number formatting, escaping
  src/stats/expose.c       # Prometheus 0.0.4 / OpenMetrics 1.0 / JSON writers
  src/stats/stats_zone.c   # default zone of standalone statistics objects
  src/stats/gauge.c        # gauges: set by offset
  src/stats/fraction.c     # values with fractions: residues, sets, reads of doubles
  src/stats/histogram.c    # histograms: layouts, creation, reads, resets
  src/stats/histogram_sparse.c # sparse histograms' bucket groups, made at first record
  src/stats/histogram_quantile.c # quantiles from a histogram's or a snapshot's counts
  src/stats/histogram_layout.c # log-linear bucket arithmetic and exposed `le` sets (also the segment reader)
  src/stats/histogram_export.c # the exposed buckets of a snapshot family, cumulative, and their `le`
  src/stats/group.c        # consistent groups: per-CPU lanes locked by rseq, fork()
  src/stats/group_read.c   # their reads, and the repair of a lane whose holder died
  src/stats/registry.c     # the registry: creation, constant labels, fork, destruction
  src/stats/registry_names.c    # its sample-name table (OpenMetrics clash set)
  src/stats/registry_families.c # its families: checked, created, found, destroyed
  src/stats/registry_labelsets.c # several label sets of one name
  src/stats/registry_series.c   # its series: label values, lookup, storage
  src/stats/registry_relabel.c  # a shared registry's series given other labels
  src/stats/registry_structs.c  # statistics structs (pcpu_registry_struct)
  src/stats/registry_groups.c   # consistent group families
  src/stats/registry_callbacks.c # callback series and a collection in progress
  src/stats/registry_observe.c  # walks and views for a mirror of the directory (the segment)
  src/stats/snapshot.c     # registry snapshots
  src/stats/collector.c    # callback series, computed at collection
  src/stats/process_collector.c # the standard process_* metrics
  src/stats/hcounter_gauge.c # a hierarchical counter's approximation and bounds as gauges
  src/stats/counter9_sysctl.c # counter(9) counters bound to registry names (SYSCTL_COUNTER_U64)
  src/stats/negotiate.c    # HTTP Accept / Accept-Encoding negotiation of expositions
  src/stats/merge.c        # merging snapshots of several processes, families hashed by name
  src/stats/arena.c        # memory freed all at once (snapshots, merges)
  src/stats/hashtab.c      # the one hash table (open addressing) of the library
  src/stats/objcache_stats.c # object caches' counters in a registry (the hook objcache.c calls)
  src/stats/stable_abi.c   # the stable tier: gauge, histogram, group inline operations as functions
)

# The Prometheus protobuf writer (PCPU_FORMAT_PROTOBUF), an optional part of
# the library: built where protobuf-c is installed (Debian libprotobuf-c-dev
# and protobuf-c-compiler, scripts/install-deps.sh); without it the format
# is unsupported (pcpu_format_supported() 0, ENOTSUP) and the library needs
# libc alone. PCPU_PROTOBUF: AUTO (default), ON (required), OFF.
# protoc-c reads protobuf-c.proto (the pcpu.pb C prefix option), which
# imports google/protobuf/descriptor.proto: Debian ships that file in
# libprotobuf-dev, which protobuf-c-compiler does not pull in.
set(PCPU_PROTOBUF AUTO CACHE STRING "Protobuf exposition writer with protobuf-c: AUTO, ON or OFF")
set(PCPU_PROTOBUF_FOUND FALSE)
if(NOT PCPU_PROTOBUF STREQUAL "OFF")
  find_program(PCPU_PROTOC_C protoc-c)
  find_path(PCPU_PROTOBUFC_INCLUDE protobuf-c/protobuf-c.h)
  find_library(PCPU_PROTOBUFC_LIB protobuf-c)
  find_path(PCPU_PROTOBUF_DESCRIPTOR_INCLUDE google/protobuf/descriptor.proto)
  if(PCPU_PROTOC_C AND PCPU_PROTOBUFC_INCLUDE AND PCPU_PROTOBUFC_LIB AND PCPU_PROTOBUF_DESCRIPTOR_INCLUDE)
    set(PCPU_PROTOBUF_FOUND TRUE)
    set(PCPU_PROTOBUF_GEN_DIR ${CMAKE_CURRENT_BINARY_DIR}/proto)
    file(MAKE_DIRECTORY ${PCPU_PROTOBUF_GEN_DIR})
    add_custom_command(
      OUTPUT ${PCPU_PROTOBUF_GEN_DIR}/metrics.pb-c.c ${PCPU_PROTOBUF_GEN_DIR}/metrics.pb-c.h
      COMMAND ${PCPU_PROTOC_C} --c_out=${PCPU_PROTOBUF_GEN_DIR}
              --proto_path=${CMAKE_CURRENT_SOURCE_DIR}/src/stats/proto
              --proto_path=${PCPU_PROTOBUFC_INCLUDE}
              --proto_path=${PCPU_PROTOBUF_DESCRIPTOR_INCLUDE} metrics.proto
      DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/stats/proto/metrics.proto
      COMMENT "protoc-c: io.prometheus.client metrics.proto")
    list(APPEND PCPU_STATS_SOURCES
      src/stats/expose_protobuf.c  # PCPU_FORMAT_PROTOBUF with protobuf-c
      ${PCPU_PROTOBUF_GEN_DIR}/metrics.pb-c.c)
    message(STATUS "protobuf-c found: libpcpu writes PCPU_FORMAT_PROTOBUF")
  elseif(PCPU_PROTOBUF STREQUAL "ON")
    message(FATAL_ERROR "PCPU_PROTOBUF=ON but protobuf-c is missing (Debian libprotobuf-c-dev, protobuf-c-compiler, libprotobuf-dev for descriptor.proto)")
  else()
    message(STATUS "protobuf-c not found (Debian libprotobuf-c-dev, protobuf-c-compiler, libprotobuf-dev): PCPU_FORMAT_PROTOBUF unsupported (ENOTSUP)")
  endif()
endif()
