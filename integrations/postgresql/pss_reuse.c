/* SPDX-License-Identifier: MIT */
/*
 * pcpu_stat_statements' reuse of evicted entries' series for new
 * statements, so that the statements met over the server's life are not
 * bounded by the series: the tree holds at most
 * pcpu_stat_statements.max_keys entries' series sets at once, each with
 * one text series. (The label strings each relabelling writes take the
 * room the replaced ones freed: docs/postgresql.md, "Eviction".)
 *
 * A shared tree never frees a series (another process may hold it);
 * pcpu_family_relabel() gives one other label values over the same
 * storage, values zeroed, on the condition -- as free()'s -- that no
 * process still uses a handle to the old series. The counting path takes
 * no lock and does no atomic read-modify-write, so that condition comes
 * from quiescent states, as in RCU's QSBR:
 *
 *  - Sets. The series of one entry (every family's, and its text's, an
 *    info series) are a set, numbered; shared memory holds each set's
 *    state (LIVE: in use; RETIRED: evicted,
 *    waiting; FREE: no process can hold it) and a hash from key to set,
 *    under one LWLock taken only where a process meets a key for the first
 *    time (it takes the tree's directory lock there anyway) and by the
 *    evictor. A set's series keep their key's labels until a new key
 *    takes the set: an evicted statement met again takes its own set back
 *    as it is (no relabelling), a new statement relabels the free set
 *    freed longest ago (pcpu_families_relabel(): every family's series
 *    at once).
 *
 *  - Sections. A backend counts inside a section (pss_section_enter()/
 *    _leave(), pcpu_stat_statements.h): it stores in its slot (one per
 *    PGPROC, by MyProc->pgprocno) the generation it counts under, reads the
 *    generation again, and stores 0 when done -- plain loads and stores. It
 *    uses or takes entry handles only inside; a handle keeps the generation
 *    of the section that took it (pss_entry.gen).
 *
 *  - Retiring. The evictor takes the victims out of the table (as before:
 *    pss_entry_out()), marks their sets RETIRED with retired_gen = G + 1
 *    under the lock, publishes generation G + 1 (store-release), then calls
 *    membarrier(MEMBARRIER_CMD_GLOBAL): every CPU runs a full barrier, so
 *    that for each backend either its slot store is visible to the
 *    evictor's later reads, or its load of the generation that follows
 *    the store sees G + 1 (the store-buffer case the backend's own fence
 *    would otherwise have to close, on the hot path).
 *
 *  - Reclaiming (every poll of the evictor, off any query): a RETIRED set
 *    becomes FREE once no slot holds a generation older than its
 *    retired_gen (0, outside a section, holds none: a backend idle for
 *    hours blocks nothing). A backend stopped inside a section of an
 *    older generation (SIGSTOP, a debugger) delays the reuse, never makes
 *    it wrong; new statements are refused (logged) once no set is free. A
 *    slot whose pid is gone (a process that exited without its exit
 *    callbacks) is skipped; a process killed (SIGKILL) makes the
 *    postmaster reinitialise shared memory: every slot 0, every set
 *    forgotten (below).
 *
 *  - Purging. A backend entering a section under a generation it has not
 *    seen drops, before it looks anything up, the entries whose set was
 *    retired after the section that took their handles (pss_entry_purge()):
 *    it never counts into a series relabelled for another statement, and
 *    it drops them before its next registration, which would drop its
 *    stale series objects under them. It then meets the statement again as
 *    new: its own set taken back (RETIRED or FREE, still its key's: the
 *    same series, from zero since the eviction), or another free set
 *    relabelled for it -- its own entry, never the one that took its old
 *    set.
 *
 *  - A backend between a lookup and its counting, or in the middle of a
 *    registration, is inside its section: the evictor waits for it. The
 *    sets' lock orders a key taking its set back with the set's reclaim
 *    and with another key's relabelling of it.
 *
 *  - Texts. A set's text series -- QUERY_INFO, labelled with the key, the
 *    epoch (the entry's resets) and the text -- is relabelled as the
 *    others are, but with the text it gets (pss_sets_text(), called by
 *    pss_entry_text(), the only maker of a text): shared memory holds,
 *    under the sets' lock, each set's text series' key, epoch and text
 *    (PCPU_STATS_LABEL_VALUE_MAX bytes a set, the most pss_text_label()
 *    makes), the old labels a relabelling names. A new key taking a free
 *    set relabels its text series from the evicted key's labels to its
 *    own, inside the registration that relabelled the rest (the same
 *    lock held: the entry is not in the table yet, so no reader lists it
 *    without its text); a key taking its own set back keeps its text (the
 *    same key and epoch: nothing to do); a reset's new epoch relabels the
 *    key's text series to the first text met after it. Its value is 1
 *    under any labels, and the relabelling replaces every label at once
 *    for readers: the view and the export see the old statement's labels
 *    or the new one's, never a key with another key's text. Invariant: a
 *    set's text series carries the set's key -- a free set taken without
 *    a text of its new key (none given, or refused) leaves its text series
 *    to the evicted key and forgets it (pss_sets_done()), so that no two
 *    sets name one text series. A text series met again with no set
 *    holding it (left so, or made before a crash restart) is taken by the
 *    set whose text it is (EEXIST); only those stay unowned: a text per
 *    set, plus those.
 *
 * Parallel workers count nothing (their leader does) and hold no section;
 * neither does the postmaster, whose entries (.save's, made before shared
 * memory) are taken as sets when it is made, and forgotten when it is made
 * again after a crash (their sets may have been reused before); their
 * texts, recorded in the postmaster before shared memory, are handed to
 * their sets then (saved_texts). After a crash restart the tree keeps the
 * series the forgotten sets held, texts included: a key met again takes
 * its series as a new set (its text too, met with its labels), and so
 * does the evictor for the ones it evicts; those never met again stay
 * (at most max_keys sets and their texts per crash).
 *
 * Where membarrier(MEMBARRIER_CMD_GLOBAL) is not available (a kernel with
 * nohz_full CPUs, a sandbox), sets are never reused: an evicted key keeps
 * its series, and new keys past max_keys are refused (logged once).
 */
