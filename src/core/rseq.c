/* SPDX-License-Identifier: MIT */
/*
 * rseq.c: knowing the current CPU cheaply, and registering the threads that
 * need it.
 *
 * Every fast path of pcpu reads the calling thread's struct rseq at the
 * offsets in pcpu__g from the thread pointer. Which area that is, and which
 * of its fields indexes the slots, gets decided once per process, by a
 * constructor at load time (cheap: getauxval, getenv, two glibc variables)
 * or by the first pcpu call if that comes earlier; nothing changes them
 * afterwards, which is what lets programs treat pcpu__g as const:
 *
 *   glibc >= 2.35 registered an area for every thread (weak __rseq_size > 0)
 *       -> use it: rseq_offset = __rseq_offset. Never register another one:
 *          the kernel allows one area per thread, and glibc owns it.
 *   glibc did not (older glibc, GLIBC_TUNABLES=glibc.pthread.rseq=0)
 *       -> pcpu's own area, a static-TLS (initial-exec) struct rseq, so its
 *          offset from the thread pointer is the same in every thread. Each
 *          thread registers it lazily, on its first slow-path call, and a
 *          pthread key destructor unregisters it at thread exit (only
 *          pcpu_thread_init() registers where setting that key could
 *          allocate: see exit_key_signal_safe).
 *   PCPU_RSEQ=0 in the environment, or a ThreadSanitizer build
 *       -> the own area, never registered: every add sees a negative index
 *          and takes the fallback path.
 *
 * A thread whose registration fails (ENOSYS: old kernel, valgrind, gVisor;
 * EPERM: seccomp; EINVAL: some other library registered an area first) keeps
 * cpu_id < 0 in its area and uses the fallback path for good.
 *
 * Which fields the kernel fills is decided from getauxval(AT_RSEQ_FEATURE_SIZE)
 * (mm_cid needs 28 bytes), not from glibc's __rseq_size, which glibc 2.36
 * reports as 20 although the kernel fills mm_cid. The index is mm_cid where
 * the kernel fills it, else cpu_id; PCPU_INDEX=cpu|mm_cid overrides.
 *
 * The number of slots (reading /sys) is left to pcpu_init(), the first time
 * a zone is made: the fast paths do not need it, since a registered index
 * is always below it.
 */
#include "rseq_internal.h"
#include "slot_walk.h"
#include <pcpu/worker.h> /* PCPU_OWNED_MAX */

#include <pthread.h>

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef AT_RSEQ_FEATURE_SIZE
#define AT_RSEQ_FEATURE_SIZE 27
#endif
#define RSEQ_FLAG_UNREGISTER 1
#define RSEQ_CPU_ID_UNINITIALIZED (-1)
/* The signature before every abort handler: the target's, from its arch
 * header (pcpu/arch/<arch>.h), the same as glibc registers (RSEQ_SIG), so
 * that pcpu's own registration and glibc's accept the same sections. */
#define PCPU_RSEQ_SIG PCPU__RSEQ_SIG

/* glibc's rseq symbols (2.35+), referenced weakly so pcpu also loads with an
 * older glibc: their addresses are then NULL. */
extern const ptrdiff_t __rseq_offset __attribute__((weak));
extern const unsigned int __rseq_size __attribute__((weak));

/* The kernel's struct rseq (linux/rseq.h), 32 bytes, 32-byte aligned. */
struct pcpu_rseq_area {
	uint32_t cpu_id_start;
	int32_t cpu_id;
	uint64_t rseq_cs;
	uint32_t flags;
	uint32_t node_id;
	int32_t mm_cid;
	uint32_t padding;
} __attribute__((aligned(32)));

