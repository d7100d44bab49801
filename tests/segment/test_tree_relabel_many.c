/*
 * pcpu_families_relabel() in a shared registry (PCPU_SEGMENT_SHARED_TREE):
 * one key's series in several families relabelled at once -- all or none
 * --, followed by the tree's other processes from the relabel log.
 *
 *   churn     two forked workers share a table of SETS keys (a server's
 *             table of statements): each, RELABELS times, meets a random
 *             key of KEYS; a key without a set takes a random set,
 *             relabelling its NFAMS series from the set's key to its own
 *             in one call, and every key met gets one add in each family.
 *             Each worker keeps its handles of the keys it met (as a
 *             server keeps stale entries), so it must follow every other
 *             relabelling. Then: every relabelling succeeded, each set's
 *             series hold in every family the adds since its key took
 *             it (no lost, none counted into the wrong key), the reader
 *             shows each family's SETS series once, and each worker
 *             followed the log without ever walking its series;
 *             then worker 1 holds every set's series and looks away while
 *             worker 0 relabels PAUSED times; worker 1's next look
 *             follows them all from the log (a set's series are adjacent
 *             entries: a record or a few per relabelling; one record per
 *             entry, 12,000 would overflow the log's 8,192 slots)
 *   oldlog    the same in a tree whose log holds no runs (as a library
 *             before them made it: its writers, which may join the tree,
 *             read a slot as an entry): each entry a slot, and the paused
 *             worker's look walks its series (the log overflowed) with
 *             the same results
 *   atomic    a relabelling that cannot be done whole moves nothing: the
 *             new key existing in one family (EEXIST, the others keep
 *             their old labels) and a string table with room for some of
 *             the new label values but not all (ENOSPC), fresh room or
 *             freed blobs counted once each; then the argument errors
 *             (EINVAL)
 *
 * Run with PCPU_INDEX=cpu (ctest does).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pcpu/reader.h>
#include <pcpu/segment.h>
#include <pcpu/stats.h>

#include "check.h"
#include "tree_child.h"
#include "segment/writer.h"

#define NFAMS 12
#define SETS 64
#define KEYS 200
#define RELABELS 1500
#define PAUSED 1000

static char dir[256];
static pcpu_registry_t *reg;
static pcpu_segment_t *seg;
static pcpu_family_t *fams[NFAMS];

/* The table both workers share (MAP_SHARED before the forks). */
struct table {
	pthread_mutex_t lock;
	int key_of_set[SETS];   /* -1: not made yet */
	int set_of_key[KEYS + PAUSED + 2]; /* -1: none */
	uint64_t adds[SETS];    /* adds into the set's series since its key took it */
	uint64_t relabels, refused;
	int holding, relabelled; /* the pause phase's steps */
};

static struct table *tab;
static int tab_oldlog; /* the churn's tree without runs in its log */

static void publish(size_t max_string_bytes)
{
	static const char *const ln[1] = {"id"};
	struct pcpu_family_desc d;
	char name[32];
	int i;

	strcpy(dir, "/tmp/pcpu-relabel-many.XXXXXX");
	seg = publish_requests_tree(dir, max_string_bytes, &reg, &fams[0]);
	memset(&d, 0, sizeof d);
	d.type = PCPU_METRIC_COUNTER;
	d.nlabels = 1;
	d.label_names = ln;
	d.name = name;
	for (i = 1; i < NFAMS; i++) {
		snprintf(name, sizeof name, "f%d", i);
		fams[i] = pcpu_registry_family(reg, &d);
		CHECK(fams[i]);
	}
}

static void key_name(int k, char *buf, size_t n)
{
	snprintf(buf, n, "key-%d", k);
}

static pcpu_counter_t series(int f, int k)
{
	char id[32];

	key_name(k, id, sizeof id);
	return tree_series(fams[f], id);
}

static int relabel_key(int from, int to)
{
	char a[32], b[32];
	const char *o[1] = {a}, *n[1] = {b};

	key_name(from, a, sizeof a);
	key_name(to, b, sizeof b);
	return pcpu_families_relabel(fams, NFAMS, o, n);
}

