/* SPDX-License-Identifier: MIT */
/*
 * `pcpustat push`: sends the statistics segments to a receiver on an
 * interval -- Prometheus remote write 1.0 (push_rw.c) or OTLP/HTTP
 * (push_otlp.c) -- for nodes behind NAT, short-lived jobs and sites without
 * a scraper. What it sends is what `pcpustat serve` answers a scrape with
 * (scrape_collect(): the same segments, labels, pcpu_segment_up and
 * pcpu_segments_omitted, the same --max-bytes budget and isolation).
 *
 * It is an agent beside the application, as serve is: the application only
 * publishes its segment, and nothing of the push runs in it, so a receiver
 * that is down, slow or failing cannot slow an add or block the
 * application. The agent itself stays bounded:
 *
 *  - One request at a time, each bounded by --timeout; a slow receiver
 *    delays the agent's next push, never anything else.
 *  - A bounded queue (--queue requests, oldest dropped first) while the
 *    receiver refuses or cannot be reached, retried with exponential
 *    backoff (--min-backoff doubling up to --max-backoff). Every value is
 *    cumulative (counters, histogram buckets, sums and counts; gauges are
 *    levels), so a dropped request loses no count: the next one carries
 *    every count up to its time. What a drop loses is resolution -- the
 *    receiver has fewer points in that stretch -- never an event.
 *    With OTLP delta temporality (--temporality delta) counters and
 *    histograms are sent as increases since the last acknowledged point
 *    (push_delta.c): the queue then holds one request, a new collection
 *    supersedes one not acknowledged (its deltas cover it), and the
 *    baseline advances only on a 2xx, so a failed or dropped request
 *    loses no count either.
 *  - 4xx but 429 is not retried: the receiver said the request itself is
 *    wrong (bad labels, too old samples, authentication); it is dropped and
 *    the log says why. 5xx, 429 and transport errors are retried.
 *  - Memory: at most --queue request bodies, plus one collection (bounded
 *    by --max-bytes, as a scrape) and its encoding scratch; the scratch is
 *    freed after each push but its first chunk.
 *  - SIGTERM or SIGINT: one last collection; then (and after --count
 *    collections) what is queued is delivered, retried with the backoff
 *    for at most --drain seconds (drain()); exit 0 if all was delivered.
 *
 * Requests are sent oldest first, so a receiver that refuses samples older
 * than what it has (Prometheus: out of order) sees them in order; a retry
 * after a timeout may resend a request the receiver had stored: the same
 * samples at the same timestamps, which Prometheus accepts as duplicates.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "push.h"

/* A request waiting to be sent. */
struct queued {
	uint8_t *body;
	size_t len;
	unsigned tries; /* attempts that failed so far */
};

/* What the agent did, for the log and the exit status. */
struct push_stats {
	/* retried: requests sent again after a failed attempt; failed: the
	 * attempts that failed (connection or retryable status); denied: of
	 * the dropped, those whose credentials were refused (401, 403) */
	unsigned long collected, sent, retried, failed, dropped, denied, superseded, failed_collect;
};

static volatile sig_atomic_t stop_signal;
/* Signals received: a second one ends the drain at exit (drain()). */
static volatile sig_atomic_t nsignals;
/* The self-pipe: a signal wakes the agent's wait (wait_until()) whenever
 * it comes, without masking signals anywhere. */
static int wake[2] = { -1, -1 };

static void on_signal(int sig)
{
	int saved = errno;

	stop_signal = sig;
	nsignals = nsignals < 1000 ? nsignals + 1 : nsignals;
	if (write(wake[1], "x", 1) < 0) {
		/* full: a wake-up is pending anyway */
	}
	errno = saved;
}

