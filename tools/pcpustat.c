/* SPDX-License-Identifier: MIT */
/*
 * pcpustat: reads the statistics segments that pcpu applications publish
 * (pcpu/segment.h) -- lists them, prints one like `netstat -s`, watches one
 * like `vmstat 1` with per-second rates, or serves them to Prometheus
 * (`pcpustat serve`, serve.c). `pcpustat --help` and pcpustat(1) say how.
 *
 * Output design: one line per series, "name{labels}  value", names as the
 * Prometheus exposition writes them (so what you see is what you query).
 * Histograms print count, sum and p50/p90/p99. Watch mode's rates are for
 * people: three significant digits and an SI prefix ("2.30 G/s",
 * si_format(), si.c), values as exposed. Watch mode redraws in place
 * on a terminal (clear + home, cursor hidden, restored on exit or Ctrl-C)
 * and prints plain blocks separated by blank lines into a pipe.
 *
 * Exit status: 0 success, 1 error (no such segment, permission denied,
 * incompatible version, writer gone...), 2 usage error.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include <pcpu/rseq.h> /* pcpu_environment_error() */

#include "pcpustat.h"
#include "si.h"

static const char usage_text[] =
	"Usage:\n"
	"  pcpustat [OPTIONS]                      list the statistics segments on this machine\n"
	"  pcpustat [OPTIONS] SEGMENT [PATTERN...] print a segment's statistics\n"
	"  pcpustat -w [-i SECS] SEGMENT [PATTERN...]  watch them, with per-second rates\n"
	"  pcpustat serve [OPTIONS] [SEGMENT...]   serve /metrics to Prometheus (see serve --help)\n"
	"  pcpustat push (--remote-write URL | --otlp URL) [OPTIONS] [SEGMENT...]\n"
	"                                          push them on an interval (see push --help)\n"
	"  pcpustat flows SEGMENT [TABLE]          its flows tables, a table's top flows\n"
	"                                          (see flows --help)\n"
	"  pcpustat --prune                        remove segments whose process is gone\n"
	"\n"
	"pcpu applications publish their statistics with pcpu_segment_publish() as a\n"
	"segment: a file named pcpu.PID.NAME in the user's own directory\n"
	"/dev/shm/pcpu-UID (or in $PCPU_SEGMENT_DIR).\n"
	"SEGMENT is its NAME, the PID of its process, the file name, or a path.\n"
	"PATTERN keeps only the metrics whose name (as Prometheus shows it, counters\n"
	"with _total) or whole series name{labels} matches the shell pattern,\n"
	"e.g. 'http_*' or '*method=\"GET\"*'.\n"
	"\n"
	"Options:\n"
	"  -e, --regex RE      keep series whose name{labels} matches the extended regular\n"
	"                      expression RE (may be repeated; ORed with the PATTERNs)\n"
	"  -j, --json          print JSON instead of text\n"
	"  -p, --per-cpu       also print each slot's part of every value: cpuN or cidN\n"
	"                      for CPU slots (CPUs, or rseq concurrency ids: the header\n"
	"                      line says which), ownedK for pinned workers' owned slots\n"
	"  -w, --watch[=SECS]  redraw every SECS seconds (default 1) with per-second rates,\n"
	"                      like vmstat; Ctrl-C quits\n"
	"  -i, --interval SECS the same as --watch=SECS\n"
	"  -c, --count N       with --watch, stop after N refreshes\n"
	"  -d, --dir DIR       segment directory (default $PCPU_SEGMENT_DIR, else the\n"
	"                      per-user directories /dev/shm/pcpu-UID)\n"
	"  -u, --owner USER    read segments owned by USER (default: yourself; root: anyone)\n"
	"  -a, --any-owner     read segments of any owner you have access to\n"
	"      --stale         show the last values of a segment whose process is gone\n"
	"      --prune         remove the segments of processes that are gone (never one\n"
	"                      whose state is unknown)\n"
	"  -h, --help          this help;  -V, --version  the version\n"
	"\n"
	"Examples:\n"
	"  pcpustat                         which processes publish statistics\n"
	"  pcpustat forwarder               all statistics of the 'forwarder' process\n"
	"  pcpustat -i 2 forwarder 'fwd_*'  watch its fwd_ metrics every 2 s\n"
	"  pcpustat --json 1234 | jq .      process 1234's statistics as JSON\n"
	"  pcpustat serve forwarder         serve them on http://127.0.0.1:9464/metrics\n"
	"  pcpustat push --remote-write http://prom:9090/api/v1/write forwarder\n"
	"                                   send them to Prometheus every 15 s\n"
	"\n"
	"Exit status: 0 ok, 1 error (no such segment, permission denied, incompatible\n"
	"version, writer gone), 2 usage.  See pcpustat(1).\n";