/* Then worker 1 holds every set's series and looks away while worker 0
 * relabels PAUSED sets' keys (12 entries each: more than the log's 8,192
 * slots one entry a record, not as runs); worker 1's next look follows
 * them from the log, without walking its series. */
static void pause_phase(int who)
{
	struct pcpu_segment *s = (struct pcpu_segment *)seg;
	int i, f, next = KEYS;

	if (who == 1) {
		uint64_t walks0, lists0;

		CHECK(pthread_mutex_lock(&tab->lock) == 0);
		for (i = 0; i < SETS; i++)
			for (f = 0; f < NFAMS && tab->key_of_set[i] >= 0; f++)
				CHECK(series(f, tab->key_of_set[i]));
		CHECK(pthread_mutex_unlock(&tab->lock) == 0);
		__atomic_store_n(&tab->holding, 1, __ATOMIC_RELEASE);
		while (!__atomic_load_n(&tab->relabelled, __ATOMIC_ACQUIRE))
			usleep(1000);
		walks0 = s->tree_reg_walks;
		lists0 = s->tree_reg_lists;
		CHECK(series(0, tab->key_of_set[0])); /* a lookup: it looks */
		/* One entry a slot (oldlog), 12,000 overflow the ring: the
		 * look walks its series instead, and is right all the same
		 * (the master's checks). */
		if (s->tree_reg_lists != lists0 + !tab_oldlog || s->tree_reg_walks != walks0 + 1)
			fprintf(stderr, "after %d relabellings: %" PRIu64 " lists, %" PRIu64
					" looks (want %d, 1)\n", PAUSED, s->tree_reg_lists - lists0,
				s->tree_reg_walks - walks0, !tab_oldlog);
		CHECK(s->tree_reg_lists == lists0 + !tab_oldlog && s->tree_reg_walks == walks0 + 1);
		return;
	}
	while (!__atomic_load_n(&tab->holding, __ATOMIC_ACQUIRE))
		usleep(1000);
	CHECK(pthread_mutex_lock(&tab->lock) == 0);
	for (i = 0; i < PAUSED; i++) {
		int set = i % SETS, k = next++;

		if (tab->key_of_set[set] < 0)
			continue;
		if (relabel_key(tab->key_of_set[set], k) != 0) {
			fprintf(stderr, "relabel: %s\n", pcpu_stats_error());
			CHECK(0);
		}
		tab->set_of_key[tab->key_of_set[set]] = -1;
		tab->key_of_set[set] = k;
		tab->adds[set] = 0;
	}
	CHECK(pthread_mutex_unlock(&tab->lock) == 0);
	__atomic_store_n(&tab->relabelled, 1, __ATOMIC_RELEASE);
}

static void worker(int who, unsigned seed)
{
	struct pcpu_segment *s = (struct pcpu_segment *)seg;
	uint64_t walks0 = s->tree_reg_walks, lists0 = s->tree_reg_lists, walks;
	int i, f;

	alarm(120);
	for (i = 0; i < RELABELS; i++) {
		int k = (int)(rand_r(&seed) % KEYS), set;

		CHECK(pthread_mutex_lock(&tab->lock) == 0);
		set = tab->set_of_key[k];
		if (set < 0) {
			set = (int)(rand_r(&seed) % SETS);
			if (tab->key_of_set[set] < 0) {
				/* A new set: its series made. */
				for (f = 0; f < NFAMS; f++)
					CHECK(series(f, k));
			} else if (relabel_key(tab->key_of_set[set], k) != 0) {
				fprintf(stderr, "relabel key-%d -> key-%d: %s\n", tab->key_of_set[set], k,
					pcpu_stats_error());
				tab->refused++;
				CHECK(pthread_mutex_unlock(&tab->lock) == 0);
				continue;
			} else {
				tab->set_of_key[tab->key_of_set[set]] = -1;
				tab->relabels++;
			}
			tab->key_of_set[set] = k;
			tab->set_of_key[k] = set;
			tab->adds[set] = 0;
		}
		/* The key's series: this process's own, adopted, or made. */
		for (f = 0; f < NFAMS; f++)
			pcpu_counter_add(series(f, k), 1);
		tab->adds[set]++;
		CHECK(pthread_mutex_unlock(&tab->lock) == 0);
	}
	/* Followed from the log: never a walk of its series (a look that
	 * ends in SEEN and did not LIST) -- RELABELS runs of 2 slots never
	 * fill the ring, whatever the other worker did between two looks.
	 * One slot per entry (oldlog), a worker descheduled over 683 of the
	 * other's relabellings walks. */
	walks = (s->tree_reg_walks - walks0) - (s->tree_reg_lists - lists0);
	if (walks != 0 && !tab_oldlog)
		fprintf(stderr, "worker %d: %" PRIu64 " walks of its series (want 0)\n", who, walks);
	CHECK(walks == 0 || tab_oldlog);
	pause_phase(who);
	_exit(0);
}