static double now_mono(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t now_real_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The agent: its queue (a ring of queue_max requests), the encoders'
 * scratch, the retry state. */
struct agent {
	const struct push_args *a;
	struct scrape_state st;
	struct arena arena;
	struct push_http *http;
	struct queued *q;
	size_t qhead, qn;
	struct push_stats s;
	double backoff, retry_at;
	int failing;
	uint64_t start_ns;
	size_t size_hint; /* the previous request's, for rw_encode() */
	/* delta temporality: the acknowledged baseline; the queue then holds
	 * at most one request, whose values delta_acked() makes the base */
	struct push_delta *delta;
};

/* Queues a request, dropping the oldest when the queue is full (a newer
 * request carries every count the older one did). */
static void enqueue(struct agent *ag, uint8_t *body, size_t len)
{
	struct queued *slot;

	if (ag->qn == ag->a->queue_max) {
		free(ag->q[ag->qhead].body);
		ag->qhead = (ag->qhead + 1) % ag->a->queue_max;
		ag->qn--;
		ag->s.superseded++;
	}
	slot = &ag->q[(ag->qhead + ag->qn) % ag->a->queue_max];
	slot->body = body;
	slot->len = len;
	slot->tries = 0;
	ag->qn++;
}

static void dequeue(struct agent *ag)
{
	free(ag->q[ag->qhead].body);
	ag->q[ag->qhead].body = NULL;
	ag->qhead = (ag->qhead + 1) % ag->a->queue_max;
	ag->qn--;
}

/* Reads the segments (as a scrape) and queues their encoding. */
static void collect(struct agent *ag)
{
	const struct push_args *a = ag->a;
	struct scrape_hold *hold;
	struct scrape_result res;
	const struct pcpu_snapshot *snap = scrape_collect(&a->cf, &ag->st, &hold, &res);
	struct push_encode e = { a->labels, a->nlabels, a->native, 0, 0, ag->start_ns, scrape_created_ns, hold, 0,
				 &ag->size_hint, NULL };
	char err[200];
	uint8_t *body;
	size_t len, nfam;
	int rc;

	ag->s.collected++;
	if (!snap) {
		ag->s.failed_collect++;
		fprintf(stderr, "pcpustat push: reading the segments failed: %s\n", res.msg);
		return;
	}
	e.now_ns = now_real_ns();
	e.now_ms = (int64_t)(e.now_ns / 1000000u);
	e.max_bytes = res.len; /* what the collection left of --max-bytes */
	nfam = snap->nfamilies;
	if (ag->delta) {
		/* A request not yet acknowledged is superseded: the new one's
		 * deltas are taken from the same acknowledged base, so they
		 * cover everything it carried (sending both would count it
		 * twice). */
		while (ag->qn) {
			dequeue(ag);
			ag->s.superseded++;
		}
		delta_discard(ag->delta);
		e.delta = ag->delta;
		if (delta_begin(ag->delta, snap, e.now_ns) < 0) {
			ag->s.failed_collect++;
			fprintf(stderr, "pcpustat push: out of memory for the delta baseline\n");
			scrape_release(hold);
			return;
		}
	}
	rc = a->http.proto == PUSH_REMOTE_WRITE ? rw_encode(snap, &e, &ag->arena, &body, &len, err, sizeof err)
						: otlp_encode(snap, &e, &ag->arena, &body, &len, err, sizeof err);
	if (ag->delta && rc == 0 && delta_end(ag->delta) < 0) {
		free(body);
		snprintf(err, sizeof err, "out of memory for the delta baseline");
		rc = -1;
	}
	if (ag->delta && rc == 0 && a->delta_state && delta_mark_needed(ag->delta) &&
	    delta_mark(ag->delta, a->delta_state, err, sizeof err) < 0) {
		/* The running file must list a start time before a series of
		 * it is sent (push_delta.c): not sent until it can be written
		 * (the baseline stays, so nothing is lost meanwhile). */
		free(body);
		fprintf(stderr, "pcpustat push: --delta-state: %s\n", err);
		snprintf(err, sizeof err, "--delta-state cannot be written: this collection is not sent (the "
			 "next covers it)");
		rc = -1;
	}
	if (ag->delta && rc < 0)
		delta_discard(ag->delta);
	arena_reset(&ag->arena);
	scrape_release(hold);
	if (rc < 0) {
		ag->s.failed_collect++;
		fprintf(stderr, "pcpustat push: %s\n", err);
		return;
	}
	if (a->http.gzip) {
		size_t zlen;
		uint8_t *z = (uint8_t *)gzip_body(body, len, 1, &zlen);

		free(body);
		if (!z) {
			ag->s.failed_collect++;
			fprintf(stderr, "pcpustat push: out of memory compressing a request\n");
			return;
		}
		if (a->verbose)
			fprintf(stderr, "pcpustat push: %zu bytes gzipped to %zu\n", len, zlen);
		body = z;
		len = zlen;
	}
	if (a->verbose)
		fprintf(stderr, "pcpustat push: %zu families, %zu bytes to send\n", nfam, len);
	enqueue(ag, body, len);
}

/* What a 401 or 403 asks of the user: the credentials configured, or that
 * none are. */
static const char *denied_hint(const struct push_args *a)
{
	if (a->http.basic_password_file)
		return "the next push reads the password file again and carries the same cumulative values";
	if (a->http.bearer_token_file)
		return "the next push reads the token file again and carries the same cumulative values";
	if (a->http.nheaders)
		return "no password or token file is configured: check the headers of "
		       "OTEL_EXPORTER_OTLP_[METRICS_]HEADERS (Authorization, an API key)";
	return "no credentials are configured: give --basic-auth-user with --basic-auth-password-file, "
	       "or --bearer-token-file";
}

/* Sends the queue, oldest first, until it is empty or a request must wait
 * (retry later: after the answer's Retry-After, else the backoff, which
 * doubles). `final`: draining before exit, until the monotonic time
 * `deadline` (drain()). */
static void deliver(struct agent *ag, double now, int final, double deadline)
{
	const struct push_args *a = ag->a;
	char why[400];

	while (ag->qn && now >= ag->retry_at && (final || !stop_signal)) {
		struct queued *q = &ag->q[ag->qhead];
		struct push_answer ans;
		enum push_outcome o;
		double delay;

		if (q->tries)
			ag->s.retried++;
		o = push_http_post(ag->http, q->body, q->len, why, sizeof why, &ans);
		if (o == PUSH_RETRY) {
			q->tries++;
			ag->s.failed++;
			ag->backoff = ag->backoff ? fmin(ag->backoff * 2, a->max_backoff) : a->min_backoff;
			delay = ans.retry_after >= 0 ? ans.retry_after : ag->backoff;
			ag->retry_at = now_mono() + delay;
			if (final && ag->retry_at > deadline)
				fprintf(stderr, "pcpustat push: %s: %s; not delivered before exit (%zu queued; "
					"--drain %g s%s)\n", a->http.url, why, ag->qn, a->drain,
					ans.retry_after >= 0 ? ", shorter than its Retry-After" : "");
			else if (final)
				fprintf(stderr, "pcpustat push: %s: %s; retrying in %.3g s%s before exit (%zu queued, "
					"--drain %g s)\n", a->http.url, why, delay,
					ans.retry_after >= 0 ? " (Retry-After)" : "", ag->qn, a->drain);
			else if (!ag->failing || a->verbose)
				fprintf(stderr, "pcpustat push: %s: %s; retrying in %.3g s%s (%zu queued, at most %zu)\n",
					a->http.url, why, delay, ans.retry_after >= 0 ? " (Retry-After)" : "", ag->qn,
					a->queue_max);
			ag->failing = 1;
			return;
		}
		if (ag->delta) /* the baseline advances only on a 2xx */
			o == PUSH_SENT ? delta_acked(ag->delta) : delta_discard(ag->delta);
		if (o == PUSH_DENIED) {
			ag->s.dropped++;
			ag->s.denied++;
			fprintf(stderr, "pcpustat push: %s: the receiver refused the credentials (%s); dropped, not "
				"retried (%s)\n", a->http.url, why, denied_hint(a));
		} else if (o == PUSH_DROP) {
			ag->s.dropped++;
			fprintf(stderr, "pcpustat push: %s: %s; dropped, not retried (a status %s does not retry: "
				"the receiver refuses this request itself; the next carries the same cumulative "
				"values)\n", a->http.url, why,
				a->http.grpc ? "OTLP/gRPC" : a->http.proto == PUSH_OTLP ? "OTLP" : "remote write");
		} else {
			ag->s.sent++;
			if (ans.rejected)
				fprintf(stderr, "pcpustat push: %s: partial success: the receiver rejected %lld data "
					"point(s)%s%s%s\n", a->http.url, (long long)ans.rejected,
					ans.rejected_why[0] ? ": " : "", ans.rejected_why,
					ag->delta ? " (not sent again: the request was acknowledged, so the delta "
						    "baseline advanced; the rejected increases are lost)" : "");
			if (ag->failing)
				fprintf(stderr, "pcpustat push: %s: delivering again (%lu failed attempts so far)\n",
					a->http.url, ag->s.failed);
			else if (a->verbose)
				fprintf(stderr, "pcpustat push: %s: %s\n", a->http.url, why);
		}
		ag->failing = 0;
		ag->backoff = 0;
		ag->retry_at = 0;
		dequeue(ag);
		now = now_mono();
	}
}

/* Sleeps until `until` (monotonic seconds) or a signal beyond the
 * `seen` first ones: a signal that came before the wait left a byte in the
 * pipe, so none is missed. */
static void wait_until(double until, sig_atomic_t seen)
{
	struct pollfd p = { wake[0], POLLIN, 0 };
	char buf[16];
	double d;

	while ((d = until - now_mono()) > 0 && nsignals == seen)
		if (poll(&p, 1, (int)ceil(d * 1000)) > 0)
			while (read(wake[0], buf, sizeof buf) > 0)
				;
}

/*
 * Before exit (--count done, or SIGINT or SIGTERM): what is queued is
 * delivered, retried with the usual backoff (and Retry-After) for at most
 * --drain seconds. A request whose next try would fall after that is given
 * up (said, and counted undelivered: exit 1); so is everything after a
 * second signal, which ends the drain at once. --drain 0: one try each.
 */
static void drain(struct agent *ag)
{
	const struct push_args *a = ag->a;
	double deadline = now_mono() + a->drain;
	sig_atomic_t seen = nsignals;

	ag->retry_at = 0; /* the first try at once, whatever the backoff was */
	while (ag->qn) {
		deliver(ag, now_mono(), 1, deadline);
		if (!ag->qn || ag->retry_at > deadline)
			break;
		wait_until(ag->retry_at, seen);
		if (nsignals != seen) {
			fprintf(stderr, "pcpustat push: %s: a second signal: %zu request(s) not delivered\n",
				a->http.url, ag->qn);
			break;
		}
	}
}

static int run(struct agent *ag)
{
	const struct push_args *a = ag->a;
	double next = now_mono();

	while (!stop_signal) {
		double now = now_mono();

		if (now >= next) {
			collect(ag);
			next += a->interval;
			if (next <= now) /* behind (a slow receiver): the next tick to come */
				next = now + a->interval - fmod(now - next, a->interval);
			if (a->count && ag->s.collected >= a->count)
				break;
		}
		deliver(ag, now_mono(), 0, 0);
		wait_until(ag->qn && ag->retry_at < next ? ag->retry_at : next, 0);
	}
	if (stop_signal)
		collect(ag); /* the last values before stopping */
	drain(ag);
	fprintf(stderr, "pcpustat push: %lu collected, %lu sent, %lu failed attempts, %lu retries (requests "
		"sent again), %lu dropped (%lu for refused credentials), %lu superseded in the queue, %lu "
		"collections failed, %zu undelivered\n",
		ag->s.collected, ag->s.sent, ag->s.failed, ag->s.retried, ag->s.dropped, ag->s.denied,
		ag->s.superseded, ag->s.failed_collect, ag->qn);
	return ag->qn || ag->s.dropped || ag->s.failed_collect ? 1 : 0;
}

/* --delta-state at start (push_delta.c says the file's two forms): the
 * previous agent's baseline, or the start times of one that did not exit
 * cleanly, or nothing (no agent sent anything yet: every series goes
 * whole); then the file is replaced by this agent's running form, so that
 * if it dies the next knows what it may have sent. A file that is not a
 * state file is said and replaced: the agent starts over (its first
 * collection sends no point). 0, or -1 (the file cannot be written). */
static int load_state(struct agent *ag)
{
	const char *path = ag->a->delta_state;
	char err[300];
	int rc = delta_load(ag->delta, path, err, sizeof err);

	if (rc < 0)
		fprintf(stderr, "pcpustat push: --delta-state: %s; starting over (the counts made before the "
			"first collection are not sent)\n", err);
	else if (rc == 0)
		delta_no_priming(ag->delta);
	if (rc == 2)
		fprintf(stderr, "pcpustat push: --delta-state: %s was left by an agent that did not exit cleanly: "
			"the series of segments it had seen are taken up from their first collection (what was "
			"counted after its last acknowledged push is not sent); other segments are sent whole\n",
			path);
	else if (rc == 1 && ag->a->verbose)
		fprintf(stderr, "pcpustat push: continuing from the delta baseline of %zu series in %s\n",
			delta_series_kept(ag->delta), path);
	else if (rc == 0 && ag->a->verbose)
		fprintf(stderr, "pcpustat push: no %s yet: every series is sent whole\n", path);
	if (delta_mark(ag->delta, path, err, sizeof err) < 0) {
		fprintf(stderr, "pcpustat push: --delta-state: %s\n", err);
		return -1;
	}
	return 0;
}

int push_main(int argc, char **argv, const struct pcpu_reader_options *ropt)
{
	struct push_args a;
	struct agent ag;
	struct sigaction sa;
	char err[200];
	int rc;

	memset(&a, 0, sizeof a);
	memset(&ag, 0, sizeof ag);
	a.cf.ropt = *ropt;
	if ((rc = push_parse_args(argc, argv, &a)) >= 0)
		goto out;
	ag.a = &a;
	ag.start_ns = now_real_ns();
	ag.q = calloc(a.queue_max, sizeof *ag.q);
	if (a.delta && !(ag.delta = delta_new())) {
		fprintf(stderr, "pcpustat push: out of memory\n");
		rc = 1;
		goto out;
	}
	if (a.delta_state && load_state(&ag) < 0) {
		rc = 1;
		goto out;
	}
	if (!ag.q || !(ag.http = push_http_new(&a.http, err, sizeof err))) {
		fprintf(stderr, "pcpustat push: %s\n", ag.q ? err : "out of memory");
		rc = 1;
		goto out;
	}
	if (a.verbose)
		fprintf(stderr, "pcpustat push: to %s every %g s (%s)%s\n", a.http.url, a.interval, a.interval_from,
			a.count ? "" : " until SIGINT or SIGTERM");
	scrape_memory_setup();
	if (pipe2(wake, O_NONBLOCK | O_CLOEXEC) < 0) {
		fprintf(stderr, "pcpustat push: pipe: %s\n", strerror(errno));
		rc = 1;
		goto out;
	}
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART; /* a request in flight goes on; the wait ends by the pipe */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	rc = run(&ag);
	if (a.delta_state) {
		/* The acknowledged baseline, for the next agent (the pending one
		 * of a request not delivered is not: its counts go again). */
		if (delta_save(ag.delta, a.delta_state, err, sizeof err) < 0) {
			fprintf(stderr, "pcpustat push: --delta-state: %s; the next agent starts over\n", err);
			rc = 1;
		} else if (a.verbose) {
			fprintf(stderr, "pcpustat push: delta baseline of %zu series saved in %s\n",
				delta_series_kept(ag.delta), a.delta_state);
		}
	}
out:
	if (wake[0] >= 0) {
		close(wake[0]);
		close(wake[1]);
	}
	while (ag.q && ag.qn)
		dequeue(&ag);
	free(ag.q);
	push_http_free(ag.http);
	delta_free(ag.delta);
	arena_free(&ag.arena);
	scrape_state_free(&ag.st);
	free(a.labels);
	otel_env_free(&a.env);
	return rc;
}
