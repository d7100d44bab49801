# Sources of the shared statistics segment (writer, reader, shared helpers).
# Included by the top-level CMakeLists.txt; paths are relative to the
# repository root. reader.c and common.c use only libc and the statistics
# validators, so the reader fuzz target (tests/segment) builds them alone.
set(PCPU_SEGMENT_SOURCES
  src/segment/common.c     # names, directory checks, liveness, error message
  src/segment/writer.c     # pcpu_segment_publish(): the file, the zone in it, fork, life cycle
  src/segment/directory.c  # the directory: entries and blobs written per registry event
  src/segment/backing.c    # the segment's file as the zone's backing (mapping, reservation)
  src/segment/reader.c     # pcpu_reader_*: untrusted segments, copied and validated
)
