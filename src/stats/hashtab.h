/* SPDX-License-Identifier: MIT */
/*
 * The library's one hash function and one hash table (hashtab.c), for every
 * table it keeps: the registry's sample names and each family's series, the
 * snapshot merge's family names, the writers' duplicate-series check, and
 * the segment writer's map from directory objects to entries. Internal:
 * nothing here is exported.
 *
 * The hash: FNV-1a, 64 bits. Sequential, so hashing "foo" then "_total"
 * gives the hash of "foo_total": a name made of a base and a suffix is
 * never concatenated to be hashed. Label values are hashed each followed by
 * 0xff, a byte UTF-8 never contains, so ("ab", "c") and ("a", "bc") differ.
 *
 * The table: open addressing with linear probing, at most half full, and
 * deletion by backward shift, so a lookup never meets a tombstone and a
 * table that sees many adds and removes (flows coming and going) does not
 * slow down. A slot holds a nonzero word the caller chooses (a pointer, an
 * index), a 32-bit value beside it (an entry number, an index), and the
 * key's hash folded to 32 bits, which spares most comparisons and lets the
 * table grow without hashing keys again. The caller compares keys (a
 * callback), so one table serves strings, label sets and pointers alike.
 *
 * Why open addressing and not chains: one allocation per table instead of
 * one link per key, and the slots a lookup probes are adjacent. 16 bytes a
 * slot, at most half full: 32 to 64 bytes per key.
 */
#ifndef PCPU_STATS_HASHTAB_H
#define PCPU_STATS_HASHTAB_H

#include <stddef.h>
#include <stdint.h>

#include "../core/core.h"

/* ---- the hash: FNV-1a, 64 bits ---- */

#define PCPU__HASH_INIT 1469598103934665603ull
#define PCPU__HASH_PRIME 1099511628211ull

/* h extended with the bytes of s up to its NUL. */
static inline uint64_t pcpu__hash_str(uint64_t h, const char *s)
{
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * PCPU__HASH_PRIME;
	return h;
}

/* h extended with the n bytes at p. */
static inline uint64_t pcpu__hash_bytes(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;

	for (; n; c++, n--)
		h = (h ^ *c) * PCPU__HASH_PRIME;
	return h;
}

/* h extended with n label values, each followed by 0xff. */
static inline uint64_t pcpu__hash_values(uint64_t h, const char *const *v, unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++)
		h = (pcpu__hash_str(h, v[i]) ^ 0xff) * PCPU__HASH_PRIME;
	return h;
}

/* The hash of an address (a key that is the object itself). */
static inline uint64_t pcpu__hash_ptr(const void *p)
{
	return pcpu__hash_bytes(PCPU__HASH_INIT, &p, sizeof p);
}

/* ---- the table ---- */

struct pcpu__hslot {
	uintptr_t key;  /* the caller's word; 0: an empty slot */
	uint32_t hash;  /* the key's hash, folded */
	uint32_t val;   /* the caller's value */
};

struct pcpu__htab {
	struct pcpu__hslot *slots; /* NULL until the first add */
	size_t cap, used;          /* cap: 0 or a power of two >= 16 */
	size_t lookups, probes;    /* pcpu__htab_find() calls, slots they visited:
				    * lets a test check the hash spreads keys */
};

/* Whether slot s holds the key `ctx` describes. */
typedef int (*pcpu__htab_eq_fn)(const struct pcpu__hslot *s, const void *ctx);

/* Grows t so that `more` keys can be added without failing. 0, or -1 with
 * errno ENOMEM (t unchanged). */
PCPU_HIDDEN int pcpu__htab_reserve(struct pcpu__htab *t, size_t more);
/* The slot of the key with hash h that eq() accepts, or NULL. */
PCPU_HIDDEN struct pcpu__hslot *pcpu__htab_find(struct pcpu__htab *t, uint64_t h,
						pcpu__htab_eq_fn eq, const void *ctx);
/* Adds key (nonzero) with hash h and value val; the caller knows it is not
 * in t yet. 0, or -1 with errno ENOMEM (t unchanged); never fails after a
 * pcpu__htab_reserve() that covered it. */
PCPU_HIDDEN int pcpu__htab_add(struct pcpu__htab *t, uint64_t h, uintptr_t key, uint32_t val);
/* The slot of the key with hash h that eq() accepts (*added = 0), or, if
 * there is none, key (nonzero) added with hash h and value val in the slot
 * the search ended at (*added = 1): one probe sequence where a find and an
 * add would make two. NULL with errno ENOMEM (t unchanged). */
PCPU_HIDDEN struct pcpu__hslot *pcpu__htab_find_or_add(struct pcpu__htab *t, uint64_t h,
						       pcpu__htab_eq_fn eq, const void *ctx,
						       uintptr_t key, uint32_t val, int *added);
/* Removes the key in slot s (from pcpu__htab_find() or a walk of the
 * slots); the other slots may move. */
PCPU_HIDDEN void pcpu__htab_remove(struct pcpu__htab *t, struct pcpu__hslot *s);
/* The key of word `key` and hash h, or NULL: for keys compared as words. */
PCPU_HIDDEN struct pcpu__hslot *pcpu__htab_find_key(struct pcpu__htab *t, uint64_t h,
						    uintptr_t key);
/* Frees the slots; t is empty and usable again. */
PCPU_HIDDEN void pcpu__htab_free(struct pcpu__htab *t);

#endif /* PCPU_STATS_HASHTAB_H */
