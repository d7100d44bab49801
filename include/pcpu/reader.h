/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/reader.h
 * Reading another process's statistics: list the statistics segments on the
 * machine, open one by name or pid, and take snapshots of it (values summed
 * over the per-CPU copies, and per copy on request). pcpu/segment.h is the
 * writing side; docs/segment-format.md the format.
 *
 *     pcpu_reader_t *r = pcpu_reader_open("myapp", NULL);
 *     struct pcpu_reader_snapshot *s;
 *     if (!r || pcpu_reader_snapshot(r, 0, &s) < 0)
 *         errx(1, "%s", pcpu_reader_error());
 *     // s->snapshot is an ordinary struct pcpu_snapshot (pcpu/expose.h):
 *     pcpu_snapshot_write(&s->snapshot, PCPU_FORMAT_PROMETHEUS, &text, &len);
 *     pcpu_reader_snapshot_free(s);
 *     pcpu_reader_close(r);
 *
 * Trust: a segment is input from another process, possibly hostile. The
 * reader never maps it: it copies what it needs with pread(2) -- so a file
 * truncated under it yields an error, not SIGBUS -- and validates the copy:
 * every offset, length, count and string is checked against the file's size
 * and the format's limits with overflow-safe arithmetic, names and labels
 * against the Prometheus rules. Memory and bytes read per snapshot are
 * bounded (max_bytes). A truncated, corrupted or hostile segment yields -1,
 * an errno and a message; never a crash, a hang or an out-of-bounds read.
 * Files are opened with O_PATH|O_NOFOLLOW and must be regular files owned
 * by the expected user before they are opened for reading (a device or a
 * FIFO planted under a segment's name is never opened).
 *
 * What a snapshot guarantees: every series in it is consistent -- its name,
 * labels and value belong together, even while the writer adds and removes
 * series (a series being added or removed during the read is left out and
 * counted in `changed`). Values are read as pcpu_counter_fetch() reads them:
 * each per-CPU copy once, not a point-in-time snapshot; a counter only ever
 * added to never decreases between snapshots.
 *
 * Errors (errno), with pcpu_reader_error() giving the details:
 *  - ENOENT: no such segment;  ENOTUNIQ: the name matches several live
 *    segments (give a pid);
 *  - EACCES: permission denied;  EPERM: owned by another user than
 *    expected, or not a regular file;  ELOOP: a symlink;
 *  - EPROTONOSUPPORT: written by an incompatible version of pcpu;
 *  - EBADMSG: not a segment, truncated or corrupted;
 *  - ESRCH: the writer is gone (exited, or its pid was reused) -- the last
 *    values can still be read with PCPU_READER_ALLOW_STALE (a writer whose
 *    state cannot be told, PCPU_SEGMENT_UNKNOWN, is read as if live);
 *  - EAGAIN: the segment is still being created; or (a snapshot on a
 *    32-bit target) a value's 64-bit word kept changing between the
 *    copies of its two halves -- a value that may be torn is never
 *    returned (src/core/core.h, "torn copies");
 *  - EFBIG: reading it would exceed max_bytes;  ENOMEM.
 */
#ifndef PCPU_READER_H
#define PCPU_READER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <pcpu/defs.h>
#include <pcpu/expose.h>
#include <pcpu/segment_dir.h>

PCPU_BEGIN_DECLS

typedef struct pcpu_reader pcpu_reader_t;

/** Flags of struct pcpu_reader_options. */
enum {
	/** Expect the owner given in `owner` instead of the caller's
	 * effective uid (a segment shared with the caller's group). */
	PCPU_READER_OWNER = 1u << 0,
	/** Accept any owner, provided it is the user the writer process runs
	 * as (for root, or an exporter reading every user's segments). */
	PCPU_READER_ANY_OWNER = 1u << 1,
	/** Snapshot a segment whose writer is gone or closed it (its last
	 * values) instead of failing with ESRCH. */
	PCPU_READER_ALLOW_STALE = 1u << 2,
};

/** Options of the open and list functions; all-zero or NULL: defaults. */
struct pcpu_reader_options {
	/** Segment directory; NULL: $PCPU_SEGMENT_DIR (ignored in set-user-ID
	 * programs), else the per-user directories in /dev/shm (see
	 * pcpu_segment_list()). */
	const char *dir;
	/** PCPU_READER_* flags. */
	unsigned flags;
	/** With PCPU_READER_OWNER: the expected owner. */
	uid_t owner;
	/** Most bytes one snapshot may read and allocate; 0: 4 GiB (where
	 * size_t is 32 bits: SIZE_MAX, 4 GiB - 1). Every system call a
	 * snapshot makes on the values (pread, lseek) counts as 4 KiB, so a
	 * snapshot's cost is bounded by max_bytes whatever the file's
	 * apparent size or holes. */
	size_t max_bytes;
};

/**
 * State of a segment's writer. GONE is decided only on positive evidence
 * (the kernel says there is no such process, or the process with that pid
 * started at another time, or is a zombie); when the check itself fails
 * the state is UNKNOWN, which nothing treats as gone: pruning and
 * publishers never remove such a segment, and it can be read.
 */
enum pcpu_segment_state {
	PCPU_SEGMENT_LIVE = 1,    /**< the writer runs and publishes */
	PCPU_SEGMENT_CLOSED = 2,  /**< the writer unpublished it (file removed) */
	PCPU_SEGMENT_GONE = 3,    /**< the writer died without unpublishing */
	/** Cannot tell: reading /proc/PID/stat failed (EMFILE, ENFILE, ENOMEM,
	 * EACCES...), or the writer is in another pid namespace (its pid names
	 * another process here). pcpu_reader_error() / `state_errno` say why. */
	PCPU_SEGMENT_UNKNOWN = 4,
};

/** Flags of struct pcpu_segment_info. */
enum {
	/** The writer's directory was full: some series are missing. */
	PCPU_SEGMENT_INFO_INCOMPLETE = 1u << 0,
	/** The writer's file system ran out of space (or memory): series were
	 * refused or left out (see pcpu/segment.h). */
	PCPU_SEGMENT_INFO_NOSPACE = 1u << 1,
};

/** One segment found by pcpu_segment_list(). */
struct pcpu_segment_info {
	char name[65];          /**< segment name */
	char file[96];          /**< file name inside its directory (open it
				     by this name with pcpu_reader_open()) */
	pid_t pid;              /**< writer's pid */
	uid_t owner;            /**< owner of the file */
	/** 0 when the segment could be read, else the errno a open would
	 * fail with (EACCES, EPERM, EBADMSG, EPROTONOSUPPORT, EAGAIN...);
	 * the fields below are then 0. */
	int error;
	enum pcpu_segment_state state; /**< writer state */
	uint64_t nfamilies;     /**< families at the time of listing */
	uint64_t nseries;       /**< series at the time of listing */
	uint64_t created_ns;    /**< publication time, ns since the Epoch */
	unsigned nslots;        /**< per-CPU copies of every value */
	/** With state PCPU_SEGMENT_UNKNOWN: why (an errno; EXDEV: another
	 * pid namespace). */
	int state_errno;
	unsigned flags;         /**< PCPU_SEGMENT_INFO_* */
};

/**
 * Lists the segments (files named pcpu.<pid>.<name>), sorted by name and
 * pid, readable or not (`error` says why not). Where: the directory `dir`
 * (or $PCPU_SEGMENT_DIR) if given; else the per-user directories
 * /dev/shm/pcpu-<uid> (and /dev/shm/pcpu-<uid>.<random>, made when someone
 * else took the first name) of the expected owner -- of every user with
 * PCPU_READER_ANY_OWNER. Only per-user directories owned by their user and
 * writable by no one else are read. A directory named by the caller must be
 * owned by the caller, root or the expected owner (anyone, with
 * PCPU_READER_ANY_OWNER: a group member reads the folder a server made) and,
 * if others may write to it, have the sticky bit.
 * On success *out is an array of *count entries (free() it; NULL when 0).
 * Returns 0, or -1 with errno: EPERM (unsafe directory), ENOENT, EACCES,
 * ENOMEM. Thread-safe; not async-signal-safe.
 * Cost: opening each file and reading its header; a regular file shorter
 * than a header is EBADMSG from the directory scan's lstat alone (empty
 * files named like segments cost one system call each).
 */
PCPU_API int pcpu_segment_list(const struct pcpu_reader_options *opts,
			       struct pcpu_segment_info **out, size_t *count);

/**
 * Opens a segment: `target` is a name (the one live segment of that name;
 * ENOTUNIQ if several processes publish it), a pid (all digits: the segment
 * that process published, ENOTUNIQ if it published several), a file name
 * "pcpu.PID.NAME", or a path containing '/'.
 * Checks the file (regular, not a symlink, expected owner) and its header
 * (magic, version, sizes); a gone writer is only detected at snapshot time.
 * A segment still being created (file systems without O_TMPFILE) is waited
 * for, 100 ms at most, then EAGAIN.
 * Returns the reader, or NULL with errno (see the file comment).
 * Thread-safe; not async-signal-safe. Cost: a directory scan for a name or
 * pid, an open, a pread of the header.
 */
PCPU_API pcpu_reader_t *pcpu_reader_open(const char *target, const struct pcpu_reader_options *opts);

/**
 * Opens a segment from a file descriptor (duplicated; the caller keeps
 * `fd`). Same checks as pcpu_reader_open() but the name-pid match.
 * Thread-safe; not async-signal-safe. Cost: a dup, an fstat, a pread of the
 * header, and a read of /proc/<pid> with PCPU_READER_ANY_OWNER.
 */
PCPU_API pcpu_reader_t *pcpu_reader_open_fd(int fd, const struct pcpu_reader_options *opts);

/** Closes a reader (its descriptor; snapshots taken from it stay valid).
 * NULL is a no-op. Not thread-safe with other calls on the same reader
 * (not to be called while another thread uses it); not async-signal-safe.
 * Cost: a close and a free. */
PCPU_API void pcpu_reader_close(pcpu_reader_t *r);

/* The accessors below read what the header said at open. */

/** Segment name (never NULL; "" for a NULL reader). Thread-safe;
 * async-signal-safe. Cost: a load. */
PCPU_API const char *pcpu_reader_name(const pcpu_reader_t *r);

/** Writer's pid, as the header says (0 for a NULL reader). Thread-safe;
 * async-signal-safe. Cost: a load. */
PCPU_API pid_t pcpu_reader_pid(const pcpu_reader_t *r);

/** Number of per-CPU copies of every value: the CPU slots, then the
 * owned slots (pcpu_reader_owned_slots()); 0 for a NULL reader.
 * Thread-safe; async-signal-safe. Cost: a load. */
PCPU_API unsigned pcpu_reader_nslots(const pcpu_reader_t *r);

/** How many of the pcpu_reader_nslots() slots are owned slots of pinned
 * workers (pcpu/worker.h): the last ones, nslots - owned to nslots - 1,
 * owned slot 0 first; the slots before them are CPU slots. 0 when the
 * writer has none, or was built before segment format 2.6 (its owned
 * slots, if any, then read as CPU slots); always below nslots. 0 for a
 * NULL reader. Thread-safe; async-signal-safe. Cost: a load. */
PCPU_API unsigned pcpu_reader_owned_slots(const pcpu_reader_t *r);

/** What a CPU slot stands for: 1 = CPU number, 2 = rseq mm_cid (a dense
 * per-process concurrency id, not a CPU); 0 for a NULL reader. (An owned
 * slot stands for the worker thread that claimed it, on whatever CPU.)
 * Thread-safe; async-signal-safe. Cost: a load. */
PCPU_API unsigned pcpu_reader_slot_index(const pcpu_reader_t *r);

/**
 * Sets the most bytes each later snapshot of `r` may read and allocate
 * (struct pcpu_reader_options' max_bytes; 0: the default), for a caller
 * that keeps a reader open across snapshots with a budget that changes (an
 * exporter's per-scrape limit). Returns 0, or -1 with errno EINVAL (NULL
 * reader). Not thread-safe: not concurrently with a snapshot of `r`; not
 * async-signal-safe. Cost: a store. Since PCPU_0.2.
 */
PCPU_API int pcpu_reader_set_max_bytes(pcpu_reader_t *r, size_t max_bytes);

/** When the segment was published: nanoseconds since the Epoch
 * (CLOCK_REALTIME), what struct pcpu_segment_info's created_ns lists --
 * the start of the cumulative values of the series made at publication
 * (OTLP's start time). 0 for a NULL reader. Thread-safe;
 * async-signal-safe. Cost: a load. Since PCPU_0.2. */
PCPU_API uint64_t pcpu_reader_created_ns(const pcpu_reader_t *r);

/**
 * The writer's state now: re-reads the header's flags and checks that the
 * writer process still runs (pid and start time, from /proc; a reader in
 * another pid namespace sees GONE). Returns the state, or -1 with errno
 * EBADMSG if the header became invalid. PCPU_SEGMENT_UNKNOWN when the
 * check fails (pcpu_reader_error() says why). Thread-safe; not
 * async-signal-safe. Cost: a pread of the header and a read of
 * /proc/PID/stat.
 */
PCPU_API int pcpu_reader_state(pcpu_reader_t *r);

/** Flags of pcpu_reader_snapshot(). */
enum {
	/** Also give each series' per-slot values
	 * (pcpu_reader_snapshot_slots()). */
	PCPU_READER_PER_SLOT = 1u << 0,
};

/** A snapshot of a segment. */
struct pcpu_reader_snapshot {
	/** Families sorted by name, series by label values: the same tree
	 * pcpu_registry_snapshot() builds in the writing process, ready for
	 * pcpu_snapshot_write(). */
	struct pcpu_snapshot snapshot;
	/** Directory generation at the start of the read (even). */
	uint64_t generation;
	/** Series and families left out because they were being added or
	 * removed during the read. */
	size_t changed;
	/** 1 if the directory did not change at all during the read. */
	int stable;
	/** 1 if the writer reported its directory full (series missing). */
	int incomplete;
	/** Writer state at the time of the read. */
	enum pcpu_segment_state state;
	/** Slots of the per-slot arrays (pcpu_reader_nslots(); the last
	 * pcpu_reader_owned_slots() of them are owned slots). */
	unsigned nslots;
	/** 1 if the writer's file system ran out of space (or memory): some
	 * series were refused or are missing (then `incomplete` is 1 too). */
	int nospace;
};

/**
 * Takes a snapshot. Returns 0 with *out set (free with
 * pcpu_reader_snapshot_free()), or -1 with errno (see the file comment) and
 * *out NULL. While the directory changes under it, the read is retried a
 * few times (a bounded number) for a stable snapshot; after that, the series
 * that changed are left out (`changed`). On a 32-bit target a value whose
 * copy may be torn (its high half changed between copies, every time) is
 * read again, then the snapshot fails with EAGAIN: never a torn value.
 * Thread-safe with other snapshots of the same reader; not async-signal-safe.
 * Cost: a few preads: the header, the used part of the directory, and per
 * chunk of values, one pread per slot (and per mirror) that holds data in
 * the range of the values; holes are found with SEEK_DATA/SEEK_HOLE, a few
 * calls per extent of data, never one per slot. Every such call counts
 * against max_bytes. A reader keeps the directory of its last stable
 * snapshot (without PCPU_READER_PER_SLOT, and without consistent groups,
 * whose values live in the directory): the next snapshot of a directory
 * that has not changed since -- the header's generation says so -- reads
 * the header twice and the values, not the directory, and shares the
 * names and labels of the earlier one (freeing either is fine). Such a
 * directory's families are checked once, as pcpu_snapshot_write() checks,
 * and marked PCPU_SNAPSHOT_CHECKED (pcpu/expose.h): writing or merging a
 * snapshot of them then checks only their values. Keep a reader open to
 * snapshot it again: that is the cheap way to scrape.
 */
PCPU_API int pcpu_reader_snapshot(pcpu_reader_t *r, unsigned flags,
				  struct pcpu_reader_snapshot **out);

/**
 * Per-slot values of series `series` of family `family` of a snapshot taken
 * with PCPU_READER_PER_SLOT: an array of s->nslots values, each the slot's
 * word plus its mirror word -- for a counter or a gauge, the slot's part of
 * the value; for a histogram, each slot's count of observations. The split
 * is only meaningful between resets and gauge sets: those are offsets in
 * slot 0's mirror word. NULL with errno EINVAL when out of range or taken
 * without PCPU_READER_PER_SLOT, ENODATA for a member of a consistent group
 * (pcpu/group.h: its value is read whole from the group's lanes, which have
 * no per-slot split). Valid as long as the snapshot. Thread-safe (the
 * snapshot is read-only); async-signal-safe. Cost: a few loads.
 */
PCPU_API const int64_t *pcpu_reader_snapshot_slots(const struct pcpu_reader_snapshot *s,
						   size_t family, size_t series);

/** Frees a snapshot from pcpu_reader_snapshot(). NULL is a no-op.
 * Thread-safe (for distinct snapshots); not async-signal-safe. Cost: a
 * free per allocation of the snapshot (a few per family). */
PCPU_API void pcpu_reader_snapshot_free(struct pcpu_reader_snapshot *s);

/**
 * A flows table of a segment (format 2.9: pcpu_segment_flows_create() in
 * the writer, pcpu/segment.h): nflows flows of ncounters counters, whose
 * shared words readers read with pcpu_reader_flows_read(). The pcpu__
 * fields are the reader's (which entry, which table): leave them alone.
 */
struct pcpu_reader_flows {
	const char *name;                 /**< the table's name (a metric name) */
	const char *help;                 /**< its help, NULL for none */
	size_t nflows;                    /**< flows */
	unsigned ncounters;               /**< counters per flow */
	const char *const *counter_names; /**< ncounters label names */
	uint64_t pcpu__entry, pcpu__seq, pcpu__id, pcpu__off;
};

/**
 * The flows tables of the segment now: an array of *n tables in *out (free
 * it with pcpu_reader_flows_free()), in directory order; *out NULL and *n
 * 0 when there are none (a segment of a writer before 2.9 has none).
 * Tables being created or destroyed during the read are left out, as are
 * entries that fail validation (every field is untrusted: names, counts,
 * the words' place against the file's size). The writer's liveness is not
 * checked (pcpu_reader_state() tells it).
 * Returns 0, or -1 with errno: EINVAL (NULL argument), EBADMSG (the header
 * became invalid), ENOMEM, or a read's error.
 * Thread-safe; not async-signal-safe. Cost: a pread of the header, of the
 * used directory (in pieces of 1,024 entries, whatever its size: O(entries
 * used)) and of each table's entry and names.
 */
PCPU_API int pcpu_reader_flows_list(pcpu_reader_t *r, struct pcpu_reader_flows **out, size_t *n);

/** Frees what pcpu_reader_flows_list() gave (n: its *n). NULL is a no-op.
 * Thread-safe (for distinct arrays); not async-signal-safe. Cost: a free
 * per table. */
PCPU_API void pcpu_reader_flows_free(struct pcpu_reader_flows *tables, size_t n);

/**
 * Reads the counters of flows first .. first + n - 1 of table `t` (one of
 * pcpu_reader_flows_list()'s) into out[(flow - first) x ncounters +
 * counter]: the table's shared words, as the writer's last flush left them
 * and whatever reached them since. The writer flushes at every collection
 * of its registry, so each value holds every add that returned before the
 * writer's last collection began (exact then), and possibly later ones;
 * values are not one snapshot (each word is read once).
 * The table's entry is read before and after the words: a table destroyed
 * or replaced since it was listed, or during the read, fails with ESTALE
 * (list again) -- never values of another table.
 * On a 32-bit target the words are copied three times and settled as a
 * snapshot's values are (never a word torn between its halves).
 * Returns 0, or -1 with errno: EINVAL (NULL argument, n 0, first + n above
 * nflows), ESTALE, EBADMSG (truncated file), EAGAIN (32-bit targets: a
 * word kept changing between its halves), ENOMEM, or a read's error.
 * Thread-safe; not async-signal-safe. Cost: two preads of the entry and one
 * of n x ncounters x 8 bytes (a 10^6 x 2 table: 16 MB; three on 32-bit
 * targets).
 */
PCPU_API int pcpu_reader_flows_read(pcpu_reader_t *r, const struct pcpu_reader_flows *t,
				    size_t first, size_t n, uint64_t *out);

/**
 * Removes the segments of the caller's user (or any user's, with
 * PCPU_READER_ANY_OWNER, for root) whose writer is gone or closed them --
 * on positive evidence only: a segment whose state is PCPU_SEGMENT_UNKNOWN
 * (a descriptor shortage, another pid namespace...) is kept. On success
 * *removed (if not NULL) counts them. Returns 0 or -1 with errno (as
 * pcpu_segment_list()). Thread-safe; not async-signal-safe. Cost: a listing
 * and an unlink per segment removed.
 */
PCPU_API int pcpu_segment_prune(const struct pcpu_reader_options *opts, size_t *removed);

/** Same as pcpu_segment_error() (pcpu/segment.h): the last error message
 * of a segment or reader call in this thread; never NULL. Thread-safe (per
 * thread); async-signal-safe. Cost: a load. */
PCPU_API const char *pcpu_reader_error(void);

/**
 * A short fixed word for why a reader call failed with errno `errnum`, for
 * a label value an exporter can attach to a segment it could not serve
 * (`pcpustat serve`'s and the Python collector's pcpu_segment_up{reason}):
 * "missing" (ENOENT), "ambiguous" (ENOTUNIQ), "permission" (EACCES, EPERM,
 * ELOOP), "incompatible" (EPROTONOSUPPORT), "corrupt" (EBADMSG),
 * "writer_gone" (ESRCH), "not_ready" (EAGAIN), "too_large" (EFBIG), and
 * "error" for anything else. The vocabulary is bounded, so the label's
 * cardinality is; pcpu_reader_error() has the details. Never NULL (a
 * static string). Thread-safe; async-signal-safe. Cost: a switch.
 */
PCPU_API const char *pcpu_reader_reason(int errnum);

PCPU_END_DECLS

#endif /* PCPU_READER_H */