#include "pcpu_stat_statements.h"

#include <signal.h>
#include <unistd.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>

#include "access/twophase.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

enum { SET_LIVE = 1, SET_RETIRED, SET_FREE };

/* Eviction passes (generations) after which a free set is cold: a new key
 * relabels it rather than make a new set (pss_sets_take()). */
#define COLD_PASSES 4

typedef struct {
	pss_key key;        /* the key whose labels its series carry */
	int32 state;
	/* Bumped each time the set's series take a key (made, or
	 * relabelled): the evictor's handles of its series stay good while
	 * it is the same (pss_sets_live()). */
	uint32 labelled;
	uint64 freed_gen; /* FREE: the generation it was freed in */
	int32 prev, next;   /* FREE: its neighbours on the free list (-1: none) */
	uint64 retired_gen; /* its last retirement's generation (0: none) */
	/* Its text series (has_text): the key and epoch labels; the text
	 * label is the set's slot of pss_shared_t.texts. Its key is the set's
	 * (pss_sets_done() drops a text left another key's). */
	bool has_text;
	pss_key text_key;
	int64 text_epoch;
} pss_set;

typedef struct {
	pss_key key;
	int32 set;
} set_of_key;

typedef struct {
	LWLock *lock;
	uint64 gen; /* >= 1; bumped by the evictor only */
	int32 nsets; /* sets made (their numbers 0..nsets-1) */
	int32 free_head, free_tail; /* freed at the head, taken at the tail */
	int32 nfree, nretired;
	bool reuse; /* membarrier available: sets are reclaimed */
	int32 nslots;
	pss_slot *slots;
	/* Each set's text label (PCPU_STATS_LABEL_VALUE_MAX bytes a set, the
	 * most pss_text_label() makes): a page is touched once a set of it
	 * holds a text. */
	char *texts;
	pss_set sets[FLEXIBLE_ARRAY_MEMBER];
} pss_shared_t;

static pss_shared_t *shared;
static HTAB *set_hash;

pss_slot *pss_my_slot;
const volatile uint64 *pss_gen_word;
uint64 pss_seen_gen;
int pss_max_sets;

static shmem_request_hook_type prev_shmem_request;
static shmem_startup_hook_type prev_shmem_startup;

static int nslots(void)
{
	/* One per PGPROC: backends, auxiliary processes, prepared xacts. */
	return MaxBackends + NUM_AUXILIARY_PROCS + max_prepared_xacts;
}

