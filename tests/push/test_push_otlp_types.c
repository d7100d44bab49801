/*
 * The OTLP encoder (tools/push_otlp.c) on a type the library does not have
 * yet: an up-down counter, as docs/new-metric-type.md describes one (a
 * non-monotonic Sum: words gauge, a signed value, PCPU_TYPE_FRACTIONS
 * only, PCPU_PROM_GAUGE, PCPU_OTLP_SUM). The encoder reads every type from
 * pcpu_metric_type_info(); this program defines that function itself (the
 * executable's definition wins over libpcpu-stats' for the encoder's
 * calls) and answers the library's table for the types it has, and the
 * up-down counter's entry for one more. Checked on the decoded request
 * (protobuf-c):
 *   - the up-down counter: a Sum, not monotonic, cumulative, its start
 *     time the segment's publication (not 0: an OTLP consumer needs it to
 *     know where the cumulative value starts), its value signed;
 *   - under delta temporality it stays cumulative, with that start time,
 *     while the counter goes delta;
 *   - a counter's start time is the segment's too; a gauge has none.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pcpu/pcpu.h>

#include "otlp_metrics.pb-c.h"
#include "push.h"

static int failures;

#define EXPECT(c, ...)                                                              \
	do {                                                                        \
		if (!(c)) {                                                         \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #c); \
			fprintf(stderr, __VA_ARGS__);                               \
			fputc('\n', stderr);                                        \
			failures++;                                                 \
		}                                                                   \
	} while (0)

#define UPDOWN ((enum pcpu_metric_type)100)
#define CREATED 1700000000000000000ull
#define NOW 1700000100000000000ull

static const char *const updown_suffixes[] = { "" };
static const struct pcpu_metric_type_info updown = {
	.type = UPDOWN,
	.name = "updowncounter",
	.text_type = "gauge",
	.openmetrics_type = "gauge",
	.sample_suffix = "",
	.suffixes = updown_suffixes,
	.nsuffixes = 1,
	.value = PCPU_VALUE_SIGNED,
	.flags = PCPU_TYPE_FRACTIONS,
	.prom = PCPU_PROM_GAUGE,
	.otlp = PCPU_OTLP_SUM,
};

const struct pcpu_metric_type_info *pcpu_metric_type_info(enum pcpu_metric_type type)
{
	static const struct pcpu_metric_type_info *(*lib)(enum pcpu_metric_type);

	if (type == UPDOWN)
		return &updown;
	if (!lib)
		lib = (const struct pcpu_metric_type_info *(*)(enum pcpu_metric_type))dlsym(RTLD_NEXT,
											  "pcpu_metric_type_info");
	return lib ? lib(type) : NULL;
}

static uint64_t created(const struct scrape_hold *h, const char *segment, const char *pid)
{
	(void)h;
	return strcmp(segment, "app") == 0 && strcmp(pid, "42") == 0 ? CREATED : 0;
}

static const Pcpustat__Otlp__Metric *metric(const Pcpustat__Otlp__ExportMetricsServiceRequest *r, const char *name)
{
	const Pcpustat__Otlp__ScopeMetrics *sm = r->resource_metrics[0]->scope_metrics[0];
	size_t i;

	for (i = 0; i < sm->n_metrics; i++)
		if (strcmp(sm->metrics[i]->name, name) == 0)
			return sm->metrics[i];
	return NULL;
}

/* Encodes the snapshot (cumulative, or delta with d) and decodes it. */
static Pcpustat__Otlp__ExportMetricsServiceRequest *encode(const struct pcpu_snapshot *s, struct push_delta *d)
{
	struct push_encode e;
	struct arena a = { 0 };
	char err[200];
	uint8_t *body;
	size_t len;
	Pcpustat__Otlp__ExportMetricsServiceRequest *r;

	memset(&e, 0, sizeof e);
	e.now_ns = NOW;
	e.now_ms = (int64_t)(NOW / 1000000);
	e.start_ns = NOW - 5;
	e.created_ns = created;
	e.max_bytes = (size_t)1 << 30;
	e.delta = d;
	if (d && delta_begin(d, s, NOW) < 0)
		return NULL;
	if (otlp_encode(s, &e, &a, &body, &len, err, sizeof err) < 0) {
		fprintf(stderr, "otlp_encode: %s\n", err);
		return NULL;
	}
	if (d)
		delta_end(d);
	r = pcpustat__otlp__export_metrics_service_request__unpack(NULL, len, body);
	free(body);
	arena_free(&a);
	return r;
}

