/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/segment_dir.h
 * Where segments live, for writers (pcpu/segment.h) and readers
 * (pcpu/reader.h) alike: the default directory and the environment variable
 * that names another. Both headers include this one.
 */
#ifndef PCPU_SEGMENT_DIR_H
#define PCPU_SEGMENT_DIR_H

/** Where the per-user segment directories (pcpu-<uid>, or
 * pcpu-<uid>.<random> when another user took that name) live when neither
 * an option nor PCPU_SEGMENT_DIR names a directory. */
#define PCPU_SEGMENT_DEFAULT_DIR "/dev/shm"

/** Environment variable naming the segment directory (writers and readers). */
#define PCPU_SEGMENT_DIR_ENV "PCPU_SEGMENT_DIR"

#endif /* PCPU_SEGMENT_DIR_H */
