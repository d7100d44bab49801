/* SPDX-License-Identifier: MIT */
#include "shapes_c.h"

void c_rounds_b(pcpu_counter_t c, long rounds)
{
	for (long r = 0; r < rounds; r++)
		c_every_shape(c);
}
