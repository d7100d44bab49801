/* SPDX-License-Identifier: MIT */
/* C's inline forms around a pcpu hot path, in a header two translation
 * units include (tests/cxx/link_matrix.sh): C99 `inline` with one
 * `extern inline` declaration (c_main.c), GNU89 `extern inline`
 * (gnu_inline) with an out-of-line twin, and `static inline`. */
#ifndef PCPU_LINK_MATRIX_SHAPES_C_H
#define PCPU_LINK_MATRIX_SHAPES_C_H

#include <pcpu/pcpu.h>

inline void c99_add(pcpu_counter_t c, int64_t v)
{
	pcpu_counter_add(c, v);
}

extern inline __attribute__((gnu_inline)) void gnu_add(pcpu_counter_t c, int64_t v)
{
	pcpu_counter_add(c, v);
}

static inline void static_add(pcpu_counter_t c, int64_t v)
{
	pcpu_counter_add(c, v);
}

/* One round: c += 1 + 2 + 3. */
static inline void c_every_shape(pcpu_counter_t c)
{
	c99_add(c, 1);
	gnu_add(c, 2);
	static_add(c, 3);
}

void c_rounds_a(pcpu_counter_t c, long rounds);
void c_rounds_b(pcpu_counter_t c, long rounds);

#endif
