/* SPDX-License-Identifier: MIT */
/*
 * `pcpustat flows`: the flows tables of a segment (format 2.9,
 * pcpu_segment_flows_create() in the writer; pcpu_reader_flows_*()).
 *
 *   pcpustat flows [-d DIR] SEGMENT              the tables: name, flows,
 *                                                counters, help
 *   pcpustat flows [-d DIR] SEGMENT TABLE [-n N] [-s COUNTER] [--prometheus]
 *                                                its top N flows (10 by
 *                                                default; 0: every flow
 *                                                with a nonzero counter)
 *                                                by COUNTER (the first by
 *                                                default), largest first
 *
 * A table is not in `pcpustat SEGMENT`, `serve` or `push`: a million flows
 * would be tens of megabytes of text per scrape and a series per flow in
 * Prometheus. Here the output is bounded by N, and all of it only when
 * asked for (-n 0). The table is read in pieces of 65,536 flows, so the
 * memory is the pieces' and the top N's, whatever the table's size.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pcpu/reader.h>

#include "pcpustat.h"

#define PIECE 65536 /* flows read per pread */

static const char flows_usage[] =
	"Usage: pcpustat flows [-d DIR] SEGMENT              list the flows tables\n"
	"       pcpustat flows [-d DIR] SEGMENT TABLE [-n N] [-s COUNTER] [--prometheus]\n"
	"                                                    a table's top N flows\n"
	"  -n, --top N         flows shown, largest first (default 10; 0: every flow with a\n"
	"                      nonzero counter)\n"
	"  -s, --sort COUNTER  the counter they are ranked by (default: the first)\n"
	"  --prometheus        Prometheus text: NAME_total{counter=\"...\",flow=\"F\"} V\n"
	"  -d, --dir DIR       the segment's directory\n"
	"Values are the table's shared words: every add that returned before the writer's\n"
	"last collection (pcpu_registry_collect() or an in-process scrape), and maybe later\n"
	"ones.\n";

struct row {
	size_t flow;
	uint64_t key;
};

/* The top-N kept as a min-heap on key (ties: the larger flow is smaller,
 * so the smaller flow stays). */
static int row_less(const struct row *a, const struct row *b)
{
	return a->key < b->key || (a->key == b->key && a->flow > b->flow);
}

