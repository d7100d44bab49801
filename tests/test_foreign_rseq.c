/*
 * pcpu never fights a registration made by someone else: run with glibc's
 * rseq disabled (GLIBC_TUNABLES=glibc.pthread.rseq=0), this test registers
 * an rseq area of its own for the main thread first, as another library
 * might. pcpu must leave it alone (its registration fails with EINVAL, the
 * thread uses the exact fallback path) while other threads use pcpu's own
 * registration, and the foreign area keeps working.
 */
#include "check.h"
#include <pcpu/pcpu.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static struct {
	uint32_t cpu_id_start;
	int32_t cpu_id;
	uint64_t rseq_cs;
	uint32_t flags, node_id, mm_cid, pad;
} __attribute__((aligned(32))) foreign = {.cpu_id = -1};

static pcpu_counter_t c;

static void *other_thread(void *arg)
{
	CHECK(pcpu_rseq_mode() == PCPU_RSEQ_OWN);
	for (int i = 0; i < 100000; i++)
		pcpu_counter_inc(c);
	return arg;
}

int main(void)
{
	pthread_t t;

	CHECK(syscall(SYS_rseq, &foreign, sizeof(foreign), 0, 0x53053053) == 0);
	CHECK(foreign.cpu_id >= 0);

	c = pcpu_counter_alloc();
	CHECK(c != NULL);
	CHECK(pcpu_rseq_mode() == PCPU_RSEQ_FALLBACK);
	/* The kernel answers EINVAL to a second, different area. */
	CHECK(pcpu_rseq_error() == EINVAL);
	for (int i = 0; i < 100000; i++)
		pcpu_counter_inc(c);
	CHECK(pthread_create(&t, NULL, other_thread, NULL) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	CHECK_EQ_U64(pcpu_counter_fetch(c), 200000);

	/* The foreign registration is intact: still ours, still updated. */
	errno = 0;
	CHECK(syscall(SYS_rseq, &foreign, sizeof(foreign), 0, 0x53053053) == -1 && errno == EBUSY);
	CHECK(foreign.cpu_id >= 0 && foreign.cpu_id < (int32_t)pcpu_nslots());
	printf("test_foreign_rseq: ok (pcpu fell back with EINVAL, foreign area intact)\n");
	return 0;
}
