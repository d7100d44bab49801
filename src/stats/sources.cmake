# Sources of the statistics layer (registry, gauges, histograms, consistent
# groups, exposition). Included by the top-level CMakeLists.txt; paths are
# relative to the repository root.
set(PCPU_STATS_SOURCES
  src/stats/validate.c     # names, labels, UTF-8, the per-thread error message
  src/stats/format.c       # output buffer, exact number formatting, escaping
  src/stats/expose.c       # Prometheus 0.0.4 / OpenMetrics 1.0 / JSON writers
  src/stats/stats_zone.c   # default zone of standalone statistics objects
  src/stats/gauge.c        # gauges: set by offset
  src/stats/histogram.c    # histograms: layouts, reads, quantiles
  src/stats/group.c        # consistent groups: per-CPU lanes locked by rseq
  src/stats/registry.c     # the registry: families, series, structs
  src/stats/snapshot.c     # registry snapshots
  src/stats/collector.c    # callback series, computed at collection
  src/stats/process_collector.c # the standard process_* metrics
  src/stats/counter9_sysctl.c # counter(9) counters bound to registry names (SYSCTL_COUNTER_U64)
  src/stats/negotiate.c    # HTTP Accept / Accept-Encoding negotiation of expositions
  src/stats/merge.c        # merging snapshots of several processes, families hashed by name
  src/stats/arena.c        # memory freed all at once (snapshots, merges)
)
