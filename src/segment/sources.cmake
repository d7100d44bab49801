# Sources of the shared statistics segment (writer, reader, shared helpers).
# Included by the top-level CMakeLists.txt; paths are relative to the
# repository root. The shared helpers and the reader use only libc and the
# statistics validators, so the reader fuzz target (tests/segment) builds
# them alone: tests/segment/fuzz_run.sh reads the two lists from this file.
set(PCPU_SEGMENT_SHARED_SOURCES
  src/segment/error.c      # the per-thread message, pcpu_reader_reason()
  src/segment/names.c      # segment names and file names
  src/segment/dirs.c       # the directory named, the per-user directories
  src/segment/safe_open.c  # directories and files opened with safety checks
  src/segment/liveness.c   # whether a writer still runs (/proc)
)
set(PCPU_SEGMENT_READER_SOURCES
  src/segment/reader_input.c    # pread or memory copy, the max_bytes budget
  src/segment/reader_header.c   # header validation, reading it again
  src/segment/reader_open.c     # pcpu_reader_open*: trust checks, accessors
  src/segment/reader_scan.c     # finding segment files in the directories
  src/segment/reader_list.c     # pcpu_segment_list(), pcpu_segment_prune()
  src/segment/reader_parse.c    # parsing a copy of the directory
  src/segment/reader_values.c   # reading and summing the values
  src/segment/reader_result.c   # assembling the public snapshot
  src/segment/reader_snapshot.c # pcpu_reader_snapshot(): the read protocol
  src/segment/reader_flows.c    # flows tables: listing and reading their words
)
set(PCPU_SEGMENT_SOURCES
  ${PCPU_SEGMENT_SHARED_SOURCES}
  src/segment/writer.c     # pcpu_segment_publish(): the file, the zone in it, fork, life cycle
  src/segment/directory.c  # the directory: entries and blobs written per registry event
  src/segment/directory_tree.c  # a tree's directory: room before allocation, relabelled entries
  src/segment/tree.c       # a segment every process of a pre-fork tree writes (shared registry)
  src/segment/tree_index.c # a tree's index of its shared directory: families, series, label sets
  src/segment/tree_relabel.c # a tree's series given other labels (pcpu_family_relabel)
  src/segment/tree_blobs.c # a tree's free blobs: relabelled series' old label values' room
  src/segment/tree_relog.c # a tree's relabel log: relabellings followed entry by entry
  src/segment/join.c       # joining a tree from an exec()ed process, leaving one (binary upgrades)
  src/segment/backing.c    # the segment's file as the zone's backing (mapping, reservation)
  src/segment/flows.c      # flows tables' words in the file (pcpu_segment_flows_create)
  ${PCPU_SEGMENT_READER_SOURCES}
)
