// The statistics headers used from C++: the inline hot paths (gauge,
// histogram, group updates) compile as C++ and work, and a registry can be
// filled and written from C++ code.
#include <pcpu/pcpu.h>
#include <pcpu/stats.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#define REQUIRE(c)                                                            \
	do {                                                                  \
		if (!(c)) {                                                   \
			std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c); \
			std::exit(1);                                         \
		}                                                             \
	} while (0)

struct flow_stats {
	struct pcpu_counter pkts;
	struct pcpu_gauge active;
};

int main()
{
	pcpu_registry_t *reg = pcpu_registry_create();
	REQUIRE(reg);

	static const pcpu_stats_field fields[] = {
		PCPU_STATS_COUNTER(flow_stats, pkts, "cxx_packets_total", "Packets."),
		PCPU_STATS_GAUGE(flow_stats, active, "cxx_active", "Active."),
	};
	flow_stats *fs = static_cast<flow_stats *>(
		pcpu_registry_struct(reg, sizeof(flow_stats), fields, 2, 0, nullptr, nullptr));
	REQUIRE(fs);
	pcpu_counter_add(&fs->pkts, 3);
	pcpu_gauge_inc(&fs->active);
	pcpu_gauge_add(&fs->active, 4);

	static const int64_t bounds[] = {10, 100};
	pcpu_histogram_layout layout = {PCPU_HISTOGRAM_EXPLICIT, bounds, 2, 0, 0, 0, 0, 0, 0};
	pcpu_family_desc d = {};
	d.name = "cxx_sizes";
	d.help = "Sizes.";
	d.type = PCPU_METRIC_HISTOGRAM;
	d.histogram = &layout;
	pcpu_histogram_t *h = pcpu_family_histogram(pcpu_registry_family(reg, &d), nullptr);
	REQUIRE(h);
	pcpu_histogram_record(h, 50);
	pcpu_histogram_record_n(h, 500, 2);

	pcpu_group_t *g = pcpu_group_alloc(2, 4);
	REQUIRE(g);
	pcpu_group_add2(g, 3, 1, 1500);
	const int64_t d2[2] = {2, 3000};
	pcpu_group_add(g, 3, d2);
	int64_t v[2];
	REQUIRE(pcpu_group_read(g, 3, v) == 0 && v[0] == 3 && v[1] == 4500);
	pcpu_group_free(g);

	char *out = nullptr;
	size_t len = 0;
	REQUIRE(pcpu_registry_write(reg, PCPU_FORMAT_OPENMETRICS, &out, &len) == 0);
	std::string text(out, len);
	std::free(out);
	REQUIRE(text.find("cxx_packets_total 3\n") != std::string::npos);
	REQUIRE(text.find("cxx_active 5\n") != std::string::npos);
	REQUIRE(text.find("cxx_sizes_bucket{le=\"100.0\"} 1\n") != std::string::npos);
	REQUIRE(text.find("cxx_sizes_count 3\n") != std::string::npos);
	REQUIRE(text.find("cxx_sizes_sum 1050\n") != std::string::npos);
	pcpu_registry_destroy(reg);
	std::printf("C++ use of the statistics headers: ok\n");
	return 0;
}
