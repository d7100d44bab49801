/* SPDX-License-Identifier: MIT */
/*
 * counter9_sysctl.c: counter(9) counters bound to registry names
 * (pcpu/counter9_sysctl.h).
 *
 * Binding moves a counter into the registry's zone: the registry's series
 * must live there for a published segment to hold them, and a counter from
 * counter_u64_alloc() lives in pcpu's default zone. The move is
 * fetch-and-zero of the old counter, an add of that value to the new one,
 * and the swap of the caller's pointer, done before any other thread uses
 * the counters (the documented precondition), so no add is lost.
 *
 * SYSCTL_COUNTER_U64 at file scope records a binding from a constructor;
 * the records form a list, attached in record order under one mutex (taken
 * around fork() by no one: binding happens at initialisation).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pcpu/counter9_sysctl.h>

#include "stats_internal.h"
#include "../core/core.h"

static pthread_mutex_t records_lock = PTHREAD_MUTEX_INITIALIZER;
static int fork_registered;

/* fork(): attaching holds the lock across registry calls (fork.c, the
 * highest rank: it is taken before any registry's). */
static void records_prepare(void)
{
	pthread_mutex_lock(&records_lock);
}

static void records_release(void)
{
	pthread_mutex_unlock(&records_lock);
}
static struct pcpu_counter9_sysctl *records_head, **records_tail = &records_head;

/* The `field` label value of element i: its name, or its index. */
static const char *field_value(const char *const *fields, size_t i, char *buf, size_t size)
{
	if (fields)
		return fields[i];
	snprintf(buf, size, "%zu", i);
	return buf;
}

int pcpu_counter9_bind(pcpu_registry_t *reg, const char *name, const char *help,
		       uint64_t **ctrs, size_t n, const char *const *fields)
{
	static const char *const field_label[] = {"field"};
	struct pcpu_family_desc d;
	pcpu_family_t *fam;
	pcpu_counter_t *fresh;
	int labelled = n > 1 || fields;
	size_t i;

	if (!reg || !name || !ctrs || n == 0) {
		pcpu__set_error("counter9 bind: needs a registry, a name and counters");
		errno = EINVAL;
		return -1;
	}
	memset(&d, 0, sizeof(d));
	d.name = name;
	d.help = help;
	d.type = PCPU_METRIC_COUNTER;
	d.nlabels = labelled ? 1 : 0;
	d.label_names = labelled ? field_label : NULL;
	fam = pcpu_registry_family(reg, &d);
	if (!fam)
		return -1;
	fresh = calloc(n, sizeof(*fresh));
	if (!fresh) {
		errno = ENOMEM;
		return -1;
	}
	/* First every new series, so a failure moves nothing. */
	for (i = 0; i < n; i++) {
		char index[24];
		const char *value[1];

		value[0] = field_value(fields, i, index, sizeof(index));
		if (pcpu_family_lookup(fam, labelled ? value : NULL)) {
			pcpu__set_error("counter9 bind: a series with these labels exists already");
			errno = EEXIST;
			break;
		}
		fresh[i] = pcpu_family_counter(fam, labelled ? value : NULL);
		if (!fresh[i])
			break;
	}
	if (i < n) {
		int err = errno;

		while (i-- > 0) {
			char index[24];
			const char *value[1];

			value[0] = field_value(fields, i, index, sizeof(index));
			(void)pcpu_family_remove(fam, labelled ? value : NULL);
		}
		free(fresh);
		errno = err;
		return -1;
	}
	for (i = 0; i < n; i++) {
		pcpu_counter_t old = (pcpu_counter_t)(void *)ctrs[i];

		if (old) {
			pcpu_counter_add(fresh[i], (int64_t)pcpu_counter_fetch_and_zero(old));
			(void)pcpu_counter_free(old);
		}
		ctrs[i] = (uint64_t *)(void *)fresh[i];
	}
	free(fresh);
	return 0;
}

void pcpu_counter9_sysctl_add(struct pcpu_counter9_sysctl *s)
{
	if (!s)
		return;
	(void)pcpu__fork_register(&fork_registered, PCPU_FORK_SYSCTL, records_prepare,
				 records_release, records_release);
	pthread_mutex_lock(&records_lock);
	s->pcpu__next = NULL;
	*records_tail = s;
	records_tail = &s->pcpu__next;
	pthread_mutex_unlock(&records_lock);
}

int pcpu_counter9_sysctl_attach(pcpu_registry_t *reg)
{
	int attached = 0;

	if (!reg) {
		errno = EINVAL;
		return -1;
	}
	(void)pcpu__fork_register(&fork_registered, PCPU_FORK_SYSCTL, records_prepare,
				 records_release, records_release);
	pthread_mutex_lock(&records_lock);
	while (records_head) {
		struct pcpu_counter9_sysctl *s = records_head;
		const char *parent = s->pcpu__parent;
		size_t len;
		char *name;
		int rc;

		while (*parent == '_')
			parent++;
		len = strlen(parent) + 1 + strlen(s->pcpu__name) + 1;
		name = malloc(len);
		if (!name) {
			pthread_mutex_unlock(&records_lock);
			errno = ENOMEM;
			return -1;
		}
		snprintf(name, len, "%s%s%s", parent, *parent ? "_" : "", s->pcpu__name);
		rc = pcpu_counter9_bind(reg, name, s->pcpu__descr, s->pcpu__ctrs, s->pcpu__n,
					NULL);
		free(name);
		if (rc != 0) {
			pthread_mutex_unlock(&records_lock);
			return -1;
		}
		records_head = s->pcpu__next;
		if (!records_head)
			records_tail = &records_head;
		attached++;
	}
	pthread_mutex_unlock(&records_lock);
	return attached;
}