static Size shared_size(void)
{
	Size s = add_size(offsetof(pss_shared_t, sets), mul_size(pss_max_sets, sizeof(pss_set)));

	/* The slots start on a cache line (ShmemInitStruct()'s memory does). */
	s = add_size(CACHELINEALIGN(s), mul_size(nslots(), sizeof(pss_slot)));
	s = add_size(MAXALIGN(s), mul_size(pss_max_sets, PCPU_STATS_LABEL_VALUE_MAX));
	return add_size(s, hash_estimate_size(pss_max_sets, sizeof(set_of_key)));
}

static char *set_text(int set)
{
	return shared->texts + (Size)set * PCPU_STATS_LABEL_VALUE_MAX;
}

static bool same_key(const pss_key *a, const pss_key *b)
{
	return a->userid == b->userid && a->dbid == b->dbid && a->queryid == b->queryid &&
	       a->toplevel == b->toplevel;
}

/* The set's text series is now (key, epoch, text): the sets' lock held. */
static void text_keep(int set, const pss_key *key, int64 epoch, const char *text)
{
	pss_set *s = &shared->sets[set];

	s->text_key = *key;
	s->text_epoch = epoch;
	strlcpy(set_text(set), text, PCPU_STATS_LABEL_VALUE_MAX);
	s->has_text = true;
}

/* The postmaster's texts of .save's entries, recorded before shared
 * memory is made: handed to their sets then (shmem_startup()). */
typedef struct {
	pss_key key;
	int64 epoch;
	char *text;
} saved_text;

static HTAB *saved_texts;