static void churn(int oldlog)
{
	pthread_mutexattr_t a;
	struct pcpu_reader_snapshot *r;
	pid_t w[2];
	int i, k, f;

	publish(0);
	if (oldlog) {
		/* The tree as a library before runs made it: a record per
		 * entry, which its writers (joining the tree) read. */
		struct pcpu_segment *sg = (struct pcpu_segment *)seg;

		CHECK(sg->tree->relog_cap & PCPU__SEG_TREE_RELOG_RUNS);
		sg->tree->relog_cap &= ~PCPU__SEG_TREE_RELOG_RUNS;
		tab_oldlog = 1;
	}
	tab = mmap(NULL, sizeof *tab, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(tab != MAP_FAILED);
	CHECK(pthread_mutexattr_init(&a) == 0);
	CHECK(pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED) == 0);
	CHECK(pthread_mutex_init(&tab->lock, &a) == 0);
	for (i = 0; i < SETS; i++)
		tab->key_of_set[i] = -1;
	for (k = 0; k < KEYS + PAUSED + 2; k++)
		tab->set_of_key[k] = -1;
	for (i = 0; i < 2; i++) {
		w[i] = fork();
		CHECK(w[i] >= 0);
		if (w[i] == 0)
			worker(i, 12345u + (unsigned)i);
	}
	wait_ok(w[0]);
	wait_ok(w[1]);
	fprintf(stderr, "churn: %" PRIu64 " relabellings of %d families, %" PRIu64 " refused\n",
		tab->relabels, NFAMS, tab->refused);
	CHECK(tab->refused == 0 && tab->relabels > RELABELS / 2);
	/* Every set's series hold its key's adds, in every family. */
	for (i = 0; i < SETS; i++) {
		if (tab->key_of_set[i] < 0)
			continue;
		for (f = 0; f < NFAMS; f++) {
			uint64_t got = pcpu_counter_fetch(series(f, tab->key_of_set[i]));

			if (got != tab->adds[i])
				fprintf(stderr, "set %d, key-%d, family %d: %" PRIu64 ", want %" PRIu64 "\n", i,
					tab->key_of_set[i], f, got, tab->adds[i]);
			CHECK_EQ_U64(got, tab->adds[i]);
		}
	}
	/* The reader: each family's series, each key once. */
	r = read_tree_segment(dir);
	for (i = 0; i < (int)r->snapshot.nfamilies; i++) {
		const struct pcpu_snapshot_family *fm = &r->snapshot.families[i];
		int made = 0;

		for (k = 0; k < SETS; k++)
			made += tab->key_of_set[k] >= 0;
		if (fm->nseries != (size_t)made)
			fprintf(stderr, "reader: family %s has %zu series, want %d\n", fm->name, fm->nseries,
				made);
		CHECK(fm->nseries == (size_t)made);
	}
	pcpu_reader_snapshot_free(r);
	remove_tree(seg, reg, dir);
}

/* Whether family f has a series with label value id (this process's or the
 * tree's, adopted). */
static int has(int f, const char *id)
{
	const char *v[1] = {id};

	return pcpu_family_lookup(fams[f], v) != NULL;
}

/* Registers series of 150-byte label values (256-byte blobs), round the
 * families, until fewer than `room` bytes of the string table are left;
 * how many it made. */
