/* SPDX-License-Identifier: MIT */
/*
 * pcpustat: shared declarations of the command-line tool (pcpustat.c: list,
 * print, watch; serve.c: the Prometheus exporter; names.c, filter.c,
 * users.c: series names, filters, users). The tool uses only pcpu's public
 * API (pcpu/reader.h and pcpu/expose.h) and libc.
 */
#ifndef PCPUSTAT_H
#define PCPUSTAT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <pcpu/expose.h>
#include <pcpu/exporter.h>
#include <pcpu/reader.h>

#include <pcpu/runtime_version.h>
#include <pcpu/version.h>

/* The tool is pcpu's: its version is the project's (CMake's, through
 * pcpu/version.h), never a second number to keep in step. */
#define PCPUSTAT_VERSION PCPU_VERSION_STRING

/* ---- gzip: libpcpu-exporter's, the one implementation ---- */

/* The gzip member of body[0..len) at zlib `level` (1: most of the gain on
 * exposition text, about 10x, for a fraction of the default level's CPU
 * time), malloc'ed, its length in *zlen; NULL if it cannot be made (no
 * memory, over 4 GiB): the caller then sends the body plain. */
static inline char *gzip_body(const void *body, size_t len, int level, size_t *zlen)
{
	return pcpu_exporter_gzip(body, len, level, zlen);
}

/* ---- names.c: series names and strings ---- */

/* A stream writing into memory (open_memstream): *p and *len hold the text
 * after fflush() or fclose(); free(*p) after fclose(). Exits the tool
 * without memory. */
FILE *mem_open(char **p, size_t *len);

/* "name{l1="v1",l2="v2"}" as the exposition writes it (counters get _total);
 * control characters in label values are escaped so a terminal is safe. */
void series_name(FILE *b, const struct pcpu_snapshot_family *f,
		 const struct pcpu_snapshot_series *s);
/* The exposition name of a family: counters with "_total". */
void family_name(FILE *b, const struct pcpu_snapshot_family *f);
/* The same as strings to free(). */
char *series_name_str(const struct pcpu_snapshot_family *f, const struct pcpu_snapshot_series *s);
char *family_name_str(const struct pcpu_snapshot_family *f);

/* JSON string with quotes, escaped. */
void json_string(FILE *b, const char *s);

/* ---- filter.c ---- */

/* Series filters: shell patterns (fnmatch) on the family's exposition name
 * or the whole series name, and POSIX extended regular expressions on the
 * whole series name. */
struct filter;
struct filter *filter_new(void);
int filter_add_glob(struct filter *f, const char *pattern);
int filter_add_regex(struct filter *f, const char *re, char *err, size_t errlen);
int filter_empty(const struct filter *f);
int filter_match(const struct filter *f, const struct pcpu_snapshot_family *fam,
		 const struct pcpu_snapshot_series *s);
void filter_free(struct filter *f);

/* A snapshot reduced to the matching series (families without any left
 * out); points into `s`. Free with filtered_free(). `index` maps each kept
 * series back: index[f][i] = series index in the original family `forig[f]`. */
struct filtered {
	struct pcpu_snapshot snap;
	struct pcpu_snapshot_family *fams;
	size_t *forig;
	size_t **sorig;
};
int filtered_make(struct filtered *out, const struct pcpu_snapshot *s, const struct filter *f);
void filtered_free(struct filtered *out);

/* ---- users.c ---- */

/* Parses "USER" or a uid. 0 or -1. */
int parse_user(const char *s, unsigned *uid);
/* User name of a uid, or the number. */
const char *user_name(unsigned uid, char *buf, size_t cap);

/* ---- scrape.c: what the exporter answers a scrape with ---- */

struct scrape_config {
	struct pcpu_reader_options ropt;
	char **targets; /* from the command line; none: every segment listed */
	size_t ntargets;
	size_t max_bytes; /* what one scrape may read and allocate */
	size_t max_down;  /* listed segments down: reported per owner, the rest counted */
	const char *who;  /* stderr's prefix; NULL: "pcpustat serve" */
	/* Readers kept open from one scrape to the next (0: none), each
	 * holding a descriptor: the next snapshot of an unchanged directory
	 * then reads only the values (pcpu_reader_snapshot()). */
	size_t keep_readers;
};
/* The last message per segment, so stderr says each change once:
 * fingerprints of its key and message (0: readable). */
struct scrape_note {
	uint64_t key, msg;
};
struct scrape_kept; /* scrape_read.c */
struct scrape_state {
	struct scrape_note *notes; /* sorted by key */
	size_t nnotes;
	/* The readers kept (at most cf->keep_readers), by key; those of
	 * segments no scrape read for a few sweeps (one after each /metrics
	 * scrape) are closed. */
	struct scrape_kept *kept;
	size_t nkept;
	unsigned long sweeps;
	/* Bytes of the largest scrape since memory was last given back. */
	size_t used_max;
};
struct scrape_result {
	int status;  /* HTTP status */
	char *body;  /* 200: the exposition (free()), else NULL */
	size_t len;
	char msg[400]; /* not 200: why */
};
/* /metrics: every served segment, labelled, with pcpu_segment_up. */
void scrape_all(const struct scrape_config *cf, struct scrape_state *st, enum pcpu_format fmt,
		struct scrape_result *res);
/* /metrics/SEGMENT: one segment (name, pid or file name), unlabelled; st
 * (NULL: none) keeps its reader. */
void scrape_one(const struct scrape_config *cf, struct scrape_state *st, const char *target, enum pcpu_format fmt,
		struct scrape_result *res);
void scrape_state_free(struct scrape_state *st);
/* The same as scrape_all() before it is written (for `pcpustat push`): the
 * merged snapshot, valid until scrape_release(*hold); res->len is what is
 * left of cf->max_bytes. NULL with res saying why (*hold NULL). */
struct scrape_hold;
const struct pcpu_snapshot *scrape_collect(const struct scrape_config *cf, struct scrape_state *st,
					   struct scrape_hold **hold, struct scrape_result *res);
/* A listed segment's publication time (ns since the Epoch), by the
 * pcpu_segment and pcpu_pid labels its series carry; 0 when unknown (named
 * on the command line, or not served). Linear in the segments. */
uint64_t scrape_created_ns(const struct scrape_hold *h, const char *name, const char *pid);
void scrape_release(struct scrape_hold *h);
/* Makes the allocator give a scrape's memory back when it is freed (once,
 * before serving). */
void scrape_memory_setup(void);
/* A segment name, pid or file name; never a path. */
int valid_target(const char *t);
/* The SEGMENT arguments of serve and push (segment_args.c): names, pids,
 * file names or paths. 0, or -1 after saying which is not, as `who`. */
int check_segment_args(const char *who, char *const *args, size_t n);

/* ---- serve.c ---- */

int serve_main(int argc, char **argv, const struct pcpu_reader_options *ropt);
/* A size of at least 4K, with an optional K, M or G suffix (--max-bytes):
 * 0, or -1. */
int parse_bytes(const char *s, size_t *out);

/* ---- flows.c: `pcpustat flows` (flows tables, format 2.9) ---- */

int flows_main(int argc, char **argv, const struct pcpu_reader_options *ropt);

/* ---- push.c (push.h) ---- */

int push_main(int argc, char **argv, const struct pcpu_reader_options *ropt);

#endif /* PCPUSTAT_H */
