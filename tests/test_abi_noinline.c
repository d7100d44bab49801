/* A program of the stable tier only (PCPU_NO_INLINE): it must reference no
 * pcpu__ symbol and need no PCPU_LAYOUT_<n> node (checked with nm in
 * tests/CMakeLists.txt), and still count exactly. */
#define PCPU_NO_INLINE 1
#include "check.h"
#include <pcpu/counter.h>
#include <pcpu/gauge.h>
#include <pcpu/group.h>
#include <pcpu/histogram.h>

void noinline_ops(pcpu_counter_t a, size_t n, long rounds);

int main(void)
{
	pcpu_counter_t a = pcpu_counter_alloc_array(4);

	CHECK(a != NULL);
	noinline_ops(a, 4, 1000);
	pcpu_counter_add(a, 1);
	CHECK_EQ_U64(pcpu_counter_fetch(a), 3001);
	CHECK_EQ_U64(pcpu_counter_fetch(pcpu_counter_at(a, 3)), 5000);
	/* Gauges, histograms and groups through the stable tier too. */
	pcpu_gauge_t g = pcpu_gauge_alloc();
	CHECK(g != NULL);
	pcpu_gauge_add(g, 10);
	pcpu_gauge_sub(g, 3);
	pcpu_gauge_inc(g);
	pcpu_gauge_dec(g);
	pcpu_gauge_dec(g);
	CHECK(pcpu_gauge_read(g) == 6);

	static const int64_t bounds[] = { 10, 100 };
	struct pcpu_histogram_layout lay = { PCPU_HISTOGRAM_EXPLICIT, bounds, 2, 0, 0, 0, 0, 0, 0 };
	pcpu_histogram_t *h = pcpu_histogram_create(&lay);
	uint64_t counts[3], count;
	int64_t sum;
	CHECK(h != NULL && pcpu_histogram_nbuckets(h) == 3);
	CHECK(pcpu_histogram_bucket_of(h, 50) == 1);
	pcpu_histogram_record(h, 5);
	pcpu_histogram_record_n(h, 50, 4);
	CHECK(pcpu_histogram_read(h, counts, 3, &count, &sum) == 0);
	CHECK(counts[0] == 1 && counts[1] == 4 && counts[2] == 0 && count == 5 && sum == 205);

	pcpu_group_t *grp = pcpu_group_alloc(2, 3);
	int64_t d[2] = { 1, 1500 }, out[2];
	CHECK(grp != NULL && pcpu_group_members(grp) == 2 && pcpu_group_count(grp) == 3);
	pcpu_group_add(grp, 1, d);
	pcpu_group_add2(grp, 1, 2, 3000);
	CHECK(pcpu_group_read(grp, 1, out) == 0 && out[0] == 3 && out[1] == 4500);
	pcpu_group_free(grp);
	pcpu_histogram_destroy(h);
	CHECK(pcpu_gauge_free(g) == 0);
	printf("stable tier only: exact\n");
	return 0;
}
