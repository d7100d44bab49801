// SPDX-License-Identifier: MIT
// The C++ shapes of shapes.hpp from two units (a.cpp, b.cpp), from 3
// threads, with sections aborted by the injection (inject.h): every value
// exact, and in the rseq modes some sections aborted (and restarted).
// Usage: link_matrix_cxx [ROUNDS]   (exit 0: exact)
#include "shapes.hpp"
#include "inject.h"

#include <atomic>
#include <cstdio>
#include <prometheus/registry.h>
#include <thread>
#include <vector>

int main(int argc, char **argv)
{
	const long rounds = argc > 1 ? std::atol(argv[1]) : 20000;
	const int nthreads = 3;
	pcpu::counter requests;
	pcpu::histogram latency(pcpu::histogram_layout::explicit_bounds({5, 10, 100}));
	prometheus::Registry reg;
	auto &calls = prometheus::BuildCounter().Name("calls_total").Help("h").Register(reg).Add({});
	auto &seconds = prometheus::BuildHistogram().Name("seconds").Help("h").Register(reg).Add(
		{}, prometheus::Histogram::BucketBoundaries{0.1, 1});
	everything e{{requests.ref(), latency}, calls, seconds};
	std::atomic<unsigned long> aborts{0};
	std::vector<std::thread> ts;

	for (int t = 0; t < nthreads; t++)
		ts.emplace_back([&] {
			inject_arm(30);
			rounds_a(e, rounds);
			rounds_b(e, rounds);
			aborts += pcpu__test_inject_aborts;
		});
	for (auto &t : ts)
		t.join();
	const long n = 2 * rounds * nthreads;
	const auto lat = latency.read();
	const auto sec = seconds.Collect().histogram;
	const bool ok = requests.fetch() == static_cast<std::uint64_t>(12 * n) &&
			lat.count == static_cast<std::uint64_t>(n) && lat.sum == 7 * n &&
			calls.Value() == static_cast<double>(n) && sec.sample_count == static_cast<std::uint64_t>(n) &&
			sec.sample_sum == 0.25 * static_cast<double>(n);
	const bool rseq = pcpu_rseq_mode() != PCPU_RSEQ_FALLBACK;
	std::printf("%s: %ld rounds, requests %llu (want %ld), %lu sections aborted (mode %s)\n",
		    ok && (aborts > 0 || !rseq) ? "ok" : "FAILED", n,
		    static_cast<unsigned long long>(requests.fetch()), 12 * n, aborts.load(),
		    pcpu_rseq_mode_name(pcpu_rseq_mode()));
	return ok && (aborts > 0 || !rseq) ? 0 : 1;
}