static void text_save(const pss_key *key, int64 epoch, const char *text)
{
	saved_text *t;
	bool found;

	if (saved_texts == NULL) {
		HASHCTL ctl;

		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(pss_key);
		ctl.entrysize = sizeof(saved_text);
		ctl.hcxt = TopMemoryContext;
		saved_texts = hash_create(PSS_NAME " saved texts", 256, &ctl,
					  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	t = hash_search(saved_texts, key, HASH_ENTER, &found);
	if (found)
		pfree(t->text);
	t->epoch = epoch;
	t->text = MemoryContextStrdup(TopMemoryContext, text);
}

static void shmem_request(void)
{
	if (prev_shmem_request)
		prev_shmem_request();
	RequestAddinShmemSpace(shared_size());
	RequestNamedLWLockTranche(PSS_NAME, 1);
}

/* In the postmaster (at its start, and again after a crash), and in an
 * EXEC_BACKEND child: the shared state, made or attached. */
static void shmem_startup(void)
{
	static bool made_before;
	HASHCTL info;
	bool found;

	if (prev_shmem_startup)
		prev_shmem_startup();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shared = ShmemInitStruct(PSS_NAME " sets", shared_size(), &found);
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(pss_key);
	info.entrysize = sizeof(set_of_key);
	set_hash = ShmemInitHash(PSS_NAME " keys", pss_max_sets, pss_max_sets, &info,
				 HASH_ELEM | HASH_BLOBS);
	if (!found) {
		memset(shared, 0, offsetof(pss_shared_t, sets));
		shared->lock = &(GetNamedLWLockTranche(PSS_NAME))->lock;
		shared->gen = 1;
		shared->free_head = shared->free_tail = -1;
		shared->nslots = nslots();
		shared->slots = (pss_slot *)((char *)shared +
					     CACHELINEALIGN(offsetof(pss_shared_t, sets) +
							    (Size)pss_max_sets * sizeof(pss_set)));
		memset(shared->slots, 0, (Size)shared->nslots * sizeof(pss_slot));
		/* Not cleared: a set's text is read only once has_text says so. */
		shared->texts = (char *)shared->slots +
				MAXALIGN((Size)shared->nslots * sizeof(pss_slot));
		memset(shared->sets, 0, (Size)pss_max_sets * sizeof(pss_set));
		if (!IsUnderPostmaster) {
			HASH_SEQ_STATUS it;
			pss_entry *e;

			/* After a crash the postmaster's entries may name sets
			 * reused since: forgotten, so that no child inherits them. */
			if (made_before)
				pss_entry_purge(true);
			made_before = true;
			/* .save's entries (made before shared memory): sets. */
			hash_seq_init(&it, pss_local_entries());
			while ((e = (pss_entry *)hash_seq_search(&it)) != NULL) {
				set_of_key *m;

				if (e->stale)
					continue; /* its registration failed (entry_failed()) */
				if (shared->nsets >= pss_max_sets)
					continue; /* kept without a set: never reused */
				m = hash_search(set_hash, &e->key, HASH_ENTER, &found);
				m->set = e->set = shared->nsets++;
				e->gen = 0;
				shared->sets[e->set].key = e->key;
				shared->sets[e->set].labelled = 1;
				e->labelled = 1;
				shared->sets[e->set].state = SET_LIVE;
				if (saved_texts != NULL) {
					saved_text *t = hash_search(saved_texts, &e->key, HASH_FIND, NULL);

					if (t != NULL)
						text_keep(e->set, &e->key, t->epoch, t->text);
				}
			}
			if (saved_texts != NULL) {
				HASH_SEQ_STATUS ts;
				saved_text *t;

				hash_seq_init(&ts, saved_texts);
				while ((t = hash_seq_search(&ts)) != NULL)
					pfree(t->text);
				hash_destroy(saved_texts);
				saved_texts = NULL;
			}
		}
	}
	LWLockRelease(AddinShmemInitLock);
	pss_gen_word = &shared->gen;
}

/* A section left by an error (an ereport inside it) or by the process's
 * exit: its slot 0, so that it blocks no reuse while idle. */
static void section_abort(XactEvent event, void *arg)
{
	(void)arg;
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		pss_section_leave();
}

static void section_exit(int code, Datum arg)
{
	(void)code;
	(void)arg;
	pss_section_leave();
	pss_my_slot = NULL;
}

void pss_reuse_init(int max_sets)
{
	pss_max_sets = max_sets;
	prev_shmem_request = shmem_request_hook;
	shmem_request_hook = shmem_request;
	prev_shmem_startup = shmem_startup_hook;
	shmem_startup_hook = shmem_startup;
	RegisterXactCallback(section_abort, NULL);
}

/* This process's slot, at its first section: a backend's (with a PGPROC;
 * a parallel worker, which counts nothing, never enters one). Tried once. */
bool pss_slot_attach(void)
{
	static bool tried;

	if (tried || shared == NULL)
		return pss_my_slot != NULL;
	tried = true;
	if (MyProc == NULL || MyProc->pgprocno < 0 || MyProc->pgprocno >= shared->nslots)
		return false;
	pss_my_slot = &shared->slots[MyProc->pgprocno];
	pss_my_slot->gen = 0;
	pss_my_slot->pid = MyProcPid;
	pss_seen_gen = 0;
	before_shmem_exit(section_exit, (Datum)0);
	return true;
}

void pss_section_purge(uint64 gen)
{
	pss_entry_purge(false);
	pss_seen_gen = gen;
}

bool pss_set_retired_after(int set, uint64 gen)
{
	return shared != NULL && set < pss_max_sets && shared->sets[set].retired_gen > gen;
}

uint32 pss_set_labelling(int set)
{
	return shared != NULL && set >= 0 && set < pss_max_sets ? shared->sets[set].labelled : 0;
}

int pss_sets_live(pss_live_set *out, int max)
{
	int i, n = 0;

	if (shared == NULL)
		return 0;
	/* Shared: a registration holds the lock exclusive from the moment it
	 * makes a set LIVE under its key until its series are whole
	 * (pss_sets_take() .. pss_sets_done()), so every set listed here is
	 * whole. Only this process (the evictor) takes a LIVE set out. */
	LWLockAcquire(shared->lock, LW_SHARED);
	for (i = 0; i < shared->nsets && n < max; i++)
		if (shared->sets[i].state == SET_LIVE) {
			out[n].key = shared->sets[i].key;
			out[n].set = i;
			out[n++].labelled = shared->sets[i].labelled;
		}
	LWLockRelease(shared->lock);
	return n;
}

/* ---- taking a set (a process meeting a key) --------------------------------------------- */

/* The free list (the sets' lock held): oldest freed first, so that an
 * evicted statement met again soon finds its own set, still its key's. */
static void free_push(int set)
{
	pss_set *s = &shared->sets[set];

	s->state = SET_FREE;
	s->freed_gen = shared->gen;
	s->prev = -1;
	s->next = shared->free_head;
	if (shared->free_head >= 0)
		shared->sets[shared->free_head].prev = set;
	else
		shared->free_tail = set;
	shared->free_head = set;
	shared->nfree++;
}

static void free_unlink(int set)
{
	pss_set *s = &shared->sets[set];

	if (s->prev >= 0)
		shared->sets[s->prev].next = s->next;
	else
		shared->free_head = s->next;
	if (s->next >= 0)
		shared->sets[s->next].prev = s->prev;
	else
		shared->free_tail = s->prev;
	shared->nfree--;
}

/* Every family's series of the set from label values `from` to `to`, in
 * one pcpu_families_relabel() -- all or none --, calls last (the view lists
 * the new key once the rest is done). 0; -1 with errno, nothing moved
 * (EEXIST: `to` exists; ENOSPC: the directory's string table is full...).
 * One by one, 39 calls, each a record of the tree's relabel log, made the
 * other processes index the whole directory anew when a churn of
 * statements overflowed the log between two of their looks
 * (bench/postgresql.md, "Eviction churn: a statement's series relabelled
 * at once"). */
static int relabel_set(const char *const *from, const char *const *to)
{
	pcpu_family_t *fam[SERIES_PER_ENTRY];
	int n = 0, i;

	for (i = 0; i < NCOUNTERS; i++)
		if (i != C_CALLS)
			fam[n++] = pss_tree.counters[i];
	for (i = 0; i < NGAUGES; i++)
		fam[n++] = pss_tree.gauges[i];
	for (i = 0; i < NFRACTIONS; i++)
		fam[n++] = pss_tree.fractions[i];
	fam[n++] = pss_tree.exec_hist;
	fam[n++] = pss_tree.entry_resets;
	fam[n++] = pss_tree.entry_live;
	fam[n++] = pss_tree.counters[C_CALLS];
	return pcpu_families_relabel(fam, (size_t)n, from, to);
}

/* A new key counted (the sets' lock held exclusive): the free set freed
 * longest ago relabelled for it, unless a new set is to be made instead.
 * True with e->set taken off the free list; false: none given. */
static bool take_free(pss_entry *e)
{
	int set = shared->free_tail, r;
	char obuf[4][24], buf[4][24];
	const char *ov[6], *v[6];
	pss_set *s = &shared->sets[set];

	/* Freed within the last COLD_PASSES eviction passes (the oldest
	 * freed is, so all are), and room for a new set: a new one. The free
	 * set is likely to be its own key's again soon (an evicted statement
	 * met again), which then takes it back as it is, while a relabelling
	 * costs every process that holds or meets either key a registration.
	 * Relabelling the oldest free set first, always, made a churn of 3,000
	 * statements through a table of 1,000 relabel at most of its misses:
	 * 0.42x no module's TPS, against 0.70-0.76x so (bench/postgresql.md,
	 * "Eviction churn: the evictor without the tree"). */
	if (shared->nsets < pss_max_sets && shared->gen - s->freed_gen < COLD_PASSES)
		return false;
	pss_key_values(&s->key, obuf, ov);
	pss_key_values(&e->key, buf, v);
	r = relabel_set(ov, v);
	if (r < 0 && (errno != EEXIST || shared->nsets < pss_max_sets)) {
		/* Nothing moved: the set stays free. EEXIST: the key's series
		 * exist without a set, taken as a new set by the caller; else
		 * the directory cannot take the new labels (ENOSPC). */
		if (errno != EEXIST)
			pss_refused("an entry's series: a free one could not be relabelled");
		return false;
	}
	/* Relabelled; or (EEXIST, no new set can be made) the key's series
	 * exist without a set (made before a crash restart): they take this
	 * free set's number, its own series left to its old key without a
	 * set (as a crash restart leaves the forgotten sets' series: at most
	 * max_keys sets' per crash). Refused before: a statement of before
	 * the crash met once the sets were all made. */
	free_unlink(set);
	(void)hash_search(set_hash, &s->key, HASH_REMOVE, NULL);
	e->set = set;
	return true;
}

bool pss_sets_take(pss_entry *e, pss_get_mode mode)
{
	set_of_key *m;
	pss_set *s;
	bool found;

	if (shared == NULL)
		return true; /* the postmaster's .save: taken at shmem_startup() */
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	m = hash_search(set_hash, &e->key, HASH_FIND, NULL);
	if (m != NULL) {
		s = &shared->sets[m->set];
		if (s->state != SET_LIVE) {
			/* Evicted: retired (the reclaim looks at the state
			 * under this lock), or free and still the key's. A
			 * reset or the evictor leaves it: out of the table
			 * already, and a retired one may have been retired
			 * before this section began (reclaimed any time). */
			if (mode != PSS_COUNT) {
				LWLockRelease(shared->lock);
				return false;
			}
			/* Counted again: the key's own set, back in the
			 * table at its first count (pss_entry_check()). */
			if (s->state == SET_RETIRED)
				shared->nretired--;
			else
				free_unlink(m->set);
			s->state = SET_LIVE;
		}
		e->set = m->set;
		return true;
	}
	if (mode == PSS_FIND) {
		LWLockRelease(shared->lock);
		return false;
	}
	if (mode == PSS_COUNT && shared->free_tail >= 0 && take_free(e))
		goto take;
	if (shared->nsets < pss_max_sets) {
		e->set = shared->nsets++;
		goto take;
	}
	if (mode == PSS_ADOPT)
		return true; /* its series as they are, without a set */
	LWLockRelease(shared->lock);
	pss_refused("an entry's series: none is free (the evictor is behind, or stopped)");
	return false;
take:
	m = hash_search(set_hash, &e->key, HASH_ENTER, &found);
	m->set = e->set;
	s = &shared->sets[e->set];
	s->key = e->key;
	s->labelled++;
	s->state = SET_LIVE;
	return true;
}

void pss_sets_done(const pss_entry *e)
{
	if (shared == NULL)
		return;
	if (e != NULL && e->set >= 0) {
		pss_set *s = &shared->sets[e->set];

		/* A free set taken without a text of its new key (none given,
		 * or refused): its text series is left to the key it had --
		 * which, met again, takes another set, whose text must not be
		 * this one (relabelled later for the key of this set). */
		if (s->has_text && !same_key(&s->text_key, &s->key))
			s->has_text = false;
	}
	LWLockRelease(shared->lock);
}

/* The new text series v of e's key, epoch `epoch`: the text series of e's
 * set relabelled to it, or made; false (errno) when refused. */
bool pss_sets_text(const pss_entry *e, int64 epoch, const char *const v[6])
{
	pcpu_family_t *fam;
	pss_set *s;
	bool locked, ok = true;
	int r;

	if (shared == NULL) {
		/* The postmaster's .save, before shared memory: its set gets
		 * the text when it is made. */
		if (pss_text_info(pss_tree.reg, v) != 0 && errno != EEXIST)
			return false;
		text_save(&e->key, epoch, v[5]);
		return true;
	}
	if (e->set < 0) /* no set: a text of its own, never reused */
		return pss_text_info(pss_tree.reg, v) == 0 || errno == EEXIST;
	/* Held where pss_entry_get() registers a new entry. */
	locked = LWLockHeldByMe(shared->lock);
	if (!locked)
		LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	s = &shared->sets[e->set];
	fam = pcpu_registry_find(pss_tree.reg, QUERY_INFO);
	if (!same_key(&s->key, &e->key)) {
		/* Never seen (a section holds its set's key); to be safe, a
		 * text of its own. */
		ok = pss_text_info(pss_tree.reg, v) == 0 || errno == EEXIST;
	} else if (s->has_text && same_key(&s->text_key, &e->key) && s->text_epoch >= epoch) {
		/* This epoch's text is recorded: the first one is kept, as
		 * pg_stat_statements keeps the first text it met. */
	} else if (s->has_text) {
		char buf[4][24];
		const char *ov[6];

		/* The evicted key's text, or this key's of an older epoch: the
		 * same directory entry, its labels replaced at once for every
		 * reader (old or new, never mixed). */
		pss_key_values(&s->text_key, buf, ov);
		snprintf(buf[3], sizeof(buf[3]), INT64_FORMAT, s->text_epoch);
		ov[4] = buf[3];
		ov[5] = set_text(e->set);
		/* A process that has made no text has no such family yet: the
		 * set's text series taken (as another process made it) makes
		 * it, as pcpu_registry_info() alone makes an info family. */
		if (fam == NULL && (pss_text_info(pss_tree.reg, ov) == 0 || errno == EEXIST))
			fam = pcpu_registry_find(pss_tree.reg, QUERY_INFO);
		r = fam != NULL ? pcpu_family_relabel(fam, ov, v) : -1;
		if (r == 0 || errno == EEXIST) {
			/* EEXIST: v exists with no set (made before a crash
			 * restart forgot the sets, or left by a set taken
			 * without a text): the set's now; the old one stays. */
			text_keep(e->set, &e->key, epoch, v[5]);
		} else if (errno == ENOENT) {
			/* Never seen: made anew. */
			ok = pss_text_info(pss_tree.reg, v) == 0 || errno == EEXIST;
			if (ok)
				text_keep(e->set, &e->key, epoch, v[5]);
			else
				s->has_text = false;
		} else {
			ok = false; /* ENOSPC: the string table is full */
		}
	} else {
		ok = pss_text_info(pss_tree.reg, v) == 0 || errno == EEXIST;
		if (ok)
			text_keep(e->set, &e->key, epoch, v[5]);
	}
	if (!locked)
		LWLockRelease(shared->lock);
	return ok;
}

/* ---- retiring and reclaiming (the evictor) ---------------------------------------------- */

static void sets_publish(void);

void pss_sets_retire(pss_entry **victims, int n)
{
	uint64 next;
	int i, k = 0;

	if (shared == NULL || n == 0)
		return;
	if (!shared->reuse) {
		static bool tried;

		if (!tried) {
			int cmds = (int)syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);

			tried = true;
			shared->reuse = cmds > 0 && (cmds & MEMBARRIER_CMD_GLOBAL) != 0;
			if (!shared->reuse)
				ereport(LOG, (errmsg(PSS_NAME ": membarrier(MEMBARRIER_CMD_GLOBAL) is "
						     "not available: evicted entries' series are "
						     "not reused")));
		}
		if (!shared->reuse)
			return;
	}
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	next = shared->gen + 1;
	for (i = 0; i < n; i++) {
		pss_set *s;

		if (victims[i]->set < 0)
			continue;
		s = &shared->sets[victims[i]->set];
		if (s->state != SET_LIVE)
			continue;
		s->state = SET_RETIRED;
		s->retired_gen = next;
		shared->nretired++;
		k++;
	}
	if (k > 0)
		__atomic_store_n(&shared->gen, next, __ATOMIC_RELEASE);
	LWLockRelease(shared->lock);
	sets_publish();
	/* Every CPU through a full barrier: a backend's slot store is seen
	 * by the reads of pss_sets_reclaim() from now on, or its following
	 * load of the generation sees `next`. */
	if (k > 0 && syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) != 0) {
		/* Never seen after the query said yes; to be safe, reuse
		 * stops (the retired sets stay their keys'). */
		shared->reuse = false;
		ereport(LOG, (errmsg(PSS_NAME ": membarrier() failed: %m; evicted entries' series "
				     "are no longer reused")));
	}
}