static void heap_down(struct row *h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		struct row t;

		if (l < n && row_less(&h[l], &h[m]))
			m = l;
		if (l + 1 < n && row_less(&h[l + 1], &h[m]))
			m = l + 1;
		if (m == i)
			return;
		t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

static int cmp_desc(const void *a, const void *b)
{
	const struct row *x = a, *y = b;

	return row_less(y, x) ? -1 : row_less(x, y) ? 1 : 0;
}

static int cmp_flow(const void *a, const void *b)
{
	const struct row *x = a, *y = b;

	return x->flow < y->flow ? -1 : x->flow > y->flow;
}

static int list_tables(pcpu_reader_t *r)
{
	struct pcpu_reader_flows *t;
	size_t n;

	if (pcpu_reader_flows_list(r, &t, &n) != 0) {
		fprintf(stderr, "pcpustat flows: %s\n", pcpu_reader_error());
		return 1;
	}
	if (n == 0) {
		printf("no flows tables in %s\n", pcpu_reader_name(r));
		return 0;
	}
	printf("%-32s %12s  %-24s %s\n", "TABLE", "FLOWS", "COUNTERS", "HELP");
	for (size_t i = 0; i < n; i++) {
		char c[256] = "";
		size_t at = 0;

		for (unsigned k = 0; k < t[i].ncounters && at < sizeof c - 1; k++)
			at += (size_t)snprintf(c + at, sizeof c - at, "%s%s", k ? "," : "",
					       t[i].counter_names[k]);
		printf("%-32s %12zu  %-24s %s\n", t[i].name, t[i].nflows, c, t[i].help ? t[i].help : "");
	}
	pcpu_reader_flows_free(t, n);
	return 0;
}

/* A row's counters, read again for printing (the top N only). */
static int print_rows(pcpu_reader_t *r, const struct pcpu_reader_flows *t, struct row *rows,
		      size_t n, int prom)
{
	uint64_t *v = calloc(t->ncounters, sizeof *v);

	if (!v) {
		fprintf(stderr, "pcpustat flows: out of memory\n");
		return 1;
	}
	if (prom) {
		if (t->help)
			printf("# HELP %s %s\n", t->name, t->help);
		printf("# TYPE %s counter\n", t->name);
	} else {
		printf("%12s", "FLOW");
		for (unsigned k = 0; k < t->ncounters; k++)
			printf(" %20s", t->counter_names[k]);
		printf("\n");
	}
	for (size_t i = 0; i < n; i++) {
		if (pcpu_reader_flows_read(r, t, rows[i].flow, 1, v) != 0) {
			fprintf(stderr, "pcpustat flows: %s\n", pcpu_reader_error());
			free(v);
			return 1;
		}
		if (prom) {
			for (unsigned k = 0; k < t->ncounters; k++)
				printf("%s_total{counter=\"%s\",flow=\"%zu\"} %" PRIu64 "\n", t->name,
				       t->counter_names[k], rows[i].flow, v[k]);
			continue;
		}
		printf("%12zu", rows[i].flow);
		for (unsigned k = 0; k < t->ncounters; k++)
			printf(" %20" PRIu64, v[k]);
		printf("\n");
	}
	free(v);
	return 0;
}

static int show_table(pcpu_reader_t *r, const char *name, size_t top, const char *sort, int prom)
{
	struct pcpu_reader_flows *ts, *t = NULL;
	struct row *rows = NULL;
	uint64_t *piece = NULL;
	size_t n, nrows = 0, cap = 0, i;
	unsigned key = 0;
	int rc = 1;

	if (pcpu_reader_flows_list(r, &ts, &n) != 0) {
		fprintf(stderr, "pcpustat flows: %s\n", pcpu_reader_error());
		return 1;
	}
	for (i = 0; i < n; i++)
		if (strcmp(ts[i].name, name) == 0)
			t = &ts[i];
	if (!t) {
		fprintf(stderr, "pcpustat flows: no flows table '%s' in %s\n", name,
			pcpu_reader_name(r));
		goto out;
	}
	if (sort) {
		for (key = 0; key < t->ncounters && strcmp(t->counter_names[key], sort) != 0; key++)
			;
		if (key == t->ncounters) {
			fprintf(stderr, "pcpustat flows: table '%s' has no counter '%s'\n", name, sort);
			goto out;
		}
	}
	piece = malloc((size_t)PIECE * t->ncounters * sizeof *piece);
	if (!piece) {
		fprintf(stderr, "pcpustat flows: out of memory\n");
		goto out;
	}
	for (size_t first = 0; first < t->nflows; first += PIECE) {
		size_t k = t->nflows - first < PIECE ? t->nflows - first : PIECE;

		if (pcpu_reader_flows_read(r, t, first, k, piece) != 0) {
			fprintf(stderr, "pcpustat flows: %s\n", pcpu_reader_error());
			goto out;
		}
		for (size_t f = 0; f < k; f++) {
			struct row w = { first + f, piece[f * t->ncounters + key] };
			int any = 0;

			for (unsigned c = 0; c < t->ncounters; c++)
				any |= piece[f * t->ncounters + c] != 0;
			if (!any)
				continue;
			if (top && nrows == top) {
				/* Full: the smallest kept makes room for a larger one. */
				if (row_less(&rows[0], &w)) {
					rows[0] = w;
					heap_down(rows, nrows, 0);
				}
				continue;
			}
			if (nrows == cap) {
				size_t c2 = cap ? 2 * cap : 64;
				struct row *p = realloc(rows, c2 * sizeof *p);

				if (!p) {
					fprintf(stderr, "pcpustat flows: out of memory\n");
					goto out;
				}
				rows = p;
				cap = c2;
			}
			rows[nrows++] = w;
			if (top && nrows == top)
				for (size_t j = nrows / 2; j-- > 0;)
					heap_down(rows, nrows, j);
		}
	}
	/* Every flow (-n 0) by flow number; a top N largest first. */
	qsort(rows, nrows, sizeof *rows, top ? cmp_desc : cmp_flow);
	rc = print_rows(r, t, rows, nrows, prom);
out:
	free(piece);
	free(rows);
	pcpu_reader_flows_free(ts, n);
	return rc;
}

int flows_main(int argc, char **argv, const struct pcpu_reader_options *ropt)
{
	static const struct option longopts[] = {
		{ "top", required_argument, NULL, 'n' },
		{ "sort", required_argument, NULL, 's' },
		{ "dir", required_argument, NULL, 'd' },
		{ "prometheus", no_argument, NULL, 'P' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct pcpu_reader_options o = *ropt;
	const char *sort = NULL;
	size_t top = 10;
	int prom = 0, c, rc;
	pcpu_reader_t *r;
	char *end;

	optind = 1;
	while ((c = getopt_long(argc, argv, "n:s:d:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'n':
			errno = 0;
			top = (size_t)strtoull(optarg, &end, 10);
			if (*end || errno || optarg[0] == '-') {
				fprintf(stderr, "pcpustat flows: --top wants a number, not '%s'\n", optarg);
				return 2;
			}
			break;
		case 's':
			sort = optarg;
			break;
		case 'd':
			o.dir = optarg;
			break;
		case 'P':
			prom = 1;
			break;
		case 'h':
			fputs(flows_usage, stdout);
			return 0;
		default:
			fputs(flows_usage, stderr);
			return 2;
		}
	}
	if (optind >= argc || argc - optind > 2) {
		fputs(flows_usage, stderr);
		return 2;
	}
	r = pcpu_reader_open(argv[optind], &o);
	if (!r) {
		fprintf(stderr, "pcpustat flows: %s\n", pcpu_reader_error());
		return 1;
	}
	rc = optind + 1 < argc ? show_table(r, argv[optind + 1], top, sort, prom) : list_tables(r);
	pcpu_reader_close(r);
	return rc;
}
