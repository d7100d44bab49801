// prometheus-cpp's Histogram::Observe, measured by bench/stats_bench.c in
// the same run as pcpu's histogram record (issue 11's comparison). Only
// built where the Debian package prometheus-cpp-dev is installed. The loop
// lives here, beside the call, so that a cross-language call per value does
// not count against prometheus-cpp.
#include <prometheus/histogram.h>

#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" {

void *promcpp_histogram_new(const double *bounds, size_t n)
{
	return new prometheus::Histogram(std::vector<double>(bounds, bounds + n));
}

// Observes vals[i & mask] for i < n; returns the count, read back.
uint64_t promcpp_observe_loop(void *h, const double *vals, size_t mask, uint64_t n)
{
	auto *hist = static_cast<prometheus::Histogram *>(h);

	for (uint64_t i = 0; i < n; i++)
		hist->Observe(vals[i & mask]);
	return hist->Collect().histogram.sample_count;
}

}
