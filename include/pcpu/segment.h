/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/segment.h
 * Publishing a registry's statistics to other processes: the shared
 * statistics segment (writer side). pcpu/reader.h is the reading side;
 * the `pcpustat` tool and its Prometheus exporter use it.
 *
 * One call after creating a registry makes its statistics readable from
 * outside the process:
 *
 *     pcpu_registry_t *reg = pcpu_registry_create();
 *     pcpu_segment_t *seg = pcpu_segment_publish(reg, "myapp", NULL);
 *     pcpu_counter_t rx = pcpu_registry_counter(reg, "rx_packets", "Packets received.");
 *     ...
 *     pcpu_counter_add(rx, 1);       // unchanged: one rseq add, nothing more
 *     ...
 *     pcpu_segment_unpublish(seg);   // at exit: removes the file
 *
 * How: the registry's per-CPU zone moves into a file on a tmpfs
 * (`/dev/shm/pcpu-<uid>/pcpu.<pid>.<name>` by default), mapped MAP_SHARED, so the
 * counters' memory *is* the shared memory and an update costs exactly what
 * it cost before. In front of the counters the file holds a header and a
 * directory -- for every family and series its name, labels, help, unit,
 * type, and where in the file its value lives -- which pcpu keeps current,
 * under the registry's lock, whenever a family or series is added or
 * removed. Readers copy the file with pread(2) and sum the per-CPU copies
 * themselves; nothing runs in the application for a read. The format is in
 * docs/segment-format.md.
 *
 * Security: the file is created with the guarantees of
 * O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600 (0640 with a group, on request). By
 * default it goes in the caller's own directory /dev/shm/pcpu-<uid> (0700,
 * owned by the caller, writable by no one else; if another user holds that
 * name, /dev/shm/pcpu-<uid>.<random>), so no one else can create its name
 * first. A directory named by the caller must be owned by the caller or root
 * and, if others may write to it, have the sticky bit. Readers check the
 * owner and the file type before opening, and never follow a symlink. The file holds no pointers the
 * reader uses (the zone's chunk headers, which readers ignore, hold one
 * writer-side address: treat the segment as disclosing it to whoever may
 * read it).
 *
 * fork(): the child leaves the segment. During fork() the child gets a
 * private copy of the registry's counters (the parent's values at an
 * instant during fork(): adds that completed before fork() was called are
 * in it; adds concurrent with fork() are in the parent's and may or may not
 * be in the child's; later adds of either process stay in that process), at
 * the same addresses, so every handle stays valid. The child's segment is
 * detached: pcpu_segment_path() returns NULL there, unpublish does nothing,
 * and nothing the child does reaches the parent's file, whose readers keep
 * seeing the parent's values only. The child may use the registry freely
 * (register, update, reset, snapshot, expose) and may publish registries of
 * its own. Why not share: two processes' threads may hold the same CPU
 * number or mm_cid at once, and their unlocked rseq adds to one word would
 * lose updates; resets, serialised per process, would race.
 */
#ifndef PCPU_SEGMENT_H
#define PCPU_SEGMENT_H

#include <sys/types.h>
#include <pcpu/common.h>
#include <pcpu/stats.h>
#include <pcpu/segment_dir.h>

PCPU_BEGIN_DECLS

typedef struct pcpu_segment pcpu_segment_t;

/** Longest segment name, in bytes. */
#define PCPU_SEGMENT_NAME_MAX 64

