// SPDX-License-Identifier: MIT
// What ordinary C++ puts around a pcpu hot path, in a header that two
// translation units include (tests/cxx/link_matrix.sh): each function here
// may be emitted out of line in both, as a COMDAT copy the linker keeps
// one of. Every rseq section in it must go with the copy that is kept, and
// an abort must land in that copy (issue 38: "defined in discarded section
// ... __rseq_exit_point_array" at -O0, and at -O2 for some shapes).
#ifndef PCPU_LINK_MATRIX_SHAPES_HPP
#define PCPU_LINK_MATRIX_SHAPES_HPP

#include <cstdint>
#include <pcpu/pcpu.hpp>
#include <prometheus/counter.h>
#include <prometheus/histogram.h>

// A class with members defined in the class: inline.
struct request_stats {
	pcpu::counter_ref requests;
	const pcpu::histogram &latency;

	void count() { requests.inc(); }
	void on_request(std::int64_t us)
	{
		requests.inc();
		latency.record(us);
	}
};

// An inline free helper.
inline void add_bytes(pcpu::counter_ref c, std::int64_t n) { c.add(n); }

// A template with a loop.
template <typename Ref> void add_each(Ref c, int n)
{
	for (int i = 0; i < n; i++)
		c.inc();
}

// A lambda, called twice.
inline void lambda_adds(pcpu::counter_ref c)
{
	auto add = [c](int k) { c.add(k); };
	add(2);
	add(3);
}

// An RAII timer observing into the prometheus-cpp layer at scope exit.
class scope_timer {
public:
	explicit scope_timer(prometheus::Histogram &h) : h_(h) {}
	~scope_timer() { h_.Observe(0.25); }
	scope_timer(const scope_timer &) = delete;
	scope_timer &operator=(const scope_timer &) = delete;

private:
	prometheus::Histogram &h_;
};

struct everything {
	request_stats stats;
	prometheus::Counter &calls;
	prometheus::Histogram &seconds;
};

// One round of every shape: requests += 12, latency gets one 7, calls += 1,
// seconds gets one 0.25.
inline void every_shape(everything &e)
{
	scope_timer t(e.seconds);
	e.stats.count();
	e.stats.on_request(7);
	add_bytes(e.stats.requests, 2);
	add_each(e.stats.requests, 3);
	lambda_adds(e.stats.requests);
	e.calls.Increment();
}

// Defined in a.cpp and b.cpp, each calling every shape `rounds` times.
void rounds_a(everything &e, long rounds);
void rounds_b(everything &e, long rounds);

#endif