_Static_assert(sizeof(struct pcpu_rseq_area) == 32, "struct rseq is 32 bytes");
_Static_assert(__builtin_offsetof(struct pcpu_rseq_area, cpu_id) == PCPU__RSEQ_OFF_CPU_ID, "cpu_id");
_Static_assert(__builtin_offsetof(struct pcpu_rseq_area, rseq_cs) == PCPU__RSEQ_OFF_CS, "rseq_cs");
_Static_assert(__builtin_offsetof(struct pcpu_rseq_area, mm_cid) == PCPU__RSEQ_OFF_MM_CID, "mm_cid");

/* Initial-exec: static TLS, at one fixed offset from the thread pointer in
 * every thread. Starts "unregistered" (-1) in both index fields. */
static __thread struct pcpu_rseq_area own_area
	__attribute__((tls_model("initial-exec"))) = {
		.cpu_id = RSEQ_CPU_ID_UNINITIALIZED,
		.mm_cid = -1,
};

/* Per-thread state of pcpu's own registration. Volatile because a signal
 * handler's add may register the thread between any two instructions of the
 * code it interrupted: without it the compiler may keep a stale T_NEW in a
 * register across the pthread_sigmask() call (nothing else in this file can
 * change a static, address-not-taken variable) and register twice (EBUSY). */
enum thread_state { T_NEW = 0, T_REGISTERED, T_FALLBACK, T_EXITED };
static __thread volatile int thread_state;
static __thread volatile int thread_error; /* errno that caused T_FALLBACK */
PCPU_HIDDEN __thread uint32_t pcpu_t_fallback_slot_plus1
	__attribute__((tls_model("initial-exec")));

PCPU_API struct pcpu__globals pcpu__g; /* set once by globals_init() */
PCPU_HIDDEN uint32_t pcpu_slot_count;  /* set once by pcpu_init() */
PCPU_HIDDEN uint32_t pcpu_cpu_slot_count; /* the same; slots an rseq index or a fallback add uses */
PCPU_HIDDEN uint32_t pcpu_owned_slot_count; /* the same; owned slots, after the CPU slots */
PCPU_HIDDEN int pcpu_owned_env_invalid;     /* the same; PCPU_OWNED_SLOTS was refused */

static int process_mode;         /* enum pcpu_process_mode */
static int process_error;        /* why PCPU_PROCESS_NONE */
static int has_mm_cid;
static enum pcpu_index process_index;
/* Offset of the chosen rseq area from the thread pointer (globals_init()),
 * kept so that pcpu_configure() can move the index to the other field. */
static ptrdiff_t process_area;
/* pcpu_configure()'s owned-slot count, -1: none given (the environment's
 * or the default). Read by pcpu_init(). */
static int program_owned_slots = -1;
static pthread_key_t exit_key;
/* Whether pthread_setspecific(exit_key) may run in a signal handler. POSIX
 * does not say it is async-signal-safe; glibc (whose rseq this mode stands
 * in for) keeps the values of its first PTHREAD_KEY_2NDLEVEL_SIZE (32) keys
 * in the thread descriptor, where setting one is two stores: no lock, no
 * allocation. Keys from 32 on live in blocks that a thread's first use
 * allocates with calloc(), which a handler that interrupted malloc() would
 * deadlock in. exit_key is made at load time, so it is below 32 unless pcpu
 * was dlopen()ed into a process that had made 32 keys already. */
#define GLIBC_KEYS_IN_DESCRIPTOR 32
static int exit_key_signal_safe;
static uint32_t next_fallback_slot;
static int globals_state;        /* once_begin(): 0 none, > 0 running, -1 done */
static int init_state;           /* the same */

static char *thread_pointer(void)
{
	return pcpu_thread_pointer();
}

/* The calling thread's slot index as the fast paths read it. */
static int32_t current_index(void)
{
	return __atomic_load_n((int32_t *)(thread_pointer() + pcpu__g.index_tpoff),
			       __ATOMIC_RELAXED);
}

/* Highest CPU number in a list such as "0-3,8,10-11", plus one; 0 if the
 * text does not parse. Async-signal-safe (no stdio, no malloc). */