/** Flags of struct pcpu_segment_options. */
enum {
	/** Make the segment readable by `group` (mode 0640, group set with
	 * fchown, which needs the caller to be a member of that group). In the
	 * default per-user directory, the directory becomes 0755 so that the
	 * group can list and search it (the names of the caller's segments are
	 * then visible to all users, as they were in /dev/shm). */
	PCPU_SEGMENT_GROUP_READ = 1u << 0,
	/** A shared registry, for pre-fork servers: the segment stays with
	 * every process fork()ed from the publisher after publication (and
	 * their children), which all write it -- adds, records and sets from
	 * any of them land in the one copy, and a family or series any of
	 * them registers is one family or series for all (registering it in
	 * another process finds the same storage); consistent groups too
	 * (pcpu/group.h). Readers see one segment, live while any process of
	 * the tree lives. A registration the tree's directory cannot record
	 * fails with ENOSPC in every process (never made twice); reads,
	 * collections, resets and sets never wait for another process (a
	 * new series' registration waits for one being made). Each process
	 * looks up (pcpu_registry_find(), pcpu_family_lookup()) what it
	 * registered or inherited; registering finds what others made. Needs
	 * CPU-number slots (pcpu_configure() with PCPU_INDEX_CPU first
	 * thing in the publisher, or `PCPU_INDEX=cpu` in its environment;
	 * EINVAL otherwise: mm_cid is per process). What a shared registry does not
	 * do -- removals, callbacks, registered structs, owned slots,
	 * processes not forked from the publisher (but those that join it by
	 * path, pcpu_segment_join()) -- and what it costs:
	 * README.md, "Count across a pre-fork server's processes";
	 * pcpu_segment_publish(3). */
	PCPU_SEGMENT_SHARED_TREE = 1u << 1,
};

/**
 * Options of pcpu_segment_publish(). All-zero (or a NULL pointer) means the
 * defaults.
 */
struct pcpu_segment_options {
	/** Directory of the segment file. NULL: $PCPU_SEGMENT_DIR when set
	 * (ignored in set-user-ID programs), else the caller's per-user
	 * directory in PCPU_SEGMENT_DEFAULT_DIR, made if need be. A directory
	 * others may write to (sticky) lets them take a segment's name first:
	 * prefer the default. */
	const char *dir;
	/** PCPU_SEGMENT_* flags. */
	unsigned flags;
	/** With PCPU_SEGMENT_GROUP_READ: the group granted read access. */
	gid_t group;
	/** Most directory entries (families + series) at once; 0: 1048576.
	 * The entry table is sparse: only the entries used take memory. */
	size_t max_entries;
	/** Bytes of names, labels and help the directory can hold; 0: 128 MiB
	 * (sparse too). */
	size_t max_string_bytes;
};

/**
 * Publishes registry `reg` as the segment `name`.
 *
 * `name`: 1 to PCPU_SEGMENT_NAME_MAX bytes of [A-Za-z0-9_.-], not starting
 * with '.' or '-'. The file is `<dir>/pcpu.<pid>.<name>`; several processes
 * may publish the same name. Segments of the same name left behind by dead
 * processes of the same user are removed first -- only on positive evidence
 * that their writer is gone (never because /proc could not be read).
 *
 * Precondition -- call it right after creating the registry: the registry
 * must not yet hold any series (families without series are fine), because
 * live counters cannot move into the file (threads add to them by address,
 * without locks). Every family and series created afterwards appears in the
 * segment as it is created and disappears as it is removed.
 *
 * The segment then lives as long as the registry: pcpu_registry_destroy()
 * removes the file and frees the segment. pcpu_segment_unpublish() removes
 * the file earlier. For the default registry (never destroyed) call
 * pcpu_segment_unpublish() before exiting; a file left by a process that
 * died is recognised as such by readers and removed by the next publisher
 * of the same name (or `pcpustat --prune`).
 *
 * Returns the segment, or NULL with errno:
 *  - EINVAL: NULL registry, invalid name or options;
 *  - EBUSY: the registry already has series, or is already published;
 *  - EEXIST: the file exists already (in a directory named by the caller:
 *    a leftover whose writer's state is unknown, or someone else's file);
 *  - EPERM: the directory is unsafe (owned by another user, or writable by
 *    others without the sticky bit), no safe per-user directory could be
 *    made, or the group cannot be set;
 *  - ENOENT, EACCES, ENOTDIR, ENOSPC...: from opening, sizing or
 *    allocating the file (ENOSPC: its file system is full);
 *  - EFBIG: the file's (sparse) size would exceed RLIMIT_FSIZE, which would
 *    raise SIGXFSZ;
 *  - ENOMEM.
 * pcpu_segment_error() says what went wrong.
 *
 * Thread-safe (takes the registry's lock); not async-signal-safe.
 * Cost: a few system calls and mappings; afterwards, every family or series
 * added or removed costs a few hundred bytes of writes into the directory
 * under the registry's lock, and updates cost nothing more at all.
 *
 * Memory: the file's pages are allocated before they can be written (a full
 * tmpfs would otherwise kill the process with SIGBUS), so every 4 KiB page
 * of values (512 counters) costs 4 KiB in the slot and the mirror region of
 * every slot a thread can write -- slot 0, the CPUs present at start-up and
 * mm_cid's range (pcpu_slot_walked()), not every possible CPU: 16 bytes per
 * counter per present CPU, plus its directory entry (160 bytes a counter
 * with 2 present CPUs, 384 with 16, at any number of possible ones:
 * bench/memory.md) -- where a private registry takes memory only in the
 * slots its threads touch. See pcpu_segment_nospace().
 */
