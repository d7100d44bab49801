/* SPDX-License-Identifier: MIT */
/**
 * @file sys/counter.h (pcpu's counter(9) overlay)
 * FreeBSD's <sys/counter.h>, for code ported unchanged: pcpu/counter9.h.
 * This directory (include/pcpu/compat) is on the include path only when
 * asked for: pkg-config's `pcpu-counter9` or CMake's pcpu::counter9, like
 * libbsd's overlay.
 */
#ifndef PCPU_COMPAT_SYS_COUNTER_H
#define PCPU_COMPAT_SYS_COUNTER_H

#include <pcpu/counter9.h>

#endif /* PCPU_COMPAT_SYS_COUNTER_H */