static uint32_t parse_cpu_list_count(const char *s)
{
	uint32_t max = 0, n;
	int have = 0;

	while (*s) {
		if (*s < '0' || *s > '9') {
			s++;
			continue;
		}
		n = 0;
		while (*s >= '0' && *s <= '9') {
			if (n > 1u << 20)
				return 0; /* absurd: refuse rather than overflow */
			n = n * 10 + (uint32_t)(*s++ - '0');
		}
		if (n + 1 > max)
			max = n + 1;
		have = 1;
	}
	return have ? max : 0;
}

static uint32_t possible_cpus(void)
{
	char buf[4096];
	ssize_t len = -1;
	uint32_t n = 0;
	int fd = open("/sys/devices/system/cpu/possible", O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		len = read(fd, buf, sizeof(buf) - 1);
		close(fd);
	}
	if (len > 0) {
		buf[len] = '\0';
		n = parse_cpu_list_count(buf);
	}
	if (n == 0) {
		long conf = sysconf(_SC_NPROCESSORS_CONF);
		n = conf > 0 ? (uint32_t)conf : 1;
	}
	return n;
}

static void thread_exit(void *arg)
{
	sigset_t all, old;

	(void)arg;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	if (thread_state == T_REGISTERED) {
		syscall(SYS_rseq, &own_area, sizeof(own_area), RSEQ_FLAG_UNREGISTER,
			PCPU_RSEQ_SIG);
		/* The kernel resets cpu_id but leaves mm_cid at 0, a valid slot:
		 * mark both invalid so later adds (other destructors) fall back. */
		__atomic_store_n(&own_area.cpu_id, RSEQ_CPU_ID_UNINITIALIZED, __ATOMIC_RELAXED);
		__atomic_store_n(&own_area.mm_cid, -1, __ATOMIC_RELAXED);
	}
	thread_state = T_EXITED;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* PCPU_RSEQ: 0 turns rseq off; 1, empty or unset leave it on. Anything
 * else leaves it on (both paths are exact) and is refused. */
static int rseq_disabled_by_environment(void)
{
	const char *v = getenv("PCPU_RSEQ");
	int off = 0;

	if (v && strcmp(v, "0") == 0)
		off = 1;
	else if (v && *v && strcmp(v, "1") != 0)
		pcpu__environment_refuse("PCPU_RSEQ: neither 0 nor 1; rseq stays on");
	if (!PCPU_ARCH_HAVE_RSEQ)
		return 1; /* no critical sections on this target or in this build */
	return off;
}

/* Busy-waits for another thread's one-time initialisation; both callers
 * are short (no I/O in globals_init, one small read in init_once). Not
 * pthread_once: this must also work from a signal handler.
 * A running initialisation is marked with the pid of its process, so a
 * fork() child whose parent was initialising in another thread at the
 * instant of fork() -- a thread the child does not have -- takes it over
 * instead of waiting for ever (tests/stats/test_default_fork.c hung there).
 * getpid() only off the fast path. */
static int once_begin(int *state)
{
	int s = __atomic_load_n(state, __ATOMIC_ACQUIRE), me;

	if (PCPU_LIKELY(s == -1))
		return 0;
	me = (int)getpid();
	for (;;) {
		if (s == -1)
			return 0;
		if (s != me) { /* none yet, or left by a thread of the parent */
			if (__atomic_compare_exchange_n(state, &s, me, 0, __ATOMIC_ACQ_REL,
							__ATOMIC_ACQUIRE))
				return 1;
			continue; /* s now holds the new state */
		}
		sched_yield();
		s = __atomic_load_n(state, __ATOMIC_ACQUIRE);
	}
}

static void once_end(int *state)
{
	__atomic_store_n(state, -1, __ATOMIC_RELEASE);
}

static enum pcpu_index index_from_environment(void)
{
	const char *v = getenv("PCPU_INDEX");

	if (v && strcmp(v, "cpu") == 0)
		return PCPU_INDEX_CPU;
	if (v && strcmp(v, "mm_cid") == 0)
		return PCPU_INDEX_MM_CID;
	if (v && *v) /* not understood: the default, refused */
		pcpu__environment_refuse("PCPU_INDEX: neither cpu nor mm_cid; the default index is used");
	return PCPU_INDEX_DEFAULT;
}

/* Publishes the offset of process_index's field of the area in pcpu__g. */
static void publish_index(void)
{
	pcpu__g.index_tpoff = (int64_t)(process_area + (process_index == PCPU_INDEX_MM_CID
								? PCPU__RSEQ_OFF_MM_CID
								: PCPU__RSEQ_OFF_CPU_ID));
}

/* Decides the area and the index field, and publishes their offsets in
 * pcpu__g. Cheap: no system call beyond what getauxval/getenv do. */
static void globals_init(void)
{
	unsigned long feature_size;
	ptrdiff_t area;
	enum pcpu_index want;

	if (!once_begin(&globals_state))
		return;
	feature_size = getauxval(AT_RSEQ_FEATURE_SIZE);
	has_mm_cid = feature_size >= PCPU__RSEQ_OFF_MM_CID + 4;
	area = (char *)&own_area - thread_pointer();
	if (rseq_disabled_by_environment()) {
		process_mode = PCPU_PROCESS_NONE;
		process_error = ECANCELED;
	} else if (&__rseq_size && &__rseq_offset && __rseq_size > 0 &&
		   ((struct pcpu_rseq_area *)(thread_pointer() + __rseq_offset))->cpu_id >= 0) {
		process_mode = PCPU_PROCESS_GLIBC;
		area = __rseq_offset;
	} else {
		process_mode = PCPU_PROCESS_OWN;
		if (pthread_key_create(&exit_key, thread_exit) != 0) {
			process_mode = PCPU_PROCESS_NONE;
			process_error = EAGAIN;
		} else {
			exit_key_signal_safe = (unsigned)exit_key < GLIBC_KEYS_IN_DESCRIPTOR;
		}
	}
	want = index_from_environment();
	process_index = (want != PCPU_INDEX_CPU && has_mm_cid) ? PCPU_INDEX_MM_CID : PCPU_INDEX_CPU;
	if (process_mode == PCPU_PROCESS_NONE) {
		/* pcpu's own area, never registered: its index reads -1 for
		 * good, so every fast path takes the fallback. */
		area = (char *)&own_area - thread_pointer();
	}
	/* Keep the offset a full 64-bit value until here: narrowed earlier,
	 * the compiler may load only half of the TLS GOT entry, a form the
	 * linker cannot relax when linking statically (ld: "TLS transition
	 * from R_X86_64_GOTTPOFF to R_X86_64_TPOFF32 failed"). */
	__asm__("" : "+r"(area));
	process_area = area;
	publish_index();
	pcpu__g.cs_tpoff = (int64_t)(area + PCPU__RSEQ_OFF_CS);
	once_end(&globals_state);
}

/* At load time, so that pcpu__g holds its final values before any code of
 * the program runs (programs read it as const). Priority 101, the first
 * user priority, runs it before statically linked constructors that might
 * allocate counters (counter(9)'s early counters). */
__attribute__((constructor(101))) static void pcpu_load_init(void)
{
	globals_init();
}

/* The bounds, as the refusals below spell them. */
#define DECIMAL_(n) #n
#define DECIMAL(n) DECIMAL_(n)

static uint32_t slots_from_environment(uint32_t possible)
{
	const char *v = getenv("PCPU_NSLOTS");
	unsigned long n;
	char *end;

	if (!v || !*v)
		return possible;
	errno = 0;
	n = strtoul(v, &end, 10);
	/* Only raises the count: below the possible CPUs a registered index
	 * could exceed it (such a number is understood, and changes
	 * nothing). Bounded so a chunk's address space stays sane. */
	if (errno || *end || *v < '0' || *v > '9' || n > PCPU__SLOT_MAX) {
		pcpu__environment_refuse("PCPU_NSLOTS: not a number of slots up to " DECIMAL(PCPU__SLOT_MAX)
					 "; the possible CPUs' count is used");
		return possible;
	}
	if (n <= possible)
		return possible;
	return (uint32_t)n;
}

/* n owned slots, fewer where the CPU slots and they would pass
 * PCPU__SLOT_MAX in all. */
static uint32_t owned_within_bound(uint32_t n, uint32_t cpu_slots)
{
	if (cpu_slots >= PCPU__SLOT_MAX)
		return 0;
	return n > PCPU__SLOT_MAX - cpu_slots ? PCPU__SLOT_MAX - cpu_slots : n;
}

/* How many owned slots (pcpu/worker.h) follow the CPU slots: one per
 * possible CPU, at most PCPU_OWNED_DEFAULT_MAX, unless PCPU_OWNED_SLOTS=N
 * (decimal digits only, 0 .. PCPU_OWNED_MAX) says otherwise; never past
 * PCPU__SLOT_MAX slots in all. Unset or empty: the default. Anything else
 * (1025, -1, abc, 3x, " 3", +3) is refused, not replaced by the default:
 * the process gets no owned slots, and pcpu_worker_claim() fails with
 * EINVAL (pcpu_owned_env_invalid) -- a library may neither print nor exit,
 * and a worker that asked for slots must not silently get another number
 * of them. */
static uint32_t owned_from_environment(uint32_t possible, uint32_t cpu_slots)
{
	const char *v = getenv("PCPU_OWNED_SLOTS");
	unsigned long n = possible < PCPU_OWNED_DEFAULT_MAX ? possible : PCPU_OWNED_DEFAULT_MAX;

	if (v && *v) {
		n = 0;
		for (; *v; v++) {
			if (*v < '0' || *v > '9' || (n = n * 10 + (unsigned long)(*v - '0')) > PCPU_OWNED_MAX) {
				pcpu_owned_env_invalid = 1;
				pcpu__environment_refuse("PCPU_OWNED_SLOTS: not a number 0 to " DECIMAL(PCPU_OWNED_MAX)
							 "; no owned slots, pcpu_worker_claim() fails with EINVAL");
				return 0;
			}
		}
	}
	return owned_within_bound((uint32_t)n, cpu_slots);
}

/* The owned slots pcpu_init() gives the process: pcpu_configure()'s count,
 * else the environment's (owned_from_environment()); never past
 * PCPU__SLOT_MAX slots in all. */
static uint32_t owned_slots_to_make(uint32_t possible, uint32_t cpu_slots)
{
	const char *v = getenv("PCPU_OWNED_SLOTS");

	if (program_owned_slots < 0)
		return owned_from_environment(possible, cpu_slots);
	if (v && *v)
		pcpu__environment_refuse("PCPU_OWNED_SLOTS: the program chose the count (pcpu_configure());"
					 " the environment's is not used");
	return owned_within_bound((uint32_t)program_owned_slots, cpu_slots);
}

/* pcpu_init()'s work, by the thread that won init_state. */
static void init_once(void)
{
	uint32_t possible, cpu_slots, owned;

	possible = possible_cpus();
	cpu_slots = slots_from_environment(possible);
	owned = owned_slots_to_make(possible, cpu_slots);
	/* Owned slots are numbered after every slot an rseq index, a fallback
	 * add or a reset can write: no CPU's thread ever writes them. */
	__atomic_store_n(&pcpu_owned_slot_count, owned, __ATOMIC_RELAXED);
	__atomic_store_n(&pcpu_cpu_slot_count, cpu_slots, __ATOMIC_RELAXED);
	pcpu_slot_walk_init(cpu_slots);
	/* Last: every variable pcpu reads has been read, so a name it does
	 * not know is reported after the values it did not understand. */
	pcpu__environment_check_names();
	__atomic_store_n(&pcpu_slot_count, cpu_slots + owned, __ATOMIC_RELEASE);
}

void pcpu_init(void)
{
	globals_init();
	if (!once_begin(&init_state))
		return;
	init_once();
	once_end(&init_state);
}

/* The first release's struct pcpu_config ends after owned_slots. */
#define CONFIG_SIZE_V1 (offsetof(struct pcpu_config, owned_slots) + sizeof(int))

int pcpu_configure(const struct pcpu_config *cfg)
{
	enum pcpu_index index;
	int owned;

	if (!cfg || cfg->size < CONFIG_SIZE_V1) {
		errno = EINVAL;
		return -1;
	}
	index = cfg->index;
	owned = cfg->owned_slots;
	if ((index != PCPU_INDEX_DEFAULT && index != PCPU_INDEX_CPU && index != PCPU_INDEX_MM_CID) ||
	    owned < -1 || owned > PCPU_OWNED_MAX) {
		errno = EINVAL;
		return -1;
	}
	globals_init();
	if (index == PCPU_INDEX_MM_CID && !has_mm_cid) {
		errno = ENOTSUP;
		return -1;
	}
	if (once_begin(&init_state)) {
		/* Nothing of pcpu has run yet: no object exists whose slots
		 * the index chose, and no inline path has read pcpu__g, so
		 * the index may still move to the other field (pcpu/rseq.h:
		 * pcpu__g is constant while any pcpu object exists). */
		if (index != PCPU_INDEX_DEFAULT && index != process_index) {
			const char *v = getenv("PCPU_INDEX");

			if (v && *v)
				pcpu__environment_refuse("PCPU_INDEX: the program chose the index"
							 " (pcpu_configure()); the environment's is not used");
			process_index = index;
			publish_index();
		}
		program_owned_slots = owned;
		init_once();
		once_end(&init_state);
		return 0;
	}
	/* pcpu runs already: only the choices it runs with succeed. */
	if (index != PCPU_INDEX_DEFAULT && index != process_index) {
		errno = EBUSY;
		return -1;
	}
	if (owned >= 0 && (pcpu_owned_env_invalid ||
			   __atomic_load_n(&pcpu_owned_slot_count, __ATOMIC_RELAXED) !=
				   owned_within_bound((uint32_t)owned, pcpu_cpu_slot_count))) {
		errno = EBUSY;
		return -1;
	}
	return 0;
}

const char *pcpu_environment_error(void)
{
	pcpu_init(); /* every variable is read by then */
	return pcpu__environment_first_refusal();
}

/* Registers pcpu's own area for the calling thread. Signals are blocked so a
 * handler can never see (or cause) a half-done registration. */
static void register_own_area(void)
{
	sigset_t all, old;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	if (thread_state == T_NEW) {
		if (syscall(SYS_rseq, &own_area, sizeof(own_area), 0, PCPU_RSEQ_SIG) == 0) {
			thread_state = T_REGISTERED;
			/* Any non-NULL value makes the destructor run at exit. */
			pthread_setspecific(exit_key, &own_area);
		} else {
			thread_error = errno;
			thread_state = T_FALLBACK;
		}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

int pcpu__thread_prepare(void)
{
	pcpu_init();
	switch (process_mode) {
	case PCPU_PROCESS_GLIBC:
		return current_index() >= 0 ? 0 : -1;
	case PCPU_PROCESS_OWN:
		if (thread_state == T_NEW) {
			/* Reached from updates, so maybe in a signal handler:
			 * where setting the exit hook may allocate, only
			 * pcpu_thread_init() registers, and until then the
			 * thread's updates take the fallback path. */
			if (!exit_key_signal_safe) {
				if (!pcpu_t_fallback_slot_plus1)
					(void)pcpu_fallback_slot_assign();
				return -1;
			}
			register_own_area();
		}
		return thread_state == T_REGISTERED ? 0 : -1;
	default:
		return -1;
	}
}

uint32_t pcpu_fallback_slot_assign(void)
{
	/* Spread rseq-less threads over the slots so they do not all contend
	 * on one cache line; no system call per add. Only over the slots
	 * fetches walk (src/core/slot_walk.c): the present CPUs. */
	uint32_t slot = pcpu_slot_walk_nth(
		__atomic_fetch_add(&next_fallback_slot, 1, __ATOMIC_RELAXED));

	pcpu_t_fallback_slot_plus1 = slot + 1;
	return slot;
}

enum pcpu_index pcpu_process_index(void)
{
	globals_init();
	return process_index;
}

enum pcpu_rseq_mode pcpu_rseq_mode(void)
{
	if (pcpu__thread_prepare() != 0)
		return PCPU_RSEQ_FALLBACK;
	return process_mode == PCPU_PROCESS_GLIBC ? PCPU_RSEQ_GLIBC : PCPU_RSEQ_OWN;
}

int pcpu_thread_init(void)
{
	pcpu_init();
	if (process_mode == PCPU_PROCESS_OWN && thread_state == T_EXITED) {
		errno = ESRCH; /* its exit destructor ran: registering again leaks */
		return -1;
	}
	/* Not from an update: here the exit hook may allocate (see
	 * exit_key_signal_safe), so this registers in every case. */
	if (process_mode == PCPU_PROCESS_OWN && thread_state == T_NEW)
		register_own_area();
	if (pcpu__thread_prepare() != 0) {
		/* Fallback for good: pick its fallback slot now, off the path of
		 * its first add. */
		if (!pcpu_t_fallback_slot_plus1)
			(void)pcpu_fallback_slot_assign();
		return PCPU_RSEQ_FALLBACK;
	}
	return process_mode == PCPU_PROCESS_GLIBC ? PCPU_RSEQ_GLIBC : PCPU_RSEQ_OWN;
}

void pcpu_prepare_unload(void)
{
	/* The thread's rseq_cs, in whichever area pcpu uses (glibc's or its
	 * own): after this the kernel has no descriptor of this thread to read.
	 * A relaxed store is enough: only this thread and the kernel, on this
	 * thread's behalf, read it. */
	__atomic_store_n((uint64_t *)(thread_pointer() + pcpu__g.cs_tpoff), 0, __ATOMIC_RELAXED);
}

const char *pcpu_rseq_mode_name(enum pcpu_rseq_mode mode)
{
	switch (mode) {
	case PCPU_RSEQ_GLIBC:
		return "glibc";
	case PCPU_RSEQ_OWN:
		return "own";
	case PCPU_RSEQ_FALLBACK:
		return "fallback";
	}
	return "unknown";
}

int pcpu_rseq_error(void)
{
	if (pcpu__thread_prepare() == 0)
		return 0;
	if (process_mode == PCPU_PROCESS_NONE)
		return process_error;
	if (process_mode == PCPU_PROCESS_GLIBC)
		return ENOSYS; /* glibc's registration failed for this thread */
	return thread_state == T_EXITED ? ESRCH : thread_error;
}

int pcpu_rseq_has_mm_cid(void)
{
	globals_init();
	return has_mm_cid;
}

unsigned pcpu_nslots(void)
{
	pcpu_init();
	return pcpu_slot_count;
}

int pcpu_slot_walked(unsigned slot)
{
	uint32_t n;

	pcpu_init();
	if (slot < pcpu_cpu_slot_count)
		return pcpu_slot_walk_has_cpu(slot);
	if (slot >= pcpu_slot_count)
		return 0;
	/* An owned slot: walked once first claimed (appended to the list). */
	n = __atomic_load_n(&pcpu_walk_count, __ATOMIC_ACQUIRE);
	for (uint32_t i = pcpu_walk_cpu_count; i < n && !pcpu_walk_all; i++)
		if (pcpu_walk_slots[i] == slot)
			return 1;
	return 0;
}