PCPU_API pcpu_segment_t *pcpu_segment_publish(pcpu_registry_t *reg, const char *name,
					      const struct pcpu_segment_options *opts);

/**
 * Joins the shared registry (PCPU_SEGMENT_SHARED_TREE) whose segment file
 * is `path` (pcpu_segment_path() in one of its processes), from a process
 * that was not forked from it: typically a server's new binary in a binary
 * upgrade, exec()ed by the old master, whose new master must go on counting
 * where the old one counts, neither from zero nor twice.
 *
 * `reg` must be new, as for pcpu_segment_publish(): no series yet
 * (families are fine). Afterwards the process is one more process of the
 * tree, exactly as if forked from it: every family and series it registers
 * is the tree's (one the tree has is found, with its storage and value),
 * its updates land in the tree's one copy, the processes it forks are of
 * the tree too, and the tree lives while any of its processes does, the
 * old master gone or not. Nothing of the file changes: readers see one
 * segment, with the first publisher's pid and name.
 *
 * Checked before anything is mapped: `path` names a file "pcpu.PID.NAME"
 * in a directory pcpu_segment_publish() would accept, a regular file (not
 * a symlink) owned by the caller's effective user; the file is a live
 * tree's (not closed) of the format version this library writes, with the
 * caller's slots (CPU numbers -- pcpu_configure() -- as many as
 * pcpu_nslots(), the same owned slots); a tree written by another version
 * of pcpu is refused (publish a new one: counts then restart).
 *
 * Returns the segment (what pcpu_segment_publish() returns, freed by
 * pcpu_registry_destroy(); end the process's part with
 * pcpu_segment_leave()), or NULL with errno and pcpu_segment_error():
 *  - EINVAL: NULL arguments, not a segment file name, not a shared
 *    registry, other slots, or a process that indexes slots by mm_cid;
 *  - EBUSY: `reg` has series or is published, or a thread holds an owned
 *    slot (pcpu/worker.h);
 *  - EPERM: unsafe directory, or a file of another user;
 *  - ESRCH: the tree was closed;  EAGAIN: its last process is closing it;
 *  - EPROTONOSUPPORT: another segment format;  EBADMSG: inconsistent;
 *  - EEXIST: a family registered before joining differs from the tree's;
 *  - ENOENT, EACCES, ELOOP, ENOMEM...: from opening or mapping it.
 * On failure the tree is unchanged and `reg` stays usable (private, or, if
 * the failure came after its zone became the tree's, counting unseen in
 * the file, and never published or joined again: EBUSY; destroying it
 * frees everything).
 * Thread-safe (takes the registry's lock); not async-signal-safe.
 * Cost: opening and mapping the file, a header read; afterwards as any
 * process of the tree (a registration looks the tree's directory up under
 * its lock).
 */
PCPU_API pcpu_segment_t *pcpu_segment_join(pcpu_registry_t *reg, const char *path);

