/* SPDX-License-Identifier: MIT */
/*
 * The push encoders' scratch memory: protobuf-c packs from a tree of
 * message structs, one or more per series (10^5 series: hundreds of
 * thousands of small objects), which a bump allocator hands out from a few
 * large chunks and frees whole after the push -- no malloc per object, no
 * free walk, and what the agent keeps between pushes is one chunk.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "push.h"

#define CHUNK_MIN ((size_t)256 << 10)
#define ALIGN 16

struct arena_chunk {
	struct arena_chunk *next;
	size_t size, used; /* of data[] */
	_Alignas(ALIGN) unsigned char data[];
};

void *arena_alloc(struct arena *a, size_t n)
{
	struct arena_chunk *c = a->head;
	size_t want = (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
	void *p;

	if (want < n) {
		errno = ENOMEM;
		return NULL;
	}
	if (!c || c->size - c->used < want) {
		size_t size = want > CHUNK_MIN ? want : CHUNK_MIN;

		if (c && c->size * 2 > size && c->size < ((size_t)64 << 20))
			size = c->size * 2; /* fewer chunks as a push grows */
		c = malloc(sizeof *c + size);
		if (!c)
			return NULL;
		c->size = size;
		c->used = 0;
		c->next = a->head;
		a->head = c;
		a->bytes += sizeof *c + size;
	}
	p = c->data + c->used;
	c->used += want;
	return p;
}

void *arena_array(struct arena *a, size_t n, size_t sz)
{
	if (sz && n > SIZE_MAX / sz) {
		errno = ENOMEM;
		return NULL;
	}
	return arena_alloc(a, n * sz != 0 ? n * sz : 1);
}

char *arena_strdup(struct arena *a, const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = arena_alloc(a, n);

	if (p)
		memcpy(p, s, n);
	return p;
}

void arena_reset(struct arena *a)
{
	struct arena_chunk *c = a->head, *next;

	if (!c)
		return;
	/* Keep the oldest (smallest) chunk: the next push starts there. */
	while (c->next) {
		next = c->next;
		a->bytes -= sizeof *c + c->size;
		free(c);
		c = next;
	}
	c->used = 0;
	a->head = c;
}

void arena_free(struct arena *a)
{
	struct arena_chunk *c = a->head, *next;

	for (; c; c = next) {
		next = c->next;
		free(c);
	}
	a->head = NULL;
	a->bytes = 0;
}
