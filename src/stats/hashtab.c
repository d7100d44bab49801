/* SPDX-License-Identifier: MIT */
/*
 * The hash table of hashtab.h: open addressing, linear probing, at most
 * half full, deletion by backward shift. Uses libc alone, so the fuzz
 * targets that build the writers without the core build it too.
 */
#include <errno.h>
#include <stdlib.h>

#include "hashtab.h"

/* The 64-bit hash folded to the 32 bits a slot keeps: the high half mixed
 * in, because FNV-1a's low bits depend only on the keys' low bits. */
static uint32_t fold(uint64_t h)
{
	return (uint32_t)(h ^ (h >> 32));
}

static size_t home(const struct pcpu__htab *t, uint32_t h)
{
	return (size_t)h & (t->cap - 1);
}

static int resize(struct pcpu__htab *t, size_t cap)
{
	struct pcpu__hslot *s = calloc(cap, sizeof *s);
	size_t i, j;

	if (!s) {
		errno = ENOMEM;
		return -1;
	}
	for (i = 0; i < t->cap; i++) {
		if (!t->slots[i].key)
			continue;
		for (j = (size_t)t->slots[i].hash & (cap - 1); s[j].key; j = (j + 1) & (cap - 1))
			;
		s[j] = t->slots[i];
	}
	free(t->slots);
	t->slots = s;
	t->cap = cap;
	return 0;
}

int pcpu__htab_reserve(struct pcpu__htab *t, size_t more)
{
	size_t cap = t->cap ? t->cap : 16;

	if (more > ((size_t)1 << 31) - t->used) {
		errno = ENOMEM; /* beyond what 32-bit folded hashes spread */
		return -1;
	}
	while ((t->used + more) * 2 > cap)
		cap *= 2;
	return cap == t->cap ? 0 : resize(t, cap);
}

struct pcpu__hslot *pcpu__htab_find(struct pcpu__htab *t, uint64_t h, pcpu__htab_eq_fn eq,
				    const void *ctx)
{
	uint32_t f = fold(h);
	size_t i;

	t->lookups++;
	if (!t->cap)
		return NULL;
	for (i = home(t, f);; i = (i + 1) & (t->cap - 1)) {
		struct pcpu__hslot *s = &t->slots[i];

		t->probes++;
		if (!s->key)
			return NULL;
		if (s->hash == f && eq(s, ctx))
			return s;
	}
}

struct pcpu__hslot *pcpu__htab_find_key(struct pcpu__htab *t, uint64_t h, uintptr_t key)
{
	uint32_t f = fold(h);
	size_t i;

	if (!t->cap)
		return NULL;
	for (i = home(t, f); t->slots[i].key; i = (i + 1) & (t->cap - 1))
		if (t->slots[i].key == key)
			return &t->slots[i];
	return NULL;
}

int pcpu__htab_add(struct pcpu__htab *t, uint64_t h, uintptr_t key, uint32_t val)
{
	uint32_t f = fold(h);
	size_t i;

	/* The common case, room enough, without the call. */
	if ((t->used + 1) * 2 > t->cap && pcpu__htab_reserve(t, 1) < 0)
		return -1;
	for (i = home(t, f); t->slots[i].key; i = (i + 1) & (t->cap - 1))
		;
	t->slots[i].key = key;
	t->slots[i].hash = f;
	t->slots[i].val = val;
	t->used++;
	return 0;
}

struct pcpu__hslot *pcpu__htab_find_or_add(struct pcpu__htab *t, uint64_t h,
					   pcpu__htab_eq_fn eq, const void *ctx, uintptr_t key,
					   uint32_t val, int *added)
{
	uint32_t f = fold(h);
	size_t i;

	/* Room first, so that the search's empty slot is where it goes. */
	if ((t->used + 1) * 2 > t->cap && pcpu__htab_reserve(t, 1) < 0)
		return NULL;
	t->lookups++;
	for (i = home(t, f);; i = (i + 1) & (t->cap - 1)) {
		struct pcpu__hslot *s = &t->slots[i];

		t->probes++;
		if (!s->key) {
			s->key = key;
			s->hash = f;
			s->val = val;
			t->used++;
			*added = 1;
			return s;
		}
		if (s->hash == f && eq(s, ctx)) {
			*added = 0;
			return s;
		}
	}
}

void pcpu__htab_remove(struct pcpu__htab *t, struct pcpu__hslot *s)
{
	size_t h = (size_t)(s - t->slots), j;

	s->key = 0;
	t->used--;
	/* Backward shift: move each later slot of the run back into the hole
	 * when its home does not lie cyclically in (hole, slot]. */
	for (j = (h + 1) & (t->cap - 1); t->slots[j].key; j = (j + 1) & (t->cap - 1)) {
		size_t hj = home(t, t->slots[j].hash);

		if ((j > h && (hj <= h || hj > j)) || (j < h && hj <= h && hj > j)) {
			t->slots[h] = t->slots[j];
			t->slots[j].key = 0;
			h = j;
		}
	}
}

void pcpu__htab_free(struct pcpu__htab *t)
{
	free(t->slots);
	t->slots = NULL;
	t->cap = t->used = 0;
}
