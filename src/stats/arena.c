/* SPDX-License-Identifier: MIT */
/*
 * Arenas: memory for a tree of plain data freed all at once (a registry
 * snapshot, a merge of snapshots). Large blocks, no per-string malloc: a
 * snapshot of 10^5 series is a few allocations, and freeing it is one walk.
 */
#include <stdlib.h>

#include "stats_internal.h"

#define ARENA_BLOCK_MIN 65536

struct pcpu__arena_block {
	struct pcpu__arena_block *next;
	size_t used, cap;
	_Alignas(16) char data[];
};

void *pcpu__arena_alloc(struct pcpu__arena *a, size_t n)
{
	struct pcpu__arena_block *b = a->blocks;

	n = (n + 15) & ~(size_t)15;
	if (!b || b->cap - b->used < n) {
		size_t cap = n > ARENA_BLOCK_MIN ? n : ARENA_BLOCK_MIN;

		b = malloc(sizeof *b + cap);
		if (!b) {
			a->failed = 1;
			return NULL;
		}
		b->cap = cap;
		b->used = 0;
		b->next = a->blocks;
		a->blocks = b;
	}
	b->used += n;
	return b->data + b->used - n;
}

void pcpu__arena_free(struct pcpu__arena *a)
{
	struct pcpu__arena_block *b, *next;

	for (b = a->blocks; b; b = next) {
		next = b->next;
		free(b);
	}
	a->blocks = NULL;
}
