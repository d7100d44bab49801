/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/common.h
 * Compatibility header: what pcpu/common.h declared before it was split by
 * subject. New code includes the header of the subject it uses:
 *  - pcpu/defs.h: export macros, branch hints, the slot stride;
 *  - pcpu/rseq.h: the rseq area, the process's index and slot count, the
 *    calling thread's rseq mode (pcpu_rseq_mode(), pcpu_thread_init(),
 *    pcpu_prepare_unload(), pcpu_nslots()...);
 *  - pcpu/runtime_version.h: pcpu_version(), pcpu_version_string();
 *  - pcpu/zone.h: pcpu__debug_check() (not API).
 */
#ifndef PCPU_COMMON_H
#define PCPU_COMMON_H

#include <pcpu/defs.h>
#include <pcpu/rseq.h>
#include <pcpu/runtime_version.h>
#include <pcpu/zone.h>

#endif /* PCPU_COMMON_H */
