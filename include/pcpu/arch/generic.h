/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/arch/generic.h
 * No rseq assembly: every update takes the exact atomic fallback path.
 * Compiles on any architecture. Not API; include <pcpu/arch.h>.
 */
#ifndef PCPU_ARCH_GENERIC_H
#define PCPU_ARCH_GENERIC_H

#ifndef PCPU__ARCH_H_INSIDE
#error "include <pcpu/arch.h>, not <pcpu/arch/generic.h>"
#endif

#define PCPU_ARCH_HAVE_RSEQ 0

#endif /* PCPU_ARCH_GENERIC_H */
