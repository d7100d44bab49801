/* SPDX-License-Identifier: MIT */
/*
 * pcpu_stat_statements' shared declarations: the statistics (one family
 * each), the tree the postmaster makes, a backend's entries. The files:
 * pcpu_stat_statements.c (the hooks, the counting, the settings,
 * _PG_init), pss_tree.c (the tree and the entries), pss_text.c (the query
 * texts), pss_view.c (the views and the reset, which read the tree's
 * segment), pss_save.c (.save across a restart), pss_evict.c (eviction at
 * pcpu_stat_statements.max, off the queries' path), pss_reuse.c (the
 * evicted entries' series reused for new statements, and the counting
 * sections that make it safe).
 */
#ifndef PCPU_STAT_STATEMENTS_H
#define PCPU_STAT_STATEMENTS_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "utils/hsearch.h"
#include "utils/queryjumble.h"

#include <pcpu/pcpu.h>

#define PSS_NAME "pcpu_stat_statements"
#define PSS_COLS 46 /* pg_stat_statements 1.10's 43, then the percentiles */

/* ---- the statistics: one family each ---------------------------------------------- */

enum {
	C_CALLS,
	C_ROWS,
	C_EXEC_TIME,
	C_SHARED_HIT,
	C_SHARED_READ,
	C_SHARED_DIRTIED,
	C_SHARED_WRITTEN,
	C_LOCAL_HIT,
	C_LOCAL_READ,
	C_LOCAL_DIRTIED,
	C_LOCAL_WRITTEN,
	C_TEMP_READ,
	C_TEMP_WRITTEN,
	C_BLK_READ_TIME,
	C_BLK_WRITE_TIME,
	C_TEMP_BLK_READ_TIME,
	C_TEMP_BLK_WRITE_TIME,
	C_WAL_RECORDS,
	C_WAL_FPI,
	C_WAL_BYTES,
	C_JIT_FUNCTIONS,
	C_JIT_GENERATION_TIME,
	C_JIT_INLINING_COUNT,
	C_JIT_INLINING_TIME,
	C_JIT_OPTIMIZATION_COUNT,
	C_JIT_OPTIMIZATION_TIME,
	C_JIT_EMISSION_COUNT,
	C_JIT_EMISSION_TIME,
	C_PLANS,
	C_PLAN_TIME,
	NCOUNTERS
};

/* Times are kept in nanoseconds (exposed in seconds: scale -9). */
typedef struct {
	const char *name, *help, *unit;
	int scale;
} stat_desc;

/* The extremes: gauges whose slot-0 word holds the value (CAS only). */
enum { G_MIN_EXEC, G_MAX_EXEC, G_MIN_PLAN, G_MAX_PLAN, NGAUGES };
/* Sums of squares, for the standard deviations: counters with fractions
 * (pcpu/fraction.h), in ms^2 -- an execution of 1 us adds 1e-6, of 10 s
 * 1e8, both within the billionths and the whole units. */
enum { F_EXEC_SQUARES, F_PLAN_SQUARES, NFRACTIONS };
extern const stat_desc pss_counters[NCOUNTERS];
extern const stat_desc pss_gauges[NGAUGES];
extern const stat_desc pss_fractions[NFRACTIONS];
/* The tree's count of the entries in the table, and of the eviction
 * passes (unlabelled; exported too). */
extern const struct pcpu_family_desc pss_entries_desc, pss_dealloc_desc;

/* The execution times' histogram: one series per entry (pss_tree.c: its
 * layout, exponential of schema 0 -- Prometheus' native buckets, one per
 * power of two -- with classic `le` buckets from 15 us to 32 s). Its
 * count is the entry's calls, recorded in store() with the same value as
 * exec_time (ns). */
#define EXEC_HIST PSS_NAME "_exec_duration_seconds"
/* Its buckets: PSS_HIST_BUCKETS_MAX at most (checked when the tree is made). */
#define PSS_HIST_BUCKETS_MAX 80
extern const struct pcpu_histogram_layout pss_hist_layout;
extern const stat_desc pss_exec_hist;

