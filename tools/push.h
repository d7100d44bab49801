/* SPDX-License-Identifier: MIT */
/*
 * `pcpustat push`'s own declarations: the agent that sends what `serve`
 * would answer a scrape with (scrape_collect(): every served segment,
 * labelled, with pcpu_segment_up) to a receiver on an interval.
 *
 *   push.c        the command: options, the interval loop, the bounded
 *                 queue, retries with backoff, the final push on SIGTERM
 *   push_rw.c     Prometheus remote write 1.0: a snapshot as a snappy
 *                 prometheus.WriteRequest (proto/remote_write.proto)
 *   push_otlp.c   OTLP/HTTP: a snapshot as an ExportMetricsServiceRequest
 *                 (proto/otlp_metrics.proto)
 *   push_http.c   the HTTP(S) client (libcurl): headers, authentication,
 *                 TLS, timeout, and what a response means (sent, retry,
 *                 drop)
 *   push_arena.c  the encoders' scratch memory, freed whole after each push
 *   push_delta.c  OTLP delta temporality: the acknowledged baseline
 *
 * One thread does everything, one push at a time.
 */
#ifndef PCPUSTAT_PUSH_H
#define PCPUSTAT_PUSH_H

#include <stddef.h>
#include <stdint.h>

#include "pcpustat.h"

enum push_protocol {
	PUSH_REMOTE_WRITE = 1, /* Prometheus remote write 1.0 */
	PUSH_OTLP = 2,         /* OTLP/HTTP protobuf, /v1/metrics */
};

/* A name="value" pair: an external label (remote write) or a resource
 * attribute (OTLP). */
struct push_label {
	const char *name, *value;
};

/* ---- push_arena.c ---- */

/* Bump allocation in chunks; everything is freed at once. */
struct arena {
	struct arena_chunk *head;
	size_t bytes; /* allocated from malloc, chunks included */
};
/* n bytes aligned for any type, or NULL (ENOMEM). */
void *arena_alloc(struct arena *a, size_t n);
/* n objects of size sz (overflow-checked), or NULL. */
void *arena_array(struct arena *a, size_t n, size_t sz);
/* A copy of s, or NULL. */
char *arena_strdup(struct arena *a, const char *s);
/* Frees every chunk but the first (kept for the next push), emptied. */
void arena_reset(struct arena *a);
void arena_free(struct arena *a);

/* ---- push_delta.c ---- */

/* What a delta point is taken from (delta_series()). */
struct delta_point {
	int skip;          /* the agent's first collection: no point for it */
	int base;          /* 1: subtract the base below; 0: send the whole
			    * value (a new series, or a reset) */
	uint64_t start_ns; /* the point's StartTimeUnixNano */
	uint64_t whole;    /* counter: the base value; histogram: the base sum */
	int64_t nanos;     /* counter with fractions: the base billionths */
	double residue;    /* counter with fractions, histogram: the base residue */
	const uint64_t *counts; /* histogram: the base counts (nbuckets) */
};
/* The baseline state (push_delta.c says how it works). One per agent,
 * used by one thread. NULL: out of memory. */
struct push_delta *delta_new(void);
void delta_free(struct push_delta *d);
/* Before encoding snapshot s at time now_ns: sizes the pending baseline
 * (replacing one not acknowledged). 0, or -1 (ENOMEM). */
int delta_begin(struct push_delta *d, const struct pcpu_snapshot *s, uint64_t now_ns);
/* For each counter and histogram series in snapshot order: records its
 * values in the pending baseline and says in *out what to send. created:
 * its segment's publication time (part of its identity). 0, or -1
 * (ENOMEM). Cost: a key comparison; a binary search when series came or
 * went (and once per baseline a sort of it). */
int delta_series(struct push_delta *d, const struct pcpu_snapshot_family *f, const struct pcpu_snapshot_series *se,
		 uint64_t created, struct delta_point *out);
/* After encoding: carries the base of series that were missing. 0, or -1
 * (ENOMEM). */
int delta_end(struct push_delta *d);
/* The request was acknowledged (2xx): its values become the base. */
void delta_acked(struct push_delta *d);
/* The request failed, was refused or superseded: the base stays. */
void delta_discard(struct push_delta *d);
/* Series in the acknowledged baseline. */
size_t delta_series_kept(const struct push_delta *d);
/* Writes the acknowledged baseline to path (through path.tmp, renamed;
 * mode 0600): 0, or -1 with err set. Cost: the baseline's size, written
 * and fsync'ed. */
int delta_save(const struct push_delta *d, const char *path, char *err, size_t cap);
/* Reads a state file (push_delta.c says its two forms): 1, a baseline
 * delta_save() wrote, now the acknowledged one (the next deltas continue
 * from it); 2, the running form of an agent that did not exit cleanly
 * (series of the start times it lists are recorded at first sight without
 * a point, others sent whole); either way no first collection without
 * points. 0 when path does not exist (then call delta_no_priming() if
 * nothing was ever sent); -1 with err set (unreadable, not a state file of
 * this program, truncated, out of memory: the state is unchanged). Cost:
 * the file's size, and a sort of its series' start times. */
