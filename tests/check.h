/* Minimal assertions for pcpu's tests: print where and why, exit non-zero.
 * (Not assert(): these must hold in release builds too.) */
#ifndef PCPU_TEST_CHECK_H
#define PCPU_TEST_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, \
				__LINE__, #cond);                              \
			exit(1);                                               \
		}                                                              \
	} while (0)

#define CHECK_EQ_U64(a, b)                                                     \
	do {                                                                   \
		uint64_t _a = (uint64_t)(a), _b = (uint64_t)(b);               \
		if (_a != _b) {                                                \
			fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%" PRIu64 \
				" != %" PRIu64 ", diff %" PRId64 ")\n",          \
				__FILE__, __LINE__, #a, #b, _a, _b,            \
				(int64_t)(_a - _b));                           \
			exit(1);                                               \
		}                                                              \
	} while (0)

/* xorshift64: a cheap, reproducible pseudo-random sequence for stress
 * tests (*s must not be 0). */
static inline uint64_t check_xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

#endif