#define QUERY_INFO PSS_NAME "_query_info"
#define ENTRY_RESETS PSS_NAME "_entry_resets"
#define ENTRY_LIVE PSS_NAME "_entry_live"
#define RESETS PSS_NAME "_resets"

/* Series an entry holds: the counters, the gauges, the sums of squares,
 * the histogram, its resets, whether it is in the table (live), its query
 * text (one, relabelled at each reset: pss_reuse.c). */
#define SERIES_PER_ENTRY (NCOUNTERS + NGAUGES + NFRACTIONS + 4)

/* The labels of every family, in this order; the text's adds "epoch" (the
 * entry's resets when the text was recorded) and "query". */
#define PSS_KEY_LABELS 4

/* ---- the tree (made by the postmaster, inherited by every backend) ------------------- */

typedef struct {
	pcpu_registry_t *reg;
	pcpu_segment_t *seg;
	pcpu_family_t *counters[NCOUNTERS];
	pcpu_family_t *gauges[NGAUGES];
	pcpu_family_t *fractions[NFRACTIONS];
	pcpu_family_t *entry_resets;
	pcpu_family_t *entry_live;
	pcpu_family_t *exec_hist;
	size_t hist_nbuckets; /* pcpu_histogram_nbuckets() of its series */
	int64 *resets;      /* slot-0 word of the resets counter: atomics only */
	int64 *stats_reset; /* slot-0 word of the stats_reset gauge: atomics only */
	/* The table (slot-0 words, atomics only): the entries in it (live),
	 * and the eviction passes (pcpu_stat_statements_info's dealloc). */
	int64 *nlive;
	int64 *dealloc;
	/* The series sets (pss_reuse.c), set by the evictor at each poll
	 * (slot-0 words of unlabelled gauges: atomic stores only). */
	int64 *sets_made, *sets_retired, *sets_free;
	/* The evictor's reads of the whole tree (slot-0 word of a counter:
	 * atomic adds only). */
	int64 *tree_reads;
	/* The counting backends' registrations of entries (pss_entry_get()). */
	pcpu_counter_t registrations;
	int max; /* pcpu_stat_statements.max: the entries the table keeps */
	bool group_read; /* pcpu_stat_statements.group set: its gid */
	gid_t gid;
	char path[MAXPGPATH];
	char why[256]; /* why not, when reg == NULL */
} pss_tree_t;

extern pss_tree_t pss_tree;

/* ---- a backend's entries ------------------------------------------------------------- */

typedef struct {
	Oid userid;
	Oid dbid;
	uint64 queryid;
	bool toplevel;
} pss_key;

typedef struct {
	pss_key key; /* hash key: first */
	/* The series set the entry holds (pss_reuse.c; -1: none, never
	 * reused), and the generation of the counting section in which this
	 * backend took its handles: the handles are dropped once the set is
	 * retired in a later generation (pss_section_enter()). */
	int set;
	uint64 gen;
	/* The set's labelling its handles were taken under
	 * (pss_set_labelling()), and whether its set was retired since
	 * (pss_entry_purge()): then it is not counted into until the key
	 * takes the set back -- its handles still good when that set has
	 * the same labelling, taken anew otherwise (pss_entry_get()). */
	uint32 labelled;
	bool stale;
	pcpu_counter_t c[NCOUNTERS];
	pcpu_counter_t f[NFRACTIONS];
	pcpu_histogram_t *h; /* the execution times (EXEC_HIST) */
	int64 *minmax[NGAUGES]; /* the gauges' slot-0 words */
	int64 seen[NGAUGES];    /* their values as this backend last saw them */
	int64 resets_seen;
	/* The text: the entry's resets word (its counter's slot-0 word,
	 * atomics only), its value when this backend last looked (the epoch
	 * of the text it knows), and whether the text is to be recorded
	 * anew: after a reset of the entry, the first text met is, as
	 * pg_stat_statements records the first text after it removed the
	 * entry. */
	int64 *epoch;
	int64 text_epoch;
	int64 text_resets_seen;
	bool want_text;
	/* Whether the entry is in the table: its live gauge's slot-0 word (1
	 * in, 0 out: new, evicted or reset), moved by compare-and-swap only,
	 * so that of the processes that bring it in, or take it out, one
	 * does, and counts it in pss_tree.nlive. */
	int64 *live;
} pss_entry;

