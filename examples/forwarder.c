/*
 * A simulated packet forwarder that publishes its statistics for pcpustat
 * and Prometheus.
 *
 *   forwarder [--seconds N] [--workers W] [--flows F] [--name NAME]
 *
 * Worker threads "forward" packets of random flows as fast as they can. Per
 * packet they update, with no lock and no lookup:
 *   - global counters, a statistics struct declared once (like FreeBSD's
 *     ipstat): fwd_rx_packets_total, fwd_rx_bytes_total, fwd_tx_..., fwd_drops_total;
 *   - the flow's group of counters, a struct registered per flow with the
 *     label flow="SRC->DST": fwd_flow_packets_total, fwd_flow_bytes_total;
 *   - a latency histogram (log-linear, nanoseconds, exposed in seconds):
 *     fwd_latency_seconds.
 * A manager thread retires old flows and opens new ones every 200 ms, so
 * series come and go while readers read; fwd_flows_active is a gauge.
 *
 * Everything lives in a statistics segment published right after the
 * registry is created (pcpu_segment_publish), so from another terminal:
 *
 *   pcpustat                       lists it
 *   pcpustat -w forwarder 'fwd_[rtdl]*'   watches it, with rates
 *   pcpustat serve forwarder       serves it on http://127.0.0.1:9464/metrics
 *
 * Retiring a flow while workers may still be adding to it needs care: a
 * removed series' memory is freed. Workers publish a per-worker epoch after
 * each packet; the manager unhooks a flow, waits until every worker has
 * moved past the epoch it saw (a grace period, as in RCU), and only then
 * removes the flow's statistics.
 *
 * At exit it checks that rx == tx + drops, read back through the segment.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pcpu/reader.h>
#include <pcpu/segment.h>
#include <pcpu/stats.h>

#define MAX_WORKERS 64
#define MAX_FLOWS 4096

struct fwd_stats {
	struct pcpu_counter rx_packets, rx_bytes, tx_packets, tx_bytes, drops;
};

static const struct pcpu_stats_field fwd_fields[] = {
	PCPU_STATS_COUNTER(struct fwd_stats, rx_packets, "fwd_rx_packets", "Packets received."),
	PCPU_STATS_COUNTER(struct fwd_stats, rx_bytes, "fwd_rx_bytes", "Bytes received."),
	PCPU_STATS_COUNTER(struct fwd_stats, tx_packets, "fwd_tx_packets", "Packets forwarded."),
	PCPU_STATS_COUNTER(struct fwd_stats, tx_bytes, "fwd_tx_bytes", "Bytes forwarded."),
	PCPU_STATS_COUNTER(struct fwd_stats, drops, "fwd_drops", "Packets dropped (no route)."),
};

/* One flow's group of counters. */
struct flow_stats {
	struct pcpu_counter packets, bytes;
};

static const struct pcpu_stats_field flow_fields[] = {
	PCPU_STATS_COUNTER(struct flow_stats, packets, "fwd_flow_packets", "Packets per flow."),
	PCPU_STATS_COUNTER(struct flow_stats, bytes, "fwd_flow_bytes", "Bytes per flow."),
};

static const char *const flow_label[] = { "flow" };

static pcpu_registry_t *reg;
static struct fwd_stats *fwd;
static pcpu_histogram_t *latency;
static pcpu_gauge_t flows_active;
static struct flow_stats *flow_table[MAX_FLOWS]; /* atomic pointers */
static unsigned nflows = 64;
static int nworkers = 4;
static volatile sig_atomic_t stop_signal;
static int stop_flag;

/* Per-worker epoch: odd while the worker holds a flow pointer. */
static struct {
	unsigned long epoch;
	char pad[56];
} worker_epoch[MAX_WORKERS];