int main(void)
{
	static const char *const lnames[] = { "pcpu_segment", "pcpu_pid" };
	static const char *const lvals[] = { "app", "42" };
	struct pcpu_snapshot_series ud = { .label_values = lvals }, ct = { .label_values = lvals },
				    ga = { .label_values = lvals };
	struct pcpu_snapshot_family fam[3] = {
		{ .name = "queue_items", .type = UPDOWN, .nlabels = 2, .label_names = lnames, .nseries = 1,
		  .series = &ud },
		{ .name = "requests", .type = PCPU_METRIC_COUNTER, .nlabels = 2, .label_names = lnames, .nseries = 1,
		  .series = &ct },
		{ .name = "temperature", .type = PCPU_METRIC_GAUGE, .nlabels = 2, .label_names = lnames,
		  .nseries = 1, .series = &ga },
	};
	struct pcpu_snapshot snap = { .nfamilies = 3, .families = fam };
	Pcpustat__Otlp__ExportMetricsServiceRequest *r;
	const Pcpustat__Otlp__Metric *m;
	struct push_delta *d = delta_new();
	int round;

	ud.value.gauge = -7;
	ct.value.counter = 1000;
	ga.value.gauge = 21;
	for (round = 0; round < 2; round++) {
		const char *mode = round ? "delta" : "cumulative";

		if (round)
			delta_no_priming(d); /* sent whole: nothing was sent before */
		r = encode(&snap, round ? d : NULL);
		EXPECT(r != NULL, "%s: the request does not decode", mode);
		if (!r)
			break;
		m = metric(r, "queue_items");
		EXPECT(m && m->data_case == PCPUSTAT__OTLP__METRIC__DATA_SUM, "%s: the up-down counter is no Sum", mode);
		if (m && m->data_case == PCPUSTAT__OTLP__METRIC__DATA_SUM) {
			const Pcpustat__Otlp__NumberDataPoint *p = m->sum->data_points[0];

			EXPECT(!m->sum->is_monotonic, "%s: an up-down Sum marked monotonic", mode);
			EXPECT(m->sum->aggregation_temporality ==
				       PCPUSTAT__OTLP__AGGREGATION_TEMPORALITY__AGGREGATION_TEMPORALITY_CUMULATIVE,
			       "%s: an up-down Sum's temporality %d, want cumulative", mode,
			       (int)m->sum->aggregation_temporality);
			EXPECT(p->start_time_unix_nano == CREATED, "%s: the up-down Sum's start time %llu, want %llu",
			       mode, (unsigned long long)p->start_time_unix_nano, (unsigned long long)CREATED);
			EXPECT(p->time_unix_nano == NOW && p->as_int == -7, "%s: time %llu value %lld", mode,
			       (unsigned long long)p->time_unix_nano, (long long)p->as_int);
		}
		m = metric(r, "requests");
		EXPECT(m && m->data_case == PCPUSTAT__OTLP__METRIC__DATA_SUM && m->sum->is_monotonic &&
			       m->sum->data_points[0]->start_time_unix_nano == CREATED &&
			       m->sum->data_points[0]->as_int == 1000 &&
			       m->sum->aggregation_temporality ==
				       (round ? PCPUSTAT__OTLP__AGGREGATION_TEMPORALITY__AGGREGATION_TEMPORALITY_DELTA
					      : PCPUSTAT__OTLP__AGGREGATION_TEMPORALITY__AGGREGATION_TEMPORALITY_CUMULATIVE),
		       "%s: the counter", mode);
		m = metric(r, "temperature");
		EXPECT(m && m->data_case == PCPUSTAT__OTLP__METRIC__DATA_GAUGE &&
			       m->gauge->data_points[0]->start_time_unix_nano == 0 &&
			       m->gauge->data_points[0]->as_int == 21,
		       "%s: the gauge", mode);
		pcpustat__otlp__export_metrics_service_request__free_unpacked(r, NULL);
	}
	delta_free(d);
	if (failures)
		fprintf(stderr, "test_push_otlp_types: %d failures\n", failures);
	else
		printf("test_push_otlp_types: ok (an up-down counter: a cumulative, non-monotonic Sum with its start "
		       "time, in both temporalities)\n");
	return failures ? 1 : 0;
}