/* In the postmaster, before it forks (pss_tree.c): the registry, its
 * families, the published tree, for a table of `max` entries and at most
 * `max_keys` series sets at once (pss_reuse.c: in the table, evicted and
 * waiting for reuse, or free), readable by `group` too where not empty;
 * false with pss_tree.why on failure. */
bool pss_tree_make(int max, int max_keys, const char *group, const char *dir);

/* How pss_entry_get() comes by an entry it has not met (pss_reuse.c):
 *  PSS_COUNT  a counting backend: the key's set, or a free set relabelled
 *             for it, or a new one while fewer than max_keys were made;
 *             NULL (refused, logged once) when none is left;
 *  PSS_ADOPT  the evictor, a reset: the key's set (left retired if it
 *             is), or its series (made before a crash restart forgot the
 *             sets) taken as a new set, or as no set when none is left
 *             (never reused then);
 *  PSS_FIND   the key's set only (NULL when it has none). */
typedef enum { PSS_COUNT, PSS_ADOPT, PSS_FIND } pss_get_mode;

/* The backend's entry of `key` (pss_tree.c): found, or registered in the
 * tree with `text` (NULL: none) as `mode` says; NULL when refused. A
 * counting backend calls it inside its counting section. */
pss_entry *pss_entry_get(const pss_key *key, const char *text, int text_len, pss_get_mode mode);

/* The entry's series registered in this process (pss_tree.c), the key's
 * set in hand: false (logged once) when one could not be. */
bool pss_entry_register(pss_entry *e, const char *text, int text_len);

/* Marks this process's entry of `key` stale, if it has one with a set: not
 * used until the key takes a set again (pss_entry_get()). */
void pss_entry_stale(const pss_key *key);

/* Marks stale this process's entries whose set was retired after they
 * were taken (pss_reuse.c's generations), or forgets every entry (all). */
void pss_entry_purge(bool all);

/* Said once per process: an entry or text refused, and why. */
void pss_refused(const char *what);

/* The local hash of this process's entries (pss_tree.c). */
HTAB *pss_local_entries(void);

/* ---- reuse of evicted entries' series (pss_reuse.c) ------------------------------------ */

/* A process's counting section: the generation it counts under, in
 * shared memory, while it holds or takes entry handles (the protocol:
 * pss_reuse.c's top comment). */
typedef struct {
	uint64 gen; /* 0: outside */
	int32 pid;
	/* A cache line of its own: every backend stores gen twice per
	 * statement counted, and slots of neighbouring PGPROCs in one line
	 * would move that line between the backends' CPUs at each store
	 * (false sharing), the one shared line of the counting path. */
	char pad[PG_CACHE_LINE_SIZE - sizeof(uint64) - sizeof(int32)];
} pss_slot;

StaticAssertDecl(sizeof(pss_slot) == PG_CACHE_LINE_SIZE, "a counting slot is one cache line");

extern pss_slot *pss_my_slot;     /* NULL: no section (no shared memory, no PGPROC) */
extern const volatile uint64 *pss_gen_word; /* the current generation */
extern uint64 pss_seen_gen;       /* the generation of this backend's last purge */
extern int pss_max_sets;          /* max_keys */

/* Enters the counting section: one load, one plain store, one load (no
 * lock, no atomic read-modify-write); entries retired since the last
 * section are forgotten first (pss_section_purge(), off the common path). */