int delta_load(struct push_delta *d, const char *path, char *err, size_t cap);
/* Nothing was sent before this agent (a state file that does not exist
 * yet): its first collection sends every series whole. */
void delta_no_priming(struct push_delta *d);
/* Whether the collection just encoded holds a series of a start time the
 * last running file (delta_mark()) does not list: then it must be written
 * again before the request is sent. */
int delta_mark_needed(const struct push_delta *d);
/* Writes the running form to path (as delta_save(): through path.tmp,
 * fsync'ed, renamed; mode 0600): every start time whose series this agent
 * may have sent, the request pending included. 0, or -1 with err set.
 * Cost: a sort of the series' start times, and a small file written. */
int delta_mark(struct push_delta *d, const char *path, char *err, size_t cap);

/* ---- the encoders: one request body from a snapshot ---- */

/* What an encoder needs besides the snapshot. */
struct push_encode {
	const struct push_label *labels; /* external labels / resource attributes */
	size_t nlabels;
	int native;          /* remote write: exponential families as native histograms too */
	int64_t now_ms;      /* the samples' timestamp */
	uint64_t now_ns;
	uint64_t start_ns;   /* OTLP: start time of series whose segment's is unknown */
	/* OTLP: a segment's publication time (scrape_created_ns() with
	 * hold), 0 when unknown; NULL: none is known. */
	uint64_t (*created_ns)(const struct scrape_hold *hold, const char *segment, const char *pid);
	const struct scrape_hold *hold;
	size_t max_bytes;    /* the body (and scratch) may not exceed this */
	/* Remote write: the size of the previous request before compression,
	 * updated by rw_encode(): its output buffer starts there instead of
	 * growing by doubling (NULL: none). */
	size_t *size_hint;
	/* OTLP: counters and histograms as delta from this baseline
	 * (delta_begin() called); NULL: cumulative. */
	struct push_delta *delta;
};

/* The body in *out (malloc'd, *len bytes): 0; or -1 with err set (ENOMEM,
 * EFBIG: over max_bytes, EINVAL: a value the format cannot carry). The
 * scratch memory comes from `a` and stays there until arena_reset(). */
int rw_encode(const struct pcpu_snapshot *s, const struct push_encode *e, struct arena *a, uint8_t **out,
	      size_t *len, char *err, size_t cap);
int otlp_encode(const struct pcpu_snapshot *s, const struct push_encode *e, struct arena *a, uint8_t **out,
		size_t *len, char *err, size_t cap);
/* An OTLP ExportMetricsServiceResponse's partial_success: *rejected the
 * data points the receiver rejected (0: none, or an answer that does not
 * decode) and `why` the start of its message ("" when none). */
void otlp_partial_success(const uint8_t *answer, size_t len, int64_t *rejected, char *why, size_t cap);
/* OTLP's unit for pcpu's ("seconds": "s", "bytes": "By", ...; else itself). */
const char *otlp_unit(const char *unit);

/* ---- push_env.c ---- */

/* The OpenTelemetry exporter environment (push_env.c says which variables
 * and their precedence). */
struct otel_env {
	const char *endpoint;       /* the metrics URL, or NULL */
	int grpc;                   /* OTEL_EXPORTER_OTLP_[METRICS_]PROTOCOL=grpc */
	const char *protocol_var;   /* the variable that said the protocol, or NULL */
	double timeout;             /* seconds, or 0: not set */
	double interval;            /* OTEL_METRIC_EXPORT_INTERVAL, seconds, or 0 */
	const char *certificate;    /* CA file, or NULL */
	const char *certificate_var; /* the variable it came from */
	const char *compression;    /* as set (checked by push.c), or NULL */
	const char *compression_var, *headers_var; /* the variables they came from */
	/* OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE as set (checked
	 * by push.c), or NULL */
	const char *temporality;
	char **headers;             /* "Name: value", nheaders of them */
	size_t nheaders;
	struct push_label *attrs;   /* OTEL_RESOURCE_ATTRIBUTES, decoded */
	size_t nattrs;
	const char *service_name;   /* OTEL_SERVICE_NAME, or NULL */
	char err[200];
	char *endpoint_own, *headers_copy, *attrs_copy; /* storage */
};
/* Reads the environment: 0, or -1 with err set (a malformed value: the
 * agent exits 2). otel_env_free() in both cases. */
int otel_env_read(struct otel_env *e);
void otel_env_free(struct otel_env *e);

/* ---- push_http.c ---- */

