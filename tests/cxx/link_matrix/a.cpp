// SPDX-License-Identifier: MIT
#include "shapes.hpp"

void rounds_a(everything &e, long rounds)
{
	for (long r = 0; r < rounds; r++)
		every_shape(e);
}