void pss_section_purge(uint64 gen);
bool pss_slot_attach(void); /* this process's slot, once: false without one */
static inline void pss_section_enter(void)
{
	uint64 g, g2;

	if (unlikely(pss_my_slot == NULL) && !pss_slot_attach())
		return;
	g = __atomic_load_n(pss_gen_word, __ATOMIC_ACQUIRE);
	for (;;) {
		__atomic_store_n(&pss_my_slot->gen, g, __ATOMIC_RELAXED);
		/* The store before the next load in program order; the
		 * evictor's membarrier() orders them on the CPU (see
		 * pss_reuse.c): either it sees this generation, or this load
		 * sees its new one. */
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		g2 = __atomic_load_n(pss_gen_word, __ATOMIC_ACQUIRE);
		if (g2 == g)
			break;
		g = g2;
	}
	if (g != pss_seen_gen)
		pss_section_purge(g);
}

/* Leaves it: a plain store of 0. */
static inline void pss_section_leave(void)
{
	if (pss_my_slot != NULL)
		__atomic_store_n(&pss_my_slot->gen, 0, __ATOMIC_RELEASE);
}

/* The generation this backend counts under now (0 outside a section). */
static inline uint64 pss_section_gen(void)
{
	return pss_my_slot ? pss_my_slot->gen : 0;
}

/* Shared memory: asked for, and made, by the hooks _PG_init installs. */
void pss_reuse_init(int max_sets);

/* Under the sets' lock, by pss_entry_get(): the set of `key` for `mode`
 * in e->set (-1: none); false: refused. Releases nothing: the caller
 * registers the series, then calls pss_sets_done(). */
bool pss_sets_take(pss_entry *e, pss_get_mode mode);
void pss_sets_done(const pss_entry *e);

/* Records the text series v (e's key's labels, `epoch`, the text) of
 * e's entry (pss_entry_text()): its set's text series relabelled to v --
 * the evicted key's that had the set, or its own of an older epoch -- or
 * made where the set has none (or the entry no set); nothing where the
 * set has a text of this key and epoch already (the first one is kept).
 * Takes the sets' lock unless held (pss_entry_get()'s registration).
 * False when refused (pcpu_stats_error() says why). */
bool pss_sets_text(const pss_entry *e, int64 epoch, const char *const v[6]);

/* The evictor: marks victim entries retired (each taken out of the table
 * already), then opens a new generation; and, at every poll, relabels the
 * retired sets that no counting section can still use, for reuse. */
void pss_sets_retire(pss_entry **victims, int n);
void pss_sets_reclaim(void);

/* A set in use as the evictor sees it (pss_sets_live()): its number, its
 * key, and its labelling (a number that changes each time the set's
 * series take a key: made or relabelled). */
typedef struct {
	pss_key key;
	int set;
	uint32 labelled;
} pss_live_set;

/* The evictor: the sets in use (LIVE: their key's entry in the table, or
 * counted since its last reset), at most `max`, into out; their count.
 * Takes the sets' lock shared, for one pass over the sets. */
int pss_sets_live(pss_live_set *out, int max);

/* Set `set`'s labelling (pss_sets_live()), the sets' lock held: 0 for
 * none (-1, or no shared memory). */
uint32 pss_set_labelling(int set);

/* Whether set `set` was retired in a generation after `gen` (a plain load:
 * the generation's acquire ordered it). */
bool pss_set_retired_after(int set, uint64 gen);

/* After a reset or an eviction pass anywhere since the last look (one load
 * otherwise): whether the entry's text is to be recorded anew
 * (e->want_text), and the entry brought back into the table when it was
 * taken out (pss_entry_in()). Called before every count. */
void pss_entry_check(pss_entry *e);

/* Brings the entry into the table (live 0 -> 1, nlive + 1) unless it is;
 * a compare-and-swap, off the common path (a new entry, or one evicted or
 * reset since). */
void pss_entry_in(pss_entry *e);

/* Takes the entry out of the table (live 1 -> 0, nlive - 1, when it was
 * in) and resets it: its counters from zero (by offset: adds running
 * meanwhile land before or after, never lost into a half), its extremes
 * none; with `new_epoch` (a reset, not an eviction) a new epoch, so that
 * the next text met is recorded. Never waits. The caller bumps
 * *pss_tree.resets afterwards, so that every backend reloads its copies
 * and brings the entry back at its next count. */