struct push_http_config {
	enum push_protocol proto;
	const char *url;
	const char *basic_user, *basic_password_file; /* read at every push */
	const char *bearer_token_file;                /* read at every push */
	const char *ca_file;
	double timeout; /* seconds, per request */
	int gzip;       /* OTLP: the bodies are gzip'ed (Content-Encoding: gzip;
			 * over gRPC, grpc-encoding: gzip) */
	int grpc;       /* OTLP/gRPC: url is the server's base (push_grpc.c) */
	char *const *headers; /* more request headers ("Name: value"), nheaders */
	size_t nheaders;
	int verbose;
};

enum push_outcome {
	PUSH_SENT = 0,  /* 2xx */
	PUSH_RETRY = 1, /* connection failed or timed out, or a retryable status: try again later */
	PUSH_DROP = 2,  /* any other status: the request is refused, retrying cannot help */
	PUSH_DENIED = 3, /* 401 or 403: the credentials were refused; dropped too */
};

/* What push_http_post() learnt beyond its outcome. */
struct push_answer {
	/* Retry-After of a retryable answer, in seconds (capped at
	 * PUSH_RETRY_AFTER_MAX); -1 when none was given. */
	double retry_after;
	/* OTLP 2xx with partial_success: data points the receiver rejected
	 * (0: none) and the start of its message ("" when none). */
	int64_t rejected;
	char rejected_why[200];
};
#define PUSH_RETRY_AFTER_MAX 3600.0

/* Whether a secret file (a password, a token) can be read now: 0, or -1
 * with why set. The agent checks its files at start (exit 2), then reads
 * them at every push (so that they can be rotated). */
int push_secret_check(const char *file, char *why, size_t cap);
/* Whether a CA file (--ca-file, OTEL_EXPORTER_OTLP_CERTIFICATE) can be read
 * now and holds a PEM certificate: 0, or -1 with why set. Checked at start
 * (exit 2), as the secret files are. */
int push_ca_check(const char *file, char *why, size_t cap);

/* ---- push_grpc.c: gRPC's own wire rules (HTTP/2 is libcurl's) ---- */

/* The path of OTLP's metrics export, appended to a gRPC base URL. */
#define GRPC_OTLP_METRICS_PATH "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"

/* What a gRPC answer's headers and trailers said. */
struct grpc_status {
	int seen;          /* a grpc-status came */
	int code;          /* its code (0 OK) */
	int details;       /* grpc-status-details-bin came (RetryInfo, maybe) */
	char message[200]; /* grpc-message, percent-decoded ("" when none) */
};
/* A code's name ("UNAVAILABLE"), or "?". */
const char *grpc_code_name(int code);
/* The 5 bytes before a message of len bytes (compressed: grpc-encoding). */
void grpc_frame(uint8_t prefix[5], size_t len, int compressed);
/* The message in an answer's body: 0, or -1 (short, or compressed). */
int grpc_unframe(const uint8_t *p, size_t n, const uint8_t **msg, size_t *len);
/* One header or trailer line (libcurl hands trailers over as headers). */
void grpc_header(struct grpc_status *g, const char *line, size_t len);
/* The code an answer's non-200 HTTP status stands for. */
int grpc_from_http(long status);
/* What the code means for the exporter (OTLP/gRPC's retry rules). */
enum push_outcome grpc_outcome(const struct grpc_status *g);

struct push_http;
/* A client for cfg (kept, not copied: it must outlive the client), or NULL
 * with err set. */
struct push_http *push_http_new(const struct push_http_config *cfg, char *err, size_t cap);
/* POSTs body: the outcome, and in why (always set) the status or error and
 * the start of the receiver's answer. */
enum push_outcome push_http_post(struct push_http *h, const uint8_t *body, size_t len, char *why, size_t cap,
				 struct push_answer *ans);
void push_http_free(struct push_http *h);

/* ---- push_args.c ---- */

/* `pcpustat push`'s settings, from its command line and the OpenTelemetry
 * environment (push_args.c). */
struct push_args {
	struct scrape_config cf;
	struct push_http_config http;
	struct push_label *labels;
	size_t nlabels;
	const char *job, *instance;
	int native, verbose;
	const char *compression; /* --compression: "gzip", "none", NULL: not given */
	const char *temporality; /* --temporality as given, NULL: not given */
	const char *delta_state; /* --delta-state FILE, or NULL */
	int delta;               /* OTLP delta temporality for counters and histograms */
	int given_timeout, given_ca, given_job, given_instance, given_interval; /* on the command line */
	const char *interval_from; /* where the interval came from, for -v */
	struct otel_env env; /* the OpenTelemetry environment (OTLP) */
	double interval, min_backoff, max_backoff;
	double drain; /* --drain: seconds to keep retrying the queue at exit */
	size_t queue_max;
	unsigned long count; /* 0: until a signal */
};

/* Parses the command line into *a (zeroed by the caller): -1 to run, or
 * the exit status (0 after --help; 2 on a bad option or a file refused at
 * start, said on stderr). */
int push_parse_args(int argc, char **argv, struct push_args *a);

/* ---- push.c ---- */

int push_main(int argc, char **argv, const struct pcpu_reader_options *ropt);

#endif /* PCPUSTAT_PUSH_H */
