/* SPDX-License-Identifier: MIT */
/*
 * The registry's sample-name table: every sample name a family reserves,
 * mapped to that family.
 *
 * Why: OpenMetrics reserves, for each family, its name plus its type's
 * suffixes (a counter `x` owns x, x_total, x_created; a histogram owns
 * x_bucket, x_count, x_sum...). A strict parser rejects an exposition where
 * two families own one name, so the registry refuses the second family at
 * registration with EEXIST instead. The same table finds a family by name,
 * counters also by their `_total` name. Names are hashed as base + suffix
 * (the hash is sequential, hash.h), never concatenated to be looked up.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"

#define FNV_OFFSET PCPU__FNV_OFFSET
#define FNV_PRIME 1099511628211ull
#define fnv pcpu__fnv1a

/* ---- the sample-name table ---- */

static uint64_t sname_hash(const char *base, const char *suffix)
{
	return fnv(fnv(FNV_OFFSET, base), suffix);
}

struct pcpu__sname *pcpu__sname_find(struct pcpu_registry *reg, const char *base,
				      const char *suffix)
{
	uint64_t h = sname_hash(base, suffix);
	size_t bl = strlen(base);
	struct pcpu__sname *n;

	if (!reg->namesize)
		return NULL;
	for (n = reg->names[h & (reg->namesize - 1)]; n; n = n->hnext)
		if (n->hash == h && strncmp(n->name, base, bl) == 0 &&
		    strcmp(n->name + bl, suffix) == 0)
			return n;
	return NULL;
}

static int sname_grow(struct pcpu_registry *reg)
{
	size_t ns = reg->namesize ? reg->namesize * 2 : 64, i;
	struct pcpu__sname **t = calloc(ns, sizeof *t);

	if (!t)
		return -1;
	for (i = 0; i < reg->namesize; i++) {
		struct pcpu__sname *n = reg->names[i], *next;
		for (; n; n = next) {
			next = n->hnext;
			n->hnext = t[n->hash & (ns - 1)];
			t[n->hash & (ns - 1)] = n;
		}
	}
	free(reg->names);
	reg->names = t;
	reg->namesize = ns;
	return 0;
}

/* Reserves base + suffix for family f. */
int pcpu__sname_add(struct pcpu_registry *reg, struct pcpu_family *f, const char *base,
		     const char *suffix)
{
	size_t bl = strlen(base), sl = strlen(suffix);
	struct pcpu__sname *n;

	if (reg->nnames >= reg->namesize && sname_grow(reg) < 0)
		return -1;
	n = malloc(sizeof *n + bl + sl + 1);
	if (!n)
		return -1;
	memcpy(n->name, base, bl);
	memcpy(n->name + bl, suffix, sl + 1);
	n->hash = sname_hash(base, suffix);
	n->fam = f;
	n->hnext = reg->names[n->hash & (reg->namesize - 1)];
	reg->names[n->hash & (reg->namesize - 1)] = n;
	reg->nnames++;
	return 0;
}

/*
 * An info family (PCPU_SNAPSHOT_INFO) `x_info` also owns `x`: OpenMetrics
 * writes it as family `x` of type info (`# TYPE x info`, sample x_info),
 * and a strict parser refuses a second family `x`. Writes that name to
 * `out` and returns 1 for an info family, else 0.
 */
int pcpu__info_family_name(const char *name, unsigned flags, char out[PCPU_STATS_NAME_MAX + 1])
{
	size_t n = pcpu__info_name_len(name, flags);

	if (!n)
		return 0;
	memcpy(out, name, n);
	out[n] = '\0';
	return 1;
}

void pcpu__sname_remove_family(struct pcpu_registry *reg, struct pcpu_family *f)
{
	const char *const *suf;
	size_t k, ns = pcpu__type_suffixes(f->type, &suf);
	char om[PCPU_STATS_NAME_MAX + 1];
	int info = pcpu__info_family_name(f->name, f->flags, om);

	for (k = 0; k < ns + (size_t)info; k++) {
		uint64_t h = k < ns ? sname_hash(f->name, suf[k]) : sname_hash(om, "");
		struct pcpu__sname **pp;

		if (!reg->namesize)
			return;
		for (pp = &reg->names[h & (reg->namesize - 1)]; *pp; pp = &(*pp)->hnext) {
			if ((*pp)->fam == f && (*pp)->hash == h) {
				struct pcpu__sname *n = *pp;
				*pp = n->hnext;
				free(n);
				reg->nnames--;
				break;
			}
		}
	}
}