void pss_entry_out(pss_entry *e, bool new_epoch);


/* The evicting background worker (pss_evict.c): registered by _PG_init. */
void pss_evict_register(void);

/* The family of statistic `d` in `reg` (the tree's, or the export's),
 * labelled by the key; NULL with pss_tree.why on failure (pss_tree.c). */
pcpu_family_t *pss_family(pcpu_registry_t *reg, const stat_desc *d, enum pcpu_metric_type type,
			  bool fractions);

/* The key's label values: v[0..3] (v[4], v[5] NULL) in buf. */
void pss_key_values(const pss_key *k, char buf[4][24], const char *v[6]);

/* The text series v (the key's labels, epoch, text) of QUERY_INFO in
 * `reg`: pcpu_registry_info()'s return and errno. */
int pss_text_info(pcpu_registry_t *reg, const char *const v[6]);

/* The bounded export (pss_export.c), run by the evictor: every
 * export_interval seconds the top `export_top` statements by total time of
 * the tree's `rows` (pss_read_rows()) copied into a registry of the
 * worker's own, published in pcpustat's default directory, while the tree
 * itself lies in a folder of its own. pss_export_start() returns false
 * when the export is off or failed (then pss_export_pass() does nothing). */
extern int pss_export_top;
extern int pss_export_interval;
bool pss_export_start(void);
void pss_export_pass(HTAB *rows);
/* In the postmaster: the folder of the whole tree (NULL: pcpustat's
 * default one, every entry exported). */
const char *pss_export_tree_dir(const char *group);

/* Records `text` (len bytes of the server encoding) as the entry's text of
 * its current epoch. Takes the directory's lock. */
void pss_entry_text(pss_entry *e, const char *text, int len);

/* A label value of a statement's text: at most
 * PCPU_STATS_LABEL_VALUE_MAX - 1 bytes of UTF-8 (pss_text.c), palloc'd. */
char *pss_text_label(const char *src, int len);

/* The backend's entry of `key` if it has met it, else NULL: a local hash
 * lookup, no lock. */
pss_entry *pss_entry_find(const pss_key *key);

/* One entry as read from the tree's segment (pss_read_rows()). */
typedef struct {
	pss_key key;
	bool whole; /* its calls series was read */
	uint64 c[NCOUNTERS];
	int64 g[NGAUGES];
	double f[NFRACTIONS];
	int64 epoch;       /* the entry's resets */
	bool live;         /* in the table */
	const char *query; /* the text of the latest epoch recorded */
	int64 query_epoch;
	/* The execution times' histogram: its family in the snapshot (NULL:
	 * not read) and its series' counts (pss_tree.hist_nbuckets) and sum,
	 * the snapshot's. */
	const struct pcpu_snapshot_family *hist_family;
	const uint64 *hist;
	int64 hist_sum;
} pss_row;

/* Reads the tree's segment as any reader does into a hash of pss_row
 * (pss_view.c), in the current memory context; its strings are the
 * snapshot's, which the caller frees with pss_snapshot_done() (in a
 * PG_FINALLY: the read may ereport). */
HTAB *pss_read_rows(void);
void pss_snapshot_done(void);

/* .save (pss_save.c): the entries written to pg_stat/ at the postmaster's
 * shutdown, and read back (then removed) at its start. */
extern bool pss_save;
void pss_save_load(void);
void pss_save_at_exit(int code, Datum arg);

/* pcpu_stat_statements_info's stats_reset: set (a reset of every entry,
 * the tree's start) and read. */
void pss_set_stats_reset(TimestampTz t);
TimestampTz pss_stats_reset(void);

/* The statement of `source` at (location, len), cleaned as
 * CleanQuerytext() does, with the constants js located replaced by $n
 * (pss_text.c): palloc'd, its length in *out_len. */
char *pss_normalize(const char *source, int location, int len, const JumbleState *js,
		    int *out_len);

#endif /* PCPU_STAT_STATEMENTS_H */
