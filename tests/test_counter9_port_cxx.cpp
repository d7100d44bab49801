// counter(9) fidelity in C++ (-std=c++11 -pedantic -Werror): the same idioms
// as test_counter9_port.c -- static and global early counters, a statistics
// array with per-field macros, SYSCTL_COUNTER_U64 at file scope, the rate
// API, fetch-and-zero of arrays, zpcpu accessors, CPU_FOREACH -- compile
// and count.
#define PCPU_COUNTER9_KERNEL_CLOCK /* ticks and hz, as ported code uses them */
#include <sys/counter.h>
#include <sys/smp.h>
#include <pcpu/counter9_sysctl.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#define CHECK(c)                                                                    \
	do {                                                                        \
		if (!(c)) {                                                         \
			std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, \
				     __LINE__, #c);                                 \
			std::exit(1);                                               \
		}                                                                   \
	} while (0)

struct tcpstat {
	uint64_t tcps_connattempt;
	uint64_t tcps_accepts;
	uint64_t tcps_drops;
};
#define TCPSTAT_N (sizeof(struct tcpstat) / sizeof(uint64_t))
static counter_u64_t tcpstat[TCPSTAT_N];
#define TCPSTAT_INC(name) \
	counter_u64_add(tcpstat[offsetof(struct tcpstat, name) / sizeof(uint64_t)], 1)
static_assert(sizeof(uint64_t) == sizeof(**(tcpstat)), "counter(9) word");

static COUNTER_U64_DEFINE_EARLY(tcp_early_static);
COUNTER_U64_DEFINE_EARLY(tcp_early_global);
SYSCTL_COUNTER_U64_ARRAY(_net_inet_tcp, OID_AUTO, stats, CTLFLAG_RW, tcpstat, TCPSTAT_N, "TCP");

namespace {
struct counter_rate *log_rate;
}

int main()
{
	const int threads = 8, each = 100000;
	std::vector<std::thread> t;
	struct tcpstat snap;

	CHECK(tcp_early_static != EARLY_COUNTER && tcp_early_global != EARLY_COUNTER);
	COUNTER_ARRAY_ALLOC(tcpstat, TCPSTAT_N, M_WAITOK);
	log_rate = counter_rate_alloc(M_WAITOK, 1);
	CHECK(log_rate != nullptr);
	for (int i = 0; i < threads; i++)
		t.emplace_back([] {
			for (int k = 0; k < each; k++) {
				TCPSTAT_INC(tcps_connattempt);
				if (k % 2)
					TCPSTAT_INC(tcps_accepts);
				counter_u64_add(tcp_early_static, 2);
				(void)counter_ratecheck(log_rate, 1000);
			}
		});
	for (auto &th : t)
		th.join();
	CHECK(COUNTER_ARRAY_FETCH_AND_ZERO(tcpstat, &snap, TCPSTAT_N) == 0);
	CHECK(snap.tcps_connattempt == (uint64_t)threads * each);
	CHECK(snap.tcps_accepts == (uint64_t)threads * each / 2);
	CHECK(counter_u64_fetch(tcpstat[0]) == 0);
	CHECK(counter_u64_fetch(tcp_early_static) == (uint64_t)threads * each * 2);
	CHECK(counter_rate_get(log_rate) <= (uint64_t)threads * each);
	pcpu_registry_t *reg = pcpu_registry_create();
	CHECK(reg && pcpu_counter9_sysctl_attach(reg) == 1);
	TCPSTAT_INC(tcps_drops);
	CHECK(*zpcpu_get_cpu(tcpstat[2], 0) + counter_u64_fetch(tcpstat[2]) >= 1);
	// Every CPU's word, walked as FreeBSD code walks them: the sum is the
	// value (adds made with rseq only: pcpu/counter9.h).
	counter_u64_t walked = counter_u64_alloc(M_WAITOK);
	uint64_t sum = 0, seeded = 0;
	int cpu, n = 0;
	CPU_FOREACH(cpu) { // the CPUs that are not absent (sys/smp.h)
		*zpcpu_get_cpu(walked, cpu) = (uint64_t)cpu + 1;
		seeded += (uint64_t)cpu + 1;
		n++;
	}
	CHECK(n == mp_ncpus && (unsigned)n <= mp_maxid + 1);
	counter_u64_add(walked, 5);
	CPU_FOREACH(cpu)
		sum += *zpcpu_get_cpu(walked, cpu);
	CHECK(counter_u64_fetch(walked) == seeded + 5);
	CHECK(sum == counter_u64_fetch(walked) || pcpu_rseq_mode() == PCPU_RSEQ_FALLBACK);
	counter_u64_free(walked);
	counter_rate_free(log_rate);
	/* The kernel's clock: ticks advance hz per second, and a struct
	 * counter_rate initialised the old way works with it. */
	struct counter_rate cr;
	std::memset(&cr, 0, sizeof cr);
	cr.cr_rate = counter_u64_alloc(M_WAITOK);
	cr.cr_ticks = ticks;
	CHECK(hz == 1000 && ticks - cr.cr_ticks >= 0 && ticks - cr.cr_ticks < hz);
	CHECK(counter_ratecheck(&cr, 1) == 0);
	CHECK(counter_ratecheck(&cr, 1) == -1);
	counter_u64_free(cr.cr_rate);
	std::printf("test_counter9_port_cxx: ok\n");
	return 0;
}
