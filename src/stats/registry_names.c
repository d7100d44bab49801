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

static uint64_t sname_hash(const char *base, const char *suffix)
{
	return pcpu__hash_str(pcpu__hash_str(PCPU__HASH_INIT, base), suffix);
}

/* A name looked up: base + suffix. */
struct name_key {
	const char *base, *suffix;
	size_t baselen;
};

static int name_eq(const struct pcpu__hslot *s, const void *ctx)
{
	const struct pcpu__sname *n = (const struct pcpu__sname *)s->key;
	const struct name_key *k = ctx;

	return strncmp(n->name, k->base, k->baselen) == 0 && strcmp(n->name + k->baselen, k->suffix) == 0;
}

static struct pcpu__hslot *sname_slot(struct pcpu_registry *reg, const char *base, const char *suffix)
{
	struct name_key k = { base, suffix, strlen(base) };

	return pcpu__htab_find(&reg->names, sname_hash(base, suffix), name_eq, &k);
}

struct pcpu__sname *pcpu__sname_find(struct pcpu_registry *reg, const char *base,
				     const char *suffix)
{
	struct pcpu__hslot *s = sname_slot(reg, base, suffix);

	return s ? (struct pcpu__sname *)s->key : NULL;
}

/* Reserves base + suffix for family f. */
int pcpu__sname_add(struct pcpu_registry *reg, struct pcpu_family *f, const char *base,
		    const char *suffix)
{
	size_t bl = strlen(base), sl = strlen(suffix);
	struct pcpu__sname *n = malloc(sizeof *n + bl + sl + 1);

	if (!n)
		return -1;
	memcpy(n->name, base, bl);
	memcpy(n->name + bl, suffix, sl + 1);
	n->fam = f;
	if (pcpu__htab_add(&reg->names, sname_hash(base, suffix), (uintptr_t)n, 0) < 0) {
		free(n);
		return -1;
	}
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
		struct pcpu__hslot *s = k < ns ? sname_slot(reg, f->name, suf[k]) : sname_slot(reg, om, "");

		/* Absent, or another family's, when f's registration failed
		 * half way (family_create_locked() removes what it added). */
		if (s && ((struct pcpu__sname *)s->key)->fam == f) {
			free((void *)s->key);
			pcpu__htab_remove(&reg->names, s);
		}
	}
}

void pcpu__sname_repoint(struct pcpu_registry *reg, struct pcpu_family *from, struct pcpu_family *to)
{
	const char *const *suf;
	size_t k, ns = pcpu__type_suffixes(from->type, &suf);
	char om[PCPU_STATS_NAME_MAX + 1];
	int info = pcpu__info_family_name(from->name, from->flags, om);

	for (k = 0; k < ns + (size_t)info; k++) {
		struct pcpu__hslot *s = k < ns ? sname_slot(reg, from->name, suf[k]) : sname_slot(reg, om, "");

		if (s && ((struct pcpu__sname *)s->key)->fam == from)
			((struct pcpu__sname *)s->key)->fam = to;
	}
}
