/* SPDX-License-Identifier: MIT */
/*
 * The sources by path: what pcpu_exporter_add_source() and its kin keep,
 * how a request finds one, and how removal waits for the requests using
 * it. Also the one built-in source, a registry (pcpu_exporter_add_registry()).
 *
 * Locking: e->lock over the table, held for comparisons and copies only --
 * never while a source or a password check runs. A request holds its
 * source (holds++) from the lookup to the end of the source's call;
 * removal takes the source out of the table first (no new request finds
 * it), then waits for its holds to drop to 0, so that what the source
 * reads may be freed as soon as pcpu_exporter_remove_source() returns. A
 * mutex and a count rather than a reader-writer lock: readers that keep
 * coming (scrapes from several threads) never starve a removal.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exporter_internal.h"

int pcpu__exp_check_realm(const char *realm)
{
	if (!realm || strlen(realm) > PCPU_EXP_REALM_MAX || strpbrk(realm, "\"\\\r\n"))
		return pcpu__exp_fail(EINVAL, "a realm is at most %d bytes, without '\"', '\\', CR or LF",
				      PCPU_EXP_REALM_MAX);
	return 0;
}

static int check_path(const char *path)
{
	if (!path || path[0] != '/' || strlen(path) > PCPU_EXP_PATH_MAX)
		return pcpu__exp_fail(EINVAL, "a path starts with '/' and is at most %d bytes",
				      PCPU_EXP_PATH_MAX);
	return 0;
}

/* The index of the source at exactly `path`, or -1 (lock held). */
static long find_exact(const struct pcpu_exporter *e, const char *path)
{
	size_t i;

	for (i = 0; i < e->nsources; i++)
		if (strcmp(e->sources[i]->path, path) == 0)
			return (long)i;
	return -1;
}

int pcpu_exporter_add_source(pcpu_exporter_t *e, const char *path, unsigned flags, unsigned formats,
			     pcpu_exporter_source_fn *fn, void *arg)
{
	struct pcpu__exp_source *s;
	size_t len;

	if (!e || !fn)
		return pcpu__exp_fail(EINVAL, "pcpu_exporter_add_source: NULL exporter or source");
	if (check_path(path) < 0)
		return -1;
	if (flags & ~(unsigned)PCPU_EXPORTER_PREFIX)
		return pcpu__exp_fail(EINVAL, "pcpu_exporter_add_source: unknown flags 0x%x", flags);
	len = strlen(path);
	/* "/metrics/" as a prefix is "/metrics": REST never starts with '/'. */
	while ((flags & PCPU_EXPORTER_PREFIX) && len > 1 && path[len - 1] == '/')
		len--;
	s = calloc(1, sizeof *s);
	if (!s)
		return pcpu__exp_fail(ENOMEM, "out of memory");
	memcpy(s->path, path, len);
	s->pathlen = len;
	s->flags = flags;
	s->formats = formats ? formats
			     : PCPU_EXPORTER_FORMAT(PCPU_FORMAT_PROMETHEUS) |
				       PCPU_EXPORTER_FORMAT(PCPU_FORMAT_OPENMETRICS) |
				       PCPU_EXPORTER_FORMAT(PCPU_FORMAT_PROTOBUF);
	s->fn = fn;
	s->arg = arg;
	pthread_mutex_lock(&e->lock);
	if (find_exact(e, s->path) >= 0) {
		pthread_mutex_unlock(&e->lock);
		free(s);
		return pcpu__exp_fail(EEXIST, "%s is served already", path);
	}
	if (e->nsources == e->capsources) {
		size_t cap = e->capsources ? e->capsources * 2 : 4;
		struct pcpu__exp_source **p = realloc(e->sources, cap * sizeof *p);

		if (!p) {
			pthread_mutex_unlock(&e->lock);
			free(s);
			return pcpu__exp_fail(ENOMEM, "out of memory");
		}
		e->sources = p;
		e->capsources = cap;
	}
	e->sources[e->nsources++] = s;
	pthread_mutex_unlock(&e->lock);
	return 0;
}

struct pcpu__exp_source *pcpu__exp_source_find(struct pcpu_exporter *e, const char *path, const char **rest)
{
	struct pcpu__exp_source *best = NULL;
	size_t i;