/* The oldest generation a counting section holds (UINT64_MAX: none). */
static uint64 oldest_section(void)
{
	uint64 oldest = PG_UINT64_MAX;
	int i;

	for (i = 0; i < shared->nslots; i++) {
		uint64 g = __atomic_load_n(&shared->slots[i].gen, __ATOMIC_ACQUIRE);
		int32 pid = shared->slots[i].pid;

		if (g == 0 || g >= oldest)
			continue;
		/* A process gone without its exit callbacks holds nothing. */
		if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH)
			continue;
		oldest = g;
	}
	return oldest;
}

/* The sets' counts in the tree's gauges (pcpu_stat_statements_sets*). */
static void sets_publish(void)
{
	__atomic_store_n(pss_tree.sets_made, __atomic_load_n(&shared->nsets, __ATOMIC_RELAXED),
			 __ATOMIC_RELAXED);
	__atomic_store_n(pss_tree.sets_retired,
			 __atomic_load_n(&shared->nretired, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
	__atomic_store_n(pss_tree.sets_free, __atomic_load_n(&shared->nfree, __ATOMIC_RELAXED),
			 __ATOMIC_RELAXED);
}

void pss_sets_reclaim(void)
{
	uint64 oldest;
	int i;

	if (shared == NULL)
		return;
	sets_publish();
	if (!shared->reuse || __atomic_load_n(&shared->nretired, __ATOMIC_RELAXED) == 0)
		return;
	oldest = oldest_section();
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (i = 0; i < shared->nsets; i++) {
		pss_set *s = &shared->sets[i];

		if (s->state != SET_RETIRED || s->retired_gen > oldest)
			continue;
		/* No section can hold it: free, its series still its key's
		 * (met again, the key takes it back as it is; a new key
		 * relabels it, pss_sets_take()). This process's handles are
		 * stale now: a relabelling by another process would make its
		 * next registration drop their series objects under them, so
		 * they are used again only after the key takes this set back
		 * unrelabelled (pss_entry_get()). */
		pss_entry_stale(&s->key);
		shared->nretired--;
		free_push(i);
	}
	LWLockRelease(shared->lock);
	sets_publish();
}