/**
 * Ends the calling process's part in a shared registry's tree (published
 * with PCPU_SEGMENT_SHARED_TREE, or joined with pcpu_segment_join()): if no
 * other process holds the tree, it is the tree's last, and the segment is
 * closed and its name removed, as pcpu_segment_unpublish() does; otherwise
 * the tree and its file go on in the others (a master that quits after a
 * binary upgrade leaves the tree to the new one; the new one, quitting
 * after a rollback, leaves it to the old one). Either way this process
 * gives up the name: pcpu_registry_destroy() then removes nothing.
 *
 * Call it when the process is about to exit and no process it forked (or
 * that forked from it since publication or joining) still runs: its
 * membership is one per open file description, which those processes share
 * and lose with it. It may go on updating its handles, which still land in
 * the tree.
 *
 * Returns 1 (it was the last: the segment is closed and its name removed),
 * 0 (others hold the tree, or it left before), or -1 with errno: EINVAL
 * (NULL, or not a shared registry's segment), ENOTSUP (a kernel without OFD
 * locks, Linux before 3.15: whether others hold the tree cannot be told;
 * nothing done). Works in any process of the tree, the publisher or not.
 * Of two processes leaving at once exactly one is last. Thread-safe (takes
 * the registry's lock); not async-signal-safe. Cost: two fcntl() calls,
 * and an unlink when last.
 */
PCPU_API int pcpu_segment_leave(pcpu_segment_t *seg);

/**
 * Removes the segment's file name and marks the segment closed, so that
 * readers that still have it open say so. The registry and every handle
 * stay valid and keep counting (into memory no one else can open any more);
 * the segment object itself is freed by pcpu_registry_destroy(). The file,
 * nameless, stays on its file system until then: new series still take
 * their pages there (and fail with ENOSPC if it is full).
 * Returns 0 (also when already unpublished), or -1 with errno EINVAL (NULL).
 * Unlinks only if the name still refers to this segment's file. In a
 * fork()ed child it does nothing (the name is the parent's).
 * Thread-safe (takes the registry's lock); not async-signal-safe.
 * Cost: an fstatat and an unlink.
 */
PCPU_API int pcpu_segment_unpublish(pcpu_segment_t *seg);

/**
 * Full path of the segment's file (valid as long as the segment; NULL for a
 * NULL segment, and in a fork() child, which has left the segment).
 * Thread-safe; async-signal-safe. Cost: a load.
 */
PCPU_API const char *pcpu_segment_path(const pcpu_segment_t *seg);

/**
 * Number of registry changes that could not be written to the directory
 * because it was full (max_entries or max_string_bytes) or its file system
 * had no space for it; readers then report the segment as incomplete. 0
 * normally. Thread-safe; async-signal-safe. Cost: a load.
 */
PCPU_API uint64_t pcpu_segment_dropped(const pcpu_segment_t *seg);

/**
 * Number of times the segment's file system refused space (it is full, or
 * out of memory): registrations of the published registry that failed with
 * ENOSPC (or ENOMEM) because the pages their values need in the file could
 * not be allocated, and directory changes dropped for the same reason.
 * Readers then see the segment marked out of space (and incomplete). 0
 * normally.
 *
 * Running out of space never stops the application: pages are allocated
 * (fallocate) before a series is handed out -- in every slot and mirror
 * region -- so an update can never fault (SIGBUS) on a full file system;
 * series created before keep counting exactly, and a registration fails
 * cleanly. Thread-safe; async-signal-safe. Cost: a load.
 */
PCPU_API uint64_t pcpu_segment_nospace(const pcpu_segment_t *seg);

/**
 * The message describing the last error of a segment or reader function in
 * the calling thread, e.g. `directory "/tmp/x" is writable by others and
 * not sticky`. Never NULL; "" if none yet. Valid until the thread's next
 * segment or reader call. Thread-safe (per thread); async-signal-safe.
 * Cost: a load.
 */
PCPU_API const char *pcpu_segment_error(void);

struct pcpu_flows;
struct pcpu_flows_attr;

/** Most counters per flow of a published flows table. */
#define PCPU_SEGMENT_FLOWS_MAX_COUNTERS 64