	pthread_mutex_lock(&e->lock);
	for (i = 0; i < e->nsources; i++) {
		struct pcpu__exp_source *s = e->sources[i];

		if (strcmp(s->path, path) == 0) {
			best = s;
			*rest = "";
			break;
		}
		/* A prefix: PATH/REST, REST not empty; "/" serves everything. */
		if ((s->flags & PCPU_EXPORTER_PREFIX) && (!best || s->pathlen > best->pathlen) &&
		    strncmp(path, s->path, s->pathlen) == 0 &&
		    (s->pathlen == 1 ? path[1] != '\0' : path[s->pathlen] == '/' && path[s->pathlen + 1] != '\0')) {
			best = s;
			*rest = path + s->pathlen + (s->pathlen == 1 ? 0 : 1);
		}
	}
	if (best)
		best->holds++;
	pthread_mutex_unlock(&e->lock);
	return best;
}

void pcpu__exp_source_release(struct pcpu_exporter *e, struct pcpu__exp_source *s)
{
	pthread_mutex_lock(&e->lock);
	if (--s->holds == 0)
		pthread_cond_broadcast(&e->released);
	pthread_mutex_unlock(&e->lock);
}

void pcpu__exp_source_auth(struct pcpu_exporter *e, const struct pcpu__exp_source *s, pcpu_exporter_auth_fn **fn,
			   void **arg, char *realm)
{
	pthread_mutex_lock(&e->lock);
	*fn = s->auth;
	*arg = s->auth_arg;
	memcpy(realm, s->realm, sizeof s->realm);
	pthread_mutex_unlock(&e->lock);
}

int pcpu_exporter_set_source_auth(pcpu_exporter_t *e, const char *path, pcpu_exporter_auth_fn *fn, void *arg,
				  const char *realm)
{
	long i;

	if (!e || check_path(path) < 0 || (fn && pcpu__exp_check_realm(realm) < 0))
		return e ? -1 : pcpu__exp_fail(EINVAL, "NULL exporter");
	pthread_mutex_lock(&e->lock);
	i = find_exact(e, path);
	if (i < 0) {
		pthread_mutex_unlock(&e->lock);
		return pcpu__exp_fail(ENOENT, "%s is not served", path);
	}
	e->sources[i]->auth = fn;
	e->sources[i]->auth_arg = fn ? arg : NULL;
	snprintf(e->sources[i]->realm, sizeof e->sources[i]->realm, "%s", fn ? realm : "");
	pthread_mutex_unlock(&e->lock);
	return 0;
}

int pcpu_exporter_remove_source(pcpu_exporter_t *e, const char *path)
{
	struct pcpu__exp_source *s;
	long i;

	if (!e || !path)
		return pcpu__exp_fail(EINVAL, "NULL exporter or path");
	pthread_mutex_lock(&e->lock);
	i = find_exact(e, path);
	if (i < 0) {
		pthread_mutex_unlock(&e->lock);
		return pcpu__exp_fail(ENOENT, "%s is not served", path);
	}
	s = e->sources[i];
	e->sources[i] = e->sources[--e->nsources];
	while (s->holds)
		pthread_cond_wait(&e->released, &e->lock);
	pthread_mutex_unlock(&e->lock);
	free(s);
	return 0;
}

void pcpu__exp_sources_free(struct pcpu_exporter *e)
{
	size_t i;

	for (i = 0; i < e->nsources; i++)
		free(e->sources[i]);
	free(e->sources);
	e->sources = NULL;
	e->nsources = e->capsources = 0;
}

/* ---- a registry as a source --------------------------------------------------------- */

static void registry_source(void *arg, struct pcpu_exporter_scrape *s)
{
	if (pcpu_registry_write(arg, s->format, &s->body, &s->len) < 0) {
		/* A body without some series would pass for a whole one: say
		 * why instead. */
		s->body = NULL;
		s->status = errno == ENOMEM ? 503 : 500;
		snprintf(s->message, sizeof s->message, "pcpu_registry_write: %s", pcpu_stats_error());
	}
}

int pcpu_exporter_add_registry(pcpu_exporter_t *e, const char *path, pcpu_registry_t *reg)
{
	if (!reg)
		return pcpu__exp_fail(EINVAL, "pcpu_exporter_add_registry: NULL registry");
	return pcpu_exporter_add_source(e, path, 0, 0, registry_source, reg);
}