static void on_signal(int sig)
{
	(void)sig;
	stop_signal = 1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint32_t xorshift(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

static void *worker(void *arg)
{
	int id = (int)(intptr_t)arg;
	uint32_t seed = 2463534242u + (uint32_t)id * 7919u;
	unsigned char payload[1500];
	unsigned sum = 0;

	memset(payload, id, sizeof payload);
	while (!__atomic_load_n(&stop_flag, __ATOMIC_RELAXED)) {
		uint64_t t0 = now_ns();
		uint32_t r = xorshift(&seed);
		/* Skewed flow choice: a few flows carry most packets. */
		unsigned f = (r % nflows) & (r >> 16 & 1 ? 7u : ~0u);
		int64_t len = 64 + (int64_t)(xorshift(&seed) % 1437);
		struct flow_stats *fs;
		int i;

		for (i = 0; i < len; i += 64) /* "look at" the packet */
			sum += payload[i];
		pcpu_counter_add(&fwd->rx_packets, 1);
		pcpu_counter_add(&fwd->rx_bytes, len);
		if (r % 100 == 0) {
			pcpu_counter_add(&fwd->drops, 1);
			continue;
		}
		/* Enter: from here the flow's statistics may not be freed. */
		__atomic_add_fetch(&worker_epoch[id].epoch, 1, __ATOMIC_SEQ_CST);
		fs = __atomic_load_n(&flow_table[f], __ATOMIC_SEQ_CST); /* after the epoch: see grace_period() */
		if (fs) {
			pcpu_counter_add(&fs->packets, 1);
			pcpu_counter_add(&fs->bytes, len);
		}
		__atomic_add_fetch(&worker_epoch[id].epoch, 1, __ATOMIC_RELEASE);
		pcpu_counter_add(&fwd->tx_packets, 1);
		pcpu_counter_add(&fwd->tx_bytes, len);
		pcpu_histogram_record(latency, (int64_t)(now_ns() - t0));
	}
	return (void *)(uintptr_t)sum;
}

/* Waits until no worker can still hold a pointer it loaded before now. */
static void grace_period(void)
{
	unsigned long seen[MAX_WORKERS];
	int i;

	for (i = 0; i < nworkers; i++)
		seen[i] = __atomic_load_n(&worker_epoch[i].epoch, __ATOMIC_SEQ_CST);
	for (i = 0; i < nworkers; i++)
		while ((seen[i] & 1) && __atomic_load_n(&worker_epoch[i].epoch, __ATOMIC_ACQUIRE) == seen[i])
			sched_yield();
}

static struct flow_stats *flow_open(unsigned slot, unsigned serial)
{
	char name[64];
	const char *v[1] = { name };
	struct flow_stats *fs;

	snprintf(name, sizeof name, "10.0.%u.%u:%u->192.168.1.1:53", serial / 250 % 250, serial % 250 + 1,
		 1024 + slot);
	fs = pcpu_registry_struct(reg, sizeof *fs, flow_fields, 2, 1, flow_label, v);
	if (!fs)
		fprintf(stderr, "forwarder: flow: %s\n", pcpu_stats_error());
	else
		pcpu_gauge_inc(flows_active);
	return fs;
}

static void usage(void)
{
	fputs("usage: forwarder [--seconds N] [--workers W] [--flows F] [--name NAME]\n"
	      "  Simulated packet forwarder publishing its statistics; watch it with\n"
	      "  `pcpustat -w forwarder`, serve it with `pcpustat serve forwarder`.\n"
	      "  Runs until Ctrl-C, or N seconds.\n", stderr);
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "seconds", required_argument, NULL, 's' }, { "workers", required_argument, NULL, 'w' },
		{ "flows", required_argument, NULL, 'f' },   { "name", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },          { NULL, 0, NULL, 0 },
	};
	struct pcpu_histogram_layout lat = { .scheme = PCPU_HISTOGRAM_LOG_LINEAR,
					     .precision_bits = 4, .max_value = 10000000 };
	struct pcpu_family_desc d;
	pcpu_segment_t *seg;
	pthread_t t[MAX_WORKERS];
	const char *name = "forwarder";
	double seconds = 0;
	uint64_t start, rx, tx, drops;
	unsigned serial = 0, k;
	int c, i, rc = 0;

	while ((c = getopt_long(argc, argv, "s:w:f:n:h", lo, NULL)) != -1) {
		switch (c) {
		case 's': seconds = atof(optarg); break;
		case 'w': nworkers = atoi(optarg); break;
		case 'f': nflows = (unsigned)atoi(optarg); break;
		case 'n': name = optarg; break;
		default: usage();
		}
	}
	if (nworkers < 1 || nworkers > MAX_WORKERS || nflows < 1 || nflows > MAX_FLOWS || seconds < 0)
		usage();

	/* Publish first: the registry's counters are then born in the segment. */
	reg = pcpu_registry_create();
	if (!reg || !(seg = pcpu_segment_publish(reg, name, NULL))) {
		fprintf(stderr, "forwarder: cannot publish: %s\n", pcpu_segment_error());
		return 1;
	}
	fwd = pcpu_registry_struct(reg, sizeof *fwd, fwd_fields, 5, 0, NULL, NULL);
	memset(&d, 0, sizeof d);
	d.name = "fwd_latency_seconds";
	d.help = "Time to forward one packet.";
	d.unit = "seconds";
	d.type = PCPU_METRIC_HISTOGRAM;
	d.scale_exp10 = -9;
	d.histogram = &lat;
	{
		pcpu_family_t *f = pcpu_registry_family(reg, &d);
		latency = f ? pcpu_family_histogram(f, NULL) : NULL;
	}
	flows_active = pcpu_registry_gauge(reg, "fwd_flows_active", "Flows in the flow table.");
	if (!fwd || !latency || !flows_active) {
		fprintf(stderr, "forwarder: %s\n", pcpu_stats_error());
		return 1;
	}
	for (k = 0; k < nflows; k++)
		flow_table[k] = flow_open(k, serial++);

	printf("forwarder: %d workers, %u flows; statistics in %s\n"
	       "  watch:  pcpustat -w %s\n  serve:  pcpustat serve %s\n",
	       nworkers, nflows, pcpu_segment_path(seg), name, name);
	fflush(stdout);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	for (i = 0; i < nworkers; i++)
		pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);

	/* The manager: every 200 ms one flow in eight is replaced. */
	start = now_ns();
	while (!stop_signal && (seconds == 0 || (double)(now_ns() - start) / 1e9 < seconds)) {
		struct timespec ts = { 0, 200000000 };

		nanosleep(&ts, NULL);
		for (k = serial % 8; k < nflows; k += 8) {
			struct flow_stats *old = flow_table[k];

			__atomic_store_n(&flow_table[k], NULL, __ATOMIC_SEQ_CST);
			grace_period();
			if (old) {
				pcpu_registry_struct_remove(reg, old);
				pcpu_gauge_dec(flows_active);
			}
			__atomic_store_n(&flow_table[k], flow_open(k, serial++), __ATOMIC_RELEASE);
		}
	}
	__atomic_store_n(&stop_flag, 1, __ATOMIC_RELAXED);
	for (i = 0; i < nworkers; i++)
		pthread_join(t[i], NULL);

	/* Read the totals back the way pcpustat does: through the segment. */
	{
		struct pcpu_reader_options ro;
		struct pcpu_reader_snapshot *s;
		pcpu_reader_t *r;
		char target[32];
		size_t f;

		memset(&ro, 0, sizeof ro);
		snprintf(target, sizeof target, "%d", (int)getpid());
		r = pcpu_reader_open(target, &ro);
		if (!r || pcpu_reader_snapshot(r, 0, &s) < 0) {
			fprintf(stderr, "forwarder: reading back: %s\n", pcpu_reader_error());
			return 1;
		}
		rx = tx = drops = 0;
		for (f = 0; f < s->snapshot.nfamilies; f++) {
			const struct pcpu_snapshot_family *fm = &s->snapshot.families[f];
			if (strcmp(fm->name, "fwd_rx_packets") == 0)
				rx = fm->series[0].value.counter;
			else if (strcmp(fm->name, "fwd_tx_packets") == 0)
				tx = fm->series[0].value.counter;
			else if (strcmp(fm->name, "fwd_drops") == 0)
				drops = fm->series[0].value.counter;
		}
		pcpu_reader_snapshot_free(s);
		pcpu_reader_close(r);
	}
	printf("forwarder: %llu packets in %.1f s: %llu forwarded, %llu dropped -- %s\n",
	       (unsigned long long)rx, (double)(now_ns() - start) / 1e9, (unsigned long long)tx,
	       (unsigned long long)drops, rx == tx + drops && rx > 0 ? "exact" : "MISMATCH");
	if (rx != tx + drops || rx == 0)
		rc = 1;
	pcpu_segment_unpublish(seg);
	pcpu_registry_destroy(reg);
	return rc;
}