struct opts {
	struct pcpu_reader_options r;
	struct filter *filter;
	int json, per_cpu, watch, stale, prune;
	double interval;
	long count;
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int fail(const char *what)
{
	fprintf(stderr, "pcpustat: %s%s%s\n", what ? what : "", what ? ": " : "", pcpu_reader_error());
	return 1;
}

/* ---- list ------------------------------------------------------------------------ */

static const char *state_name(const struct pcpu_segment_info *in, char *buf, size_t cap)
{
	if (in->error == EACCES)
		return "permission denied";
	if (in->error == EPERM)
		return "other owner (see -u/-a)";
	if (in->error == EPROTONOSUPPORT)
		return "incompatible version";
	if (in->error == EAGAIN)
		return "starting";
	if (in->error) {
		snprintf(buf, cap, "unreadable: %s", strerror(in->error));
		return buf;
	}
	if (in->state == PCPU_SEGMENT_UNKNOWN) {
		snprintf(buf, cap, "unknown: %s",
			 in->state_errno == EXDEV ? "another pid namespace" : strerror(in->state_errno));
		return buf;
	}
	return in->state == PCPU_SEGMENT_LIVE ? "live" : in->state == PCPU_SEGMENT_CLOSED ? "closed" : "gone";
}

static const char *state_word(enum pcpu_segment_state st)
{
	switch (st) {
	case PCPU_SEGMENT_LIVE:
		return "live";
	case PCPU_SEGMENT_CLOSED:
		return "closed";
	case PCPU_SEGMENT_GONE:
		return "gone";
	default:
		return "unknown";
	}
}

static int cmd_list(const struct opts *o)
{
	struct pcpu_segment_info *info;
	size_t n, i;

	if (pcpu_segment_list(&o->r, &info, &n) < 0)
		return fail(NULL);
	if (o->json) {
		char *bp = NULL;
		size_t blen = 0;
		FILE *b = mem_open(&bp, &blen);

		fputs("{\"segments\":[", b);
		for (i = 0; i < n; i++) {
			char st[96];
			fprintf(b, "%s{\"name\":", i ? "," : "");
			json_string(b, info[i].name);
			fprintf(b, ",\"pid\":%d,\"uid\":%u,\"state\":", (int)info[i].pid,
				  (unsigned)info[i].owner);
			json_string(b, state_name(&info[i], st, sizeof st));
			fprintf(b, ",\"families\":%llu,\"series\":%llu,\"slots\":%u}",
				  (unsigned long long)info[i].nfamilies,
				  (unsigned long long)info[i].nseries, info[i].nslots);
		}
		fputs("]}\n", b);
		fclose(b);
		fwrite(bp, 1, blen, stdout);
		free(bp);
	} else if (n == 0) {
		if (o->r.dir || getenv("PCPU_SEGMENT_DIR"))
			printf("no statistics segments in %s\n", o->r.dir ? o->r.dir : getenv("PCPU_SEGMENT_DIR"));
		else if (o->r.flags & PCPU_READER_ANY_OWNER)
			printf("no statistics segments in /dev/shm/pcpu-*\n");
		else
			printf("no statistics segments in /dev/shm/pcpu-%u\n",
			       (unsigned)((o->r.flags & PCPU_READER_OWNER) ? o->r.owner : geteuid()));
	} else {
		printf("%-8s %-24s %-10s %8s %8s %5s  %s\n", "PID", "NAME", "USER", "METRICS", "SERIES",
		       "SLOTS", "STATE");
		for (i = 0; i < n; i++) {
			char user[64], st[96];
			const struct pcpu_segment_info *in = &info[i];

			if (in->error)
				printf("%-8d %-24s %-10s %8s %8s %5s  %s\n", (int)in->pid, in->name,
				       user_name(in->owner, user, sizeof user), "-", "-", "-",
				       state_name(in, st, sizeof st));
			else
				printf("%-8d %-24s %-10s %8llu %8llu %5u  %s\n", (int)in->pid, in->name,
				       user_name(in->owner, user, sizeof user),
				       (unsigned long long)in->nfamilies, (unsigned long long)in->nseries,
				       in->nslots, state_name(in, st, sizeof st));
		}
	}
	free(info);
	return 0;
}

static int cmd_prune(const struct opts *o)
{
	size_t removed;

	if (pcpu_segment_prune(&o->r, &removed) < 0)
		return fail(NULL);
	printf("removed %zu segment%s of processes that are gone\n", removed, removed == 1 ? "" : "s");
	return 0;
}

/* ---- print ----------------------------------------------------------------------- */

static const char *slot_word(const pcpu_reader_t *r)
{
	return pcpu_reader_slot_index(r) == 1 ? "cpu" : "cid";
}

/* How many of the snapshot's slots are owned slots of pinned workers (the
 * last ones; pcpu_reader_owned_slots()); the others are CPU slots. */
static unsigned owned_slots(const pcpu_reader_t *r, const struct pcpu_reader_snapshot *s)
{
	unsigned owned = pcpu_reader_owned_slots(r);

	return owned < s->nslots ? owned : 0;
}

/* Slot k's name in -p output: cpuN or cidN for a CPU slot (what its number
 * is), ownedJ for the J-th owned slot, which a worker thread claimed and
 * which is no CPU (pcpu_worker_claim(3)). */
static void slot_label(char *out, size_t cap, const pcpu_reader_t *r,
		       const struct pcpu_reader_snapshot *s, unsigned k)
{
	unsigned cpus = s->nslots - owned_slots(r, s);

	if (k >= cpus)
		snprintf(out, cap, "owned%u", k - cpus);
	else
		snprintf(out, cap, "%s%u", slot_word(r), k);
}

static void header_line(FILE *b, pcpu_reader_t *r, const struct pcpu_reader_snapshot *s)
{
	const char *by = pcpu_reader_slot_index(r) == 1 ? "CPU" : "concurrency id (mm_cid)";
	unsigned owned = owned_slots(r, s);

	if (owned)
		fprintf(b, "%s (pid %d): %u slots: %u by %s, %u owned (pinned workers)",
			pcpu_reader_name(r), (int)pcpu_reader_pid(r), s->nslots, s->nslots - owned, by,
			owned);
	else
		fprintf(b, "%s (pid %d): %u slots by %s", pcpu_reader_name(r), (int)pcpu_reader_pid(r),
			s->nslots, by);
	if (s->state == PCPU_SEGMENT_GONE)
		fputs(", WRITER GONE: last values", b);
	else if (s->state == PCPU_SEGMENT_CLOSED)
		fputs(", closed by its writer: last values", b);
	else if (s->state == PCPU_SEGMENT_UNKNOWN)
		fputs(", writer state unknown", b);
	if (s->nospace)
		fputs(", INCOMPLETE: the writer's file system is full", b);
	else if (s->incomplete)
		fputs(", INCOMPLETE: the writer's directory is full", b);
	fputs("\n", b);
}

static size_t name_width(const struct pcpu_snapshot *s)
{
	size_t w = 20, f, i;

	for (f = 0; f < s->nfamilies; f++)
		for (i = 0; i < s->families[f].nseries; i++) {
			char *n = series_name_str(&s->families[f], &s->families[f].series[i]);

			if (strlen(n) > w)
				w = strlen(n);
			free(n);
		}
	return w > 64 ? 64 : w;
}

/* A quantile estimate with the four significant digits it can claim,
 * written by the library's formatter (locale-independent, as every number
 * the tool prints): rounded half to even at the fourth digit with exact
 * powers of ten (pcpu_stats_scale()), so 685.1234 gives "685.1" and 0.001
 * gives "0.001", what printf's %.4g wrote in the C locale; from 10^4 up the
 * library's layout: "12350", "1.235e+06". */
static void estimate_text(char *out, size_t cap, double v)
{
	int e;

	if (v != 0 && isfinite(v)) {
		e = (int)floor(log10(fabs(v)));
		if (e - 3 >= -PCPU_STATS_SCALE_MAX && e - 3 <= PCPU_STATS_SCALE_MAX) {
			v = pcpu_stats_scale(rint(pcpu_stats_scale(v, 3 - e)), e - 3);
			/* log10() may be one off at a power of ten: a fifth
			 * digit shows, so round again one place up. */
			if (fabs(v) >= pow(10, e + 1))
				v = pcpu_stats_scale(rint(pcpu_stats_scale(v, 2 - e)), e - 2);
		}
	}
	pcpu_format_double(out, cap, v, 0);
}

/* "count 12 sum 0.5 p50 0.01 p90 0.02 p99 0.03" */
static void hist_text(FILE *b, const struct pcpu_snapshot_family *f, const uint64_t *counts,
		      const struct pcpu_snapshot_series *with_sum)
{
	static const struct {
		const char *name;
		double q;
	} qs[] = { { "p50", 0.5 }, { "p90", 0.9 }, { "p99", 0.99 } };
	char num[64];
	uint64_t count = 0;
	size_t k;

	for (k = 0; k < f->nbuckets; k++)
		count += counts[k];
	fprintf(b, "count %llu", (unsigned long long)count);
	if (with_sum) { /* its residue too (values beyond the integer sum) */
		if (with_sum->value.histogram.residue == 0.0)
			pcpu_format_i64(num, sizeof num, with_sum->value.histogram.sum, f->scale_exp10);
		else
			pcpu_format_double(num, sizeof num, pcpu_snapshot_sum(f, with_sum), 0);
		fprintf(b, "  sum %s", num);
	}
	if (!count)
		return;
	/* Estimates: four significant digits say all they know. */
	for (k = 0; k < 3; k++) {
		estimate_text(num, sizeof num, pcpu_snapshot_quantile(f, counts, qs[k].q));
		fprintf(b, "  %s %s", qs[k].name, num);
	}
}

static void value_text(FILE *b, const struct pcpu_snapshot_family *f,
		       const struct pcpu_snapshot_series *s)
{
	char num[64];

	if (pcpu_metric_type_info(f->type)->value == PCPU_VALUE_BUCKETS) {
		hist_text(b, f, s->value.histogram.counts, s);
		return;
	}
	if (pcpu_snapshot_format_value(num, sizeof num, f, s) < 0)
		snprintf(num, sizeof num, "?");
	fputs(num, b);
}

/* A slot's part of a value, in the family's exposed unit (histograms: a
 * count of observations, never scaled). */
static void slot_value(char *out, size_t cap, const struct pcpu_snapshot_family *f, int64_t v)
{
	pcpu_format_i64(out, cap, v,
			pcpu_metric_type_info(f->type)->value == PCPU_VALUE_BUCKETS ? 0 : f->scale_exp10);
}

static void per_slot_text(FILE *b, pcpu_reader_t *r, const struct pcpu_reader_snapshot *s,
			  const struct pcpu_snapshot_family *f, size_t forig, size_t sorig)
{
	const int64_t *sl = pcpu_reader_snapshot_slots(s, forig, sorig);
	unsigned k, shown = 0;
	char num[64], label[32];

	if (!sl)
		return;
	fputs("      ", b);
	for (k = 0; k < s->nslots; k++)
		if (sl[k]) {
			slot_value(num, sizeof num, f, sl[k]);
			slot_label(label, sizeof label, r, s, k);
			fprintf(b, " %s=%s", label, num);
			shown++;
		}
	if (shown < s->nslots)
		fprintf(b, "%s(%s 0)", shown ? "  " : " ", shown ? "other slots" : "all slots");
	fputs("\n", b);
}

static void text_output(FILE *b, pcpu_reader_t *r, const struct pcpu_reader_snapshot *s,
			const struct filtered *fl, int per_cpu)
{
	size_t w = name_width(&fl->snap), f, i;

	header_line(b, r, s);
	for (f = 0; f < fl->snap.nfamilies; f++) {
		const struct pcpu_snapshot_family *fam = &fl->snap.families[f];

		for (i = 0; i < fam->nseries; i++) {
			char *n = series_name_str(fam, &fam->series[i]);

			fprintf(b, "  %-*s  ", (int)w, n);
			free(n);
			value_text(b, fam, &fam->series[i]);
			fputs("\n", b);
			if (per_cpu)
				per_slot_text(b, r, s, fam, fl->forig[f], fl->sorig[f][i]);
		}
	}
}

static int json_output(FILE *b, pcpu_reader_t *r, const struct pcpu_reader_snapshot *s,
		       const struct filtered *fl, int per_cpu)
{
	char *stats;
	size_t len, f, i;
	unsigned k;
	int first = 1;

	if (pcpu_snapshot_write(&fl->snap, PCPU_FORMAT_JSON, &stats, &len) < 0) {
		fprintf(stderr, "pcpustat: segment %s: %s\n", pcpu_reader_name(r), pcpu_stats_error());
		return -1;
	}
	fputs("{\"segment\":", b);
	json_string(b, pcpu_reader_name(r));
	fprintf(b, ",\"pid\":%d,\"slots\":%u,\"owned_slots\":%u,\"slot_index\":\"%s\",\"state\":\"%s\","
		  "\"statistics\":",
		  (int)pcpu_reader_pid(r), s->nslots, owned_slots(r, s), slot_word(r), state_word(s->state));
	/* The writer's JSON ends with a newline. */
	while (len && stats[len - 1] == '\n')
		len--;
	fwrite(stats, 1, len, b);
	free(stats);
	if (per_cpu) {
		fputs(",\"per_slot\":[", b);
		for (f = 0; f < fl->snap.nfamilies; f++) {
			const struct pcpu_snapshot_family *fam = &fl->snap.families[f];

			for (i = 0; i < fam->nseries; i++) {
				const int64_t *sl = pcpu_reader_snapshot_slots(s, fl->forig[f], fl->sorig[f][i]);
				char *n = series_name_str(fam, &fam->series[i]);

				fputs(first ? "{\"series\":" : ",{\"series\":", b);
				first = 0;
				json_string(b, n);
				free(n);
				fputs(",\"slots\":[", b);
				for (k = 0; sl && k < s->nslots; k++) {
					char num[64];

					slot_value(num, sizeof num, fam, sl[k]);
					fprintf(b, "%s%s", k ? "," : "", num);
				}
				fputs("]}", b);
			}
		}
		fputs("]", b);
	}
	fputs("}\n", b);
	return 0;
}

static int take(pcpu_reader_t *r, const struct opts *o, struct pcpu_reader_snapshot **s)
{
	if (pcpu_reader_snapshot(r, o->per_cpu ? PCPU_READER_PER_SLOT : 0, s) < 0) {
		if (errno == ESRCH)
			fprintf(stderr, "pcpustat: %s (--stale shows its last values, --prune removes it)\n",
				pcpu_reader_error());
		else
			fail(NULL);
		return -1;
	}
	return 0;
}

static int cmd_print(pcpu_reader_t *r, const struct opts *o)
{
	struct pcpu_reader_snapshot *s;
	struct filtered fl;
	char *bp = NULL;
	size_t blen = 0;
	FILE *b;
	int rc = 0;

	if (take(r, o, &s) < 0)
		return 1;
	if (filtered_make(&fl, &s->snapshot, o->filter) < 0) {
		fputs("pcpustat: out of memory\n", stderr);
		pcpu_reader_snapshot_free(s);
		return 1;
	}
	b = mem_open(&bp, &blen);
	if (o->json)
		rc = json_output(b, r, s, &fl, o->per_cpu) < 0;
	else
		text_output(b, r, s, &fl, o->per_cpu);
	fclose(b);
	if (!rc)
		fwrite(bp, 1, blen, stdout);
	free(bp);
	filtered_free(&fl);
	pcpu_reader_snapshot_free(s);
	return rc;
}

/* ---- watch ----------------------------------------------------------------------- */

/* The previous frame's values, to compute rates: by series name. */
struct prev {
	char **names;
	double *vals;     /* counter/gauge value, or histogram count */
	uint64_t **counts; /* histograms: buckets */
	size_t n;
};

static void prev_free(struct prev *p)
{
	size_t i;

	for (i = 0; i < p->n; i++) {
		free(p->names[i]);
		free(p->counts[i]);
	}
	free(p->names);
	free(p->vals);
	free(p->counts);
	memset(p, 0, sizeof *p);
}

static ssize_t prev_find(const struct prev *p, const char *name)
{
	size_t i;

	for (i = 0; i < p->n; i++)
		if (strcmp(p->names[i], name) == 0)
			return (ssize_t)i;
	return -1;
}

static double plain_value(const struct pcpu_snapshot_family *f, const struct pcpu_snapshot_series *s)
{
	return pcpu_snapshot_value(f, s);
}

static int term_rows(void)
{
	struct winsize ws;

	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 4)
		return ws.ws_row;
	return 0;
}