static int fill(uint64_t room)
{
	struct pcpu_segment *sg = (struct pcpu_segment *)seg;
	int made;

	for (made = 0; sg->strings_cap - sg->strings_used >= room; made++) {
		char id[200];
		const char *v[1] = {id};

		memset(id, 0, sizeof id);
		snprintf(id, sizeof id, "%0150d", made);
		CHECK(pcpu_family_counter(fams[made % NFAMS], v));
	}
	return made;
}

static void atomic(void)
{
	const char *o[1] = {"a"}, *n[1] = {"b"};
	pcpu_family_t *twice[2];
	char big[2][200];
	const char *bo[1] = {big[0]}, *bn[1] = {big[1]};
	int f, made;

	publish(0);
	for (f = 0; f < NFAMS; f++)
		CHECK(tree_series(fams[f], "a"));
	/* "b" exists in one family: nothing moves. */
	CHECK(tree_series(fams[7], "b"));
	errno = 0;
	CHECK(pcpu_families_relabel(fams, NFAMS, o, n) == -1 && errno == EEXIST);
	CHECK(strstr(pcpu_stats_error(), "f7") != NULL); /* the family named */
	for (f = 0; f < NFAMS; f++)
		CHECK(has(f, "a"));
	for (f = 0; f < NFAMS; f++)
		CHECK(has(f, "b") == (f == 7));
	/* The argument errors. */
	twice[0] = twice[1] = fams[2];
	errno = 0;
	CHECK(pcpu_families_relabel(twice, 2, o, n) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(pcpu_families_relabel(fams, 0, o, n) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(pcpu_families_relabel(NULL, 1, o, n) == -1 && errno == EINVAL);
	remove_tree(seg, reg, dir);

	/* A string table with room for some new values, not all: nothing
	 * moves (ENOSPC), where one by one the first families would have. */
	publish(24 * 1024);
	memset(big, 0, sizeof big);
	memset(big[0], 'o', 150);
	memset(big[1], 'n', 150);
	for (f = 0; f < NFAMS; f++)
		CHECK(tree_series(fams[f], big[0]));
	/* Fill the strings until fewer than NFAMS more 256-byte blobs fit,
	 * but some do: one by one, the first families would move. */
	made = fill(NFAMS * 256);
	CHECK(((struct pcpu_segment *)seg)->strings_cap - ((struct pcpu_segment *)seg)->strings_used >= 256);
	errno = 0;
	CHECK(pcpu_families_relabel(fams, NFAMS, bo, bn) == -1 && errno == ENOSPC);
	for (f = 0; f < NFAMS; f++)
		CHECK(has(f, big[0]) && !has(f, big[1]));
	remove_tree(seg, reg, dir);

	/* The same with freed blobs: room for about 3 new 256-byte blobs,
	 * then 3 long values relabelled short free 3 of that size -- 6 or so
	 * in all, not NFAMS: each freed blob is counted on once. */
	publish(24 * 1024);
	for (f = 0; f < NFAMS; f++)
		CHECK(tree_series(fams[f], big[0]));
	made = fill(4 * 256);
	for (f = 0; f < 3; f++) {
		char id[200], to[16];
		const char *o[1] = {id}, *n[1] = {to};

		memset(id, 0, sizeof id);
		snprintf(id, sizeof id, "%0150d", made - 1 - f);
		snprintf(to, sizeof to, "s%d", f);
		CHECK(pcpu_family_relabel(fams[(made - 1 - f) % NFAMS], o, n) == 0);
	}
	CHECK(((struct pcpu_segment *)seg)->tree->free_blobs[2] != 0); /* 256 bytes' class */
	errno = 0;
	CHECK(pcpu_families_relabel(fams, NFAMS, bo, bn) == -1 && errno == ENOSPC);
	for (f = 0; f < NFAMS; f++)
		CHECK(has(f, big[0]) && !has(f, big[1]));
	remove_tree(seg, reg, dir);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s churn|oldlog|atomic\n", argv[0]);
		return 2;
	}
	if (!strcmp(argv[1], "churn"))
		churn(0);
	else if (!strcmp(argv[1], "oldlog"))
		churn(1);
	else if (!strcmp(argv[1], "atomic"))
		atomic();
	else
		return 2;
	printf("ok %s\n", argv[1]);
	return 0;
}