/**
 * Creates a flows table (pcpu/flows.h: `nflows` flows of `ncounters`
 * counters each, all 0) whose shared words live in segment `seg`'s file,
 * so that other processes read them (pcpu_reader_flows_read() in
 * pcpu/reader.h, `pcpustat flows`). Use it with every pcpu_flows_*
 * function, as one from pcpu_flows_create(): the add is the same buffered
 * rseq add, nothing more. pcpu_flows_destroy() removes it from the
 * segment.
 *
 * `name`: the table's name (a metric name, pcpu_stats_check_metric_name());
 * `help`: a description (NULL: none); `counter_names`: `ncounters` distinct
 * label names (pcpu_stats_check_label_name()), e.g. {"packets", "bytes"};
 * `attr`: as for pcpu_flows_create() (NULL: defaults). Names are copied.
 *
 * What readers see: the shared words. The writer flushes every table of the
 * segment (pcpu_flows_flush()) at every collection of its registry --
 * pcpu_registry_collect(), pcpu_registry_snapshot(), pcpu_registry_write(),
 * so every in-process scrape too -- so a reader sees every add that
 * returned before the writer's last collection began, exactly, and some
 * later ones (a slot's buffer drains into the words when it fills, after
 * at most `buffer` adds there). The delay seen from outside is bounded by
 * the interval between collections: a writer that nobody scrapes
 * in-process calls pcpu_registry_collect() on a timer (as for consistent
 * groups, pcpu/group.h), or pcpu_flows_flush() itself. Each word is exact
 * for its key; a table is not one snapshot (as pcpu_flows_read_array()).
 *
 * Memory: nflows x ncounters x 8 bytes of the segment's file, every page
 * allocated now (rounded up to a page), so that no add can fault on a
 * full file system (SIGBUS): 16 MB for 10^6 flows x 2 counters, whatever
 * the number of slots (bench/flows.md), plus the buffers as for
 * pcpu_flows_create(). The words lie past the registry's per-CPU chunks
 * (file offset 8 TiB and up: the file is sparse; its apparent size grows).
 *
 * Returns the table, or NULL with errno (pcpu_segment_error() says more):
 *  - EINVAL: NULL arguments, an invalid name, help or counter name, a
 *    counter name given twice, ncounters 0 or above
 *    PCPU_SEGMENT_FLOWS_MAX_COUNTERS, nflows 0, invalid attributes; a
 *    shared registry's segment (PCPU_SEGMENT_SHARED_TREE, joined ones
 *    included: a table's buffers are one process's), or a fork() child's
 *    copy of its parent's segment;
 *  - E2BIG: more keys than PCPU_FLOWS_MAX_KEYS, or names longer than
 *    128 KiB;
 *  - ENOSPC: the file system has no room for the words (counted in
 *    pcpu_segment_nospace()), or the directory has no free entry or
 *    string space;
 *  - EFBIG: the file would pass RLIMIT_FSIZE;
 *  - ENOMEM, or what mmap() said.
 * A table may outlive its registry: after pcpu_registry_destroy() (or
 * pcpu_segment_unpublish()) it keeps counting, unseen, until
 * pcpu_flows_destroy(); destroying it must not run concurrently with
 * pcpu_registry_destroy(). A fork() child gets a private copy of the words
 * (its adds stay its own); its segment is detached, as for series.
 * Thread-safe (takes the registry's lock); not async-signal-safe.
 * Cost: an mmap and the allocation of the words' pages in the file (a
 * page fault per 4 KiB: 17-19 ms for 10^6 flows x 2, bench/flows.md), a
 * directory entry; at each collection afterwards, a
 * pcpu_flows_flush() of the table (a membarrier system call, a drain of
 * the slots' buffers: 18-36 us with 2 writing slots) under the registry's
 * lock.
 */
PCPU_API struct pcpu_flows *pcpu_segment_flows_create(pcpu_segment_t *seg, const char *name,
						      const char *help, size_t nflows,
						      unsigned ncounters,
						      const char *const *counter_names,
						      const struct pcpu_flows_attr *attr);

PCPU_END_DECLS

#endif /* PCPU_SEGMENT_H */