static void watch_frame(FILE *b, pcpu_reader_t *r, const struct pcpu_reader_snapshot *s,
			const struct filtered *fl, struct prev *prev, double dt, const struct opts *o,
			int rows)
{
	struct prev next = { 0 };
	size_t w = name_width(&fl->snap), f, i, total = 0, lines = 0;
	char tbuf[64], num[64];
	time_t now = time(NULL);
	struct tm tm;

	for (f = 0; f < fl->snap.nfamilies; f++)
		total += fl->snap.families[f].nseries;
	next.names = calloc(total ? total : 1, sizeof *next.names);
	next.vals = calloc(total ? total : 1, sizeof *next.vals);
	next.counts = calloc(total ? total : 1, sizeof *next.counts);
	if (!next.names || !next.vals || !next.counts) {
		fputs("pcpustat: out of memory\n", stderr);
		exit(1);
	}
	localtime_r(&now, &tm);
	strftime(tbuf, sizeof tbuf, "%H:%M:%S", &tm);
	header_line(b, r, s);
	pcpu_format_double(num, sizeof num, o->interval, 0);
	fprintf(b, "%s, every %ss%s\n", tbuf, num, isatty(STDOUT_FILENO) ? ", Ctrl-C quits" : "");
	fprintf(b, "  %-*s  %16s  %14s\n", (int)w, "NAME", "VALUE", "RATE");
	lines = 3;
	for (f = 0; f < fl->snap.nfamilies; f++) {
		const struct pcpu_snapshot_family *fam = &fl->snap.families[f];

		for (i = 0; i < fam->nseries; i++) {
			const struct pcpu_snapshot_series *se = &fam->series[i];
			char *n = series_name_str(fam, se);
			ssize_t pi;

			pi = prev_find(prev, n);
			next.names[next.n] = strdup(n);
			if (rows && lines + 2 > (size_t)rows) {
				free(n);
				next.n++;
				continue; /* keep the values for rates, skip the line */
			}
			lines++;
			fprintf(b, "  %-*s  ", (int)w, n);
			if (pcpu_metric_type_info(fam->type)->value == PCPU_VALUE_BUCKETS) {
				uint64_t count = 0, *d;
				size_t k;

				for (k = 0; k < fam->nbuckets; k++)
					count += se->value.histogram.counts[k];
				next.vals[next.n] = (double)count;
				next.counts[next.n] = malloc(fam->nbuckets * sizeof(uint64_t));
				if (next.counts[next.n])
					memcpy(next.counts[next.n], se->value.histogram.counts,
					       fam->nbuckets * sizeof(uint64_t));
				fprintf(b, "%16llu  ", (unsigned long long)count);
				if (pi >= 0 && dt > 0 && prev->counts[pi]) {
					/* Rate of observations, and quantiles of this interval. */
					d = calloc(fam->nbuckets, sizeof *d);
					for (k = 0; d && k < fam->nbuckets; k++)
						d[k] = se->value.histogram.counts[k] - prev->counts[pi][k];
					si_format(num, sizeof num, ((double)count - prev->vals[pi]) / dt, "/s");
					fprintf(b, "%14s  ", num);
					if (d)
						hist_text(b, fam, d, NULL);
					free(d);
				} else {
					fprintf(b, "%14s  ", "-");
					hist_text(b, fam, se->value.histogram.counts, NULL);
				}
			} else {
				double v = plain_value(fam, se);

				char *vt = NULL;
				size_t vlen = 0;
				FILE *vf = mem_open(&vt, &vlen);

				next.vals[next.n] = v;
				value_text(vf, fam, se);
				fclose(vf);
				fprintf(b, "%16s  ", vt);
				free(vt);
				if (pi >= 0 && dt > 0) {
					si_format(num, sizeof num, (v - prev->vals[pi]) / dt, "/s");
					fprintf(b, "%14s", num);
				} else {
					fprintf(b, "%14s", "-");
				}
			}
			free(n);
			next.n++;
			fputs("\n", b);
			if (o->per_cpu)
				per_slot_text(b, r, s, fam, fl->forig[f], fl->sorig[f][i]);
		}
	}
	if (rows && lines < total + 3)
		fprintf(b, "  ... %zu more series (narrow with a PATTERN, or enlarge the terminal)\n",
			  total + 3 - lines);
	prev_free(prev);
	*prev = next;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmd_watch(pcpu_reader_t *r, const struct opts *o)
{
	struct prev prev = { 0 };
	struct sigaction sa;
	int tty = isatty(STDOUT_FILENO), rc = 0;
	double last = 0;
	long frames = 0;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal; /* no SA_RESTART: the sleep returns at once */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	if (tty)
		fputs("\033[?25l", stdout); /* hide the cursor while redrawing */
	while (!stop) {
		struct pcpu_reader_snapshot *s;
		struct filtered fl;
		char *bp = NULL;
		size_t blen = 0;
		FILE *b;
		double t;

		if (take(r, o, &s) < 0) {
			rc = 1;
			break;
		}
		t = now_s();
		if (filtered_make(&fl, &s->snapshot, o->filter) < 0) {
			pcpu_reader_snapshot_free(s);
			rc = 1;
			break;
		}
		b = mem_open(&bp, &blen);
		if (tty)
			fputs("\033[H\033[2J", b);
		else if (frames)
			fputs("\n", b);
		watch_frame(b, r, s, &fl, &prev, frames ? t - last : 0, o, tty ? term_rows() : 0);
		fclose(b);
		fwrite(bp, 1, blen, stdout);
		fflush(stdout);
		free(bp);
		filtered_free(&fl);
		pcpu_reader_snapshot_free(s);
		last = t;
		if (o->count && ++frames >= o->count)
			break;
		if (!o->count)
			frames++;
		{
			/* Sleep until the next frame; a signal ends the sleep. */
			struct timespec ts;
			double left = o->interval - (now_s() - t);

			if (left > 0 && !stop) {
				ts.tv_sec = (time_t)left;
				ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
				nanosleep(&ts, NULL);
			}
		}
	}
	if (tty)
		fputs("\033[?25h", stdout); /* the cursor back */
	fflush(stdout);
	prev_free(&prev);
	return rc;
}

/* ---- main ------------------------------------------------------------------------ */

enum { OPT_STALE = 256, OPT_PRUNE };

/* Parses the options into o (from optind on, SEGMENT and PATTERNs are
 * left). -1 to go on, or the exit status (help, version, a bad option). */
static int parse_options(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
		{ "regex", required_argument, NULL, 'e' },
		{ "json", no_argument, NULL, 'j' },
		{ "per-cpu", no_argument, NULL, 'p' },
		{ "watch", optional_argument, NULL, 'w' },
		{ "interval", required_argument, NULL, 'i' },
		{ "count", required_argument, NULL, 'c' },
		{ "dir", required_argument, NULL, 'd' },
		{ "owner", required_argument, NULL, 'u' },
		{ "any-owner", no_argument, NULL, 'a' },
		{ "stale", no_argument, NULL, OPT_STALE },
		{ "prune", no_argument, NULL, OPT_PRUNE },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	/* Options may follow the SEGMENT; "--" ends them (a PATTERN that
	 * starts with '-'). */
	while ((c = getopt_long(argc, argv, "e:jpwi:c:d:u:ahV", longopts, NULL)) != -1) {
		char err[256];
		unsigned uid;
		char *end;

		switch (c) {
		case 'e':
			if (filter_add_regex(o->filter, optarg, err, sizeof err) < 0) {
				fprintf(stderr, "pcpustat: bad regular expression '%s': %s\n", optarg, err);
				return 2;
			}
			break;
		case 'j':
			o->json = 1;
			break;
		case 'p':
			o->per_cpu = 1;
			break;
		case 'w':
		case 'i':
			o->watch = 1;
			if (optarg) {
				o->interval = strtod(optarg, &end);
				if (*end || !(o->interval >= 0.05 && o->interval <= 86400)) {
					fprintf(stderr, "pcpustat: the interval wants seconds in [0.05, 86400], not '%s'\n",
						optarg);
					return 2;
				}
			}
			break;
		case 'c':
			o->count = strtol(optarg, &end, 10);
			if (*end || o->count < 1) {
				fprintf(stderr, "pcpustat: --count wants a positive number, not '%s'\n", optarg);
				return 2;
			}
			break;
		case 'd':
			o->r.dir = optarg;
			break;
		case 'u':
			if (parse_user(optarg, &uid) < 0) {
				fprintf(stderr, "pcpustat: no such user '%s'\n", optarg);
				return 2;
			}
			o->r.flags = (o->r.flags & ~(unsigned)PCPU_READER_ANY_OWNER) | PCPU_READER_OWNER;
			o->r.owner = (uid_t)uid;
			break;
		case 'a':
			o->r.flags |= PCPU_READER_ANY_OWNER;
			break;
		case OPT_STALE:
			o->stale = 1;
			o->r.flags |= PCPU_READER_ALLOW_STALE;
			break;
		case OPT_PRUNE:
			o->prune = 1;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		case 'V':
			printf("pcpustat %s (libpcpu %s)\n", PCPUSTAT_VERSION, pcpu_version_string());
			return 0;
		default:
			fputs("Try 'pcpustat --help'.\n", stderr);
			return 2;
		}
	}
	return -1;
}

int main(int argc, char **argv)
{
	struct opts o;
	pcpu_reader_t *r;
	const char *refused;
	int rc, i;

	/* getopt's messages name argv[0]: the same prefix as ours, whatever
	 * path the tool was started by. */
	argv[0] = (char *)"pcpustat";
	/* The library never prints: a PCPU_* variable it refused (set in this
	 * shell, so likely for the programs watched too) is said here. */
	refused = pcpu_environment_error();
	if (refused)
		fprintf(stderr, "pcpustat: warning: %s\n", refused);
	memset(&o, 0, sizeof o);
	o.interval = 1;
	o.filter = filter_new();
	if (geteuid() == 0)
		o.r.flags |= PCPU_READER_ANY_OWNER;
	if (argc > 1 && strcmp(argv[1], "serve") == 0) {
		rc = serve_main(argc - 1, argv + 1, &o.r);
		goto out;
	}
	if (argc > 1 && strcmp(argv[1], "flows") == 0) {
		rc = flows_main(argc - 1, argv + 1, &o.r);
		goto out;
	}
	if (argc > 1 && strcmp(argv[1], "push") == 0) {
		rc = push_main(argc - 1, argv + 1, &o.r);
		goto out;
	}
	rc = parse_options(argc, argv, &o);
	if (rc >= 0)
		goto out;
	if (o.count && !o.watch) {
		fputs("pcpustat: --count goes with --watch\n", stderr);
		rc = 2;
		goto out;
	}
	if (o.prune) {
		if (optind < argc) {
			fputs("pcpustat: --prune takes no SEGMENT\n", stderr);
			rc = 2;
			goto out;
		}
		rc = cmd_prune(&o);
		goto out;
	}
	if (optind >= argc) {
		if (o.watch || o.per_cpu || !filter_empty(o.filter)) {
			fputs("pcpustat: --watch, --per-cpu and filters need a SEGMENT\n", stderr);
			rc = 2;
			goto out;
		}
		rc = cmd_list(&o);
		goto out;
	}
	for (i = optind + 1; i < argc; i++)
		filter_add_glob(o.filter, argv[i]);
	r = pcpu_reader_open(argv[optind], &o.r);
	if (!r) {
		rc = fail(NULL);
		goto out;
	}
	rc = o.watch ? cmd_watch(r, &o) : cmd_print(r, &o);
	pcpu_reader_close(r);
out:
	filter_free(o.filter);
	return rc;
}
