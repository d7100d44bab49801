// SPDX-License-Identifier: MIT
// pcpu.hpp from 8 threads: every handle type updated concurrently, exact
// totals at the end; set-up errors throw pcpu::error with the C errno; the
// owning types free what they own (the zone no longer knows the handles,
// T's destructor ran as often as its constructor). Built with LeakSanitizer
// (tests/cxx/CMakeLists.txt): anything the wrappers leak fails the run.
#include <pcpu/pcpu.hpp>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#define CHECK(cond)                                                                  \
	do {                                                                         \
		if (!(cond)) {                                                       \
			std::fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
			std::exit(1);                                                \
		}                                                                    \
	} while (0)

namespace {

constexpr int kThreads = 8;
constexpr long kIters = 200000;

std::atomic<long> live_objects{0};

struct tracked {
	long payload[4];
	tracked() : payload{0, 0, 0, 0} { live_objects.fetch_add(1); }
	tracked(long a) : payload{a, 0, 0, 0} { live_objects.fetch_add(1); }
	~tracked() { live_objects.fetch_sub(1); }
};

// A zone object freed by its owner is no live object of its zone any more.
bool zone_live(const void *h)
{
	pcpu_zone_t *z = pcpu_zone_of(h);
	return z && pcpu_zone_object_size(z, h) != 0;
}

void test_errors()
{
	pcpu::registry reg;
	bool thrown = false;
	try {
		reg.counter_family("bad name").make();
	} catch (const pcpu::error &e) {
		thrown = e.code().value() == EINVAL && std::string(e.what()).find("pcpu_registry_family") == 0;
	}
	CHECK(thrown);
	auto f = reg.counter_family("ok_total").labels({"a"}).make();
	CHECK(f.series({"x"}).fetch() == 0);
	thrown = false;
	try {
		reg.gauge_family("ok").make(); // "ok" is the counter's name without _total
	} catch (const pcpu::error &e) {
		thrown = e.code().value() == EEXIST;
	}
	CHECK(thrown);
	thrown = false;
	try {
		pcpu::histogram h(pcpu::histogram_layout::explicit_bounds({3, 2}));
	} catch (const pcpu::error &e) {
		thrown = e.code().value() == EINVAL;
	}
	CHECK(thrown);
	// A sparse histogram reads as a dense one; an unknown flag throws.
	{
		pcpu::histogram sparse(pcpu::histogram_layout::explicit_bounds({10, 100, 1000}), PCPU_HISTOGRAM_SPARSE);
		sparse.record(5);
		sparse.record(5000);
		auto d = sparse.read();
		CHECK(d.count == 2 && d.sum == 5005 && d.counts[0] == 1 && d.counts[3] == 1 && sparse.lost() == 0);
	}
	thrown = false;
	try {
		pcpu::histogram h(pcpu::histogram_layout::explicit_bounds({10}), 0x80);
	} catch (const pcpu::error &e) {
		thrown = e.code().value() == EINVAL;
	}
	CHECK(thrown);
}

} // namespace

// Owned slots: workers that claim add through add()/record() and an array
// view, the others (no slot left) through the same calls as ordinary adds;
// totals exact. A nested pcpu::worker shares the thread's claim and leaves
// it; the outer one releases it; a view needs a claim; EBUSY throws.
void test_workers()
{
	const unsigned max = pcpu_worker_max();
	const int nthreads = static_cast<int>(max) + 2;
	pcpu::counter total;
	pcpu::counter_array flows(4);
	pcpu::histogram sizes(pcpu::histogram_layout::explicit_bounds({10, 100, 1000}));
	std::atomic<int> claimed{0}, busy{0}, arrived{0};
	std::vector<std::thread> ts;

	CHECK(max >= 1);
	for (int t = 0; t < nthreads; t++) {
		ts.emplace_back([&] {
			pcpu::worker held(std::nothrow);
			const pcpu::claim w = held.claim();
			CHECK(w.claimed() == held.claimed() && w.slot() == held.slot());
			if (held.claimed()) {
				claimed.fetch_add(1);
				CHECK(w.slot() >= 0 && pcpu_worker_self().pcpu__off == w.get().pcpu__off);
				{
					pcpu::worker again; // the thread's claim: shared, not released
					CHECK(again.slot() == w.slot());
				}
				CHECK(pcpu_worker_self().pcpu__off == w.get().pcpu__off);
			} else {
				busy.fetch_add(1);
				bool thrown = false;
				try {
					pcpu::worker strict;
				} catch (const pcpu::error &e) {
					thrown = e.code().value() == EBUSY;
				}
				CHECK(thrown);
				thrown = false;
				try {
					(void)w.view(flows);
				} catch (const pcpu::error &e) {
					thrown = e.code().value() == EINVAL;
				}
				CHECK(thrown);
			}
			// Every thread has tried before any releases: exactly
			// `max` claims, the rest EBUSY.
			arrived.fetch_add(1);
			while (arrived.load() < nthreads)
				std::this_thread::yield();
			for (long i = 0; i < kIters; i++) {
				w.add(total, 2);
				w.inc(flows[i % 4]);
				w.record(sizes, i % 2000);
				if (w.claimed() && i % 2 == 0) {
					const pcpu::owned_array v = w.view(flows);
					v.add(i % 4, 1);
				} else {
					flows[i % 4].inc();
				}
			}
		});
	}
	for (auto &th : ts)
		th.join();
	CHECK(claimed.load() == static_cast<int>(max) && busy.load() == 2);
	CHECK(pcpu_worker_self().pcpu__off == 0);
	const long n = nthreads * kIters;
	CHECK(total.fetch() == static_cast<std::uint64_t>(2 * n));
	auto f = flows.fetch_all();
	CHECK(f[0] + f[1] + f[2] + f[3] == static_cast<std::uint64_t>(2 * n));
	CHECK(f[1] == static_cast<std::uint64_t>(2 * nthreads * (kIters / 4)));
	auto d = sizes.read();
	CHECK(d.count == static_cast<std::uint64_t>(n));
	// Every claim was released at its worker's end: all slots free.
	{
		pcpu::worker held;
		CHECK(held.slot() == static_cast<int>(pcpu_nslots() - max));
	}
	CHECK(pcpu_worker_self().pcpu__off == 0);
	std::printf("cxx workers: %u owned slots, %d threads: %d claimed, %d EBUSY; exact\n", max,
		    nthreads, claimed.load(), busy.load());
}

// A registry published from C++ (registry::publish) is read from outside
// by the segment reader, exact after threads counted into it; a bad name
// is refused with the segment layer's message.
static void test_publish()
{
	char dir[] = "/tmp/pcpu-cxx-publish-XXXXXX";
	CHECK(mkdtemp(dir) != nullptr);
	pcpu_segment_options opts{};
	opts.dir = dir;
	{
		pcpu::registry reg;
		bool refused = false;
		try {
			(void)reg.publish("bad/name", &opts);
		} catch (const pcpu::error &e) {
			refused = e.code().value() == EINVAL && std::string(e.what()).find("pcpu_segment_publish: ") == 0;
		}
		CHECK(refused);
		pcpu::segment seg = reg.publish("cxx_api", &opts);
		CHECK(seg && seg.path().find(dir) == 0);
		auto hits = reg.counter_family("hits").labels({"shard", "kind"}).make();
		std::vector<std::thread> ts;
		for (int t = 0; t < 4; t++)
			ts.emplace_back([&, t] {
				auto c = hits.series_named({{"kind", "get"}, {"shard", std::to_string(t % 2)}});
				for (long i = 0; i < kIters; i++)
					c.inc();
			});
		for (auto &t : ts)
			t.join();
		pcpu_reader_t *r = pcpu_reader_open(std::string(seg.path()).c_str(), nullptr);
		CHECK(r != nullptr);
		struct pcpu_reader_snapshot *snap = nullptr;
		CHECK(r && pcpu_reader_snapshot(r, 0, &snap) == 0);
		std::uint64_t total = 0;
		std::size_t nseries = 0;
		for (std::size_t f = 0; snap && f < snap->snapshot.nfamilies; f++) {
			const pcpu_snapshot_family &fam = snap->snapshot.families[f];
			if (std::string(fam.name) != "hits")
				continue;
			CHECK(fam.nlabels == 2 && std::string(fam.label_names[1]) == "kind");
			for (std::size_t i = 0; i < fam.nseries; i++, nseries++) {
				CHECK(std::string(fam.series[i].label_values[1]) == "get");
				CHECK(fam.series[i].value.counter == 2 * kIters);
				total += fam.series[i].value.counter;
			}
		}
		CHECK(nseries == 2 && total == 4 * static_cast<std::uint64_t>(kIters));
		pcpu_reader_snapshot_free(snap);
		pcpu_reader_close(r);
		std::printf("cxx publish: %s read from outside, 2 series, %llu adds exact\n",
			    std::string(seg.path()).c_str(), static_cast<unsigned long long>(total));
	}
	CHECK(rmdir(dir) == 0); // the registry's end removed the segment's file
}

int main()
{
	test_errors();
	test_workers();
	test_publish();

	pcpu_counter_t raw_counter, raw_array;
	pcpu_gauge_t raw_gauge;
	pcpu_counter_t raw_hist;
	const void *raw_group;
	{
		pcpu::registry reg;
		auto requests = reg.counter_family("requests").help("Requests.").labels({"worker"}).make();
		auto depth = reg.gauge_family("depth").make().series();
		auto lat = reg.histogram_family("latency", pcpu::histogram_layout::explicit_bounds({10, 100, 1000}))
				   .labels({"path"})
				   .make();
		pcpu::counter total;
		pcpu::counter_array per_kind(3);
		pcpu::gauge inflight;
		pcpu::histogram sizes(pcpu::histogram_layout::log_linear(4, 1 << 20));
		pcpu::group bytes_pkts(2, 1);
		auto obj = pcpu::ref<tracked>::make(7L);
		pcpu::objcache<tracked> cache(pcpu::objcache<tracked>::options{8, 0});
		raw_counter = total.get();
		raw_array = per_kind.get();
		raw_gauge = inflight.get();
		raw_hist = sizes.get()->pcpu__c;
		raw_group = bytes_pkts.get()->pcpu__primary;
		CHECK(obj->payload[0] == 7);

		std::vector<std::thread> ts;
		for (int t = 0; t < kThreads; t++) {
			ts.emplace_back([&, t] {
				std::string w = std::to_string(t % 4);
				pcpu::counter_ref mine = requests.series({w});
				pcpu::histogram_ref h = lat.series({"/"});
				for (long i = 0; i < kIters; i++) {
					mine.inc();
					total.add(2);
					per_kind[i % 3].inc();
					inflight.inc();
					depth.add(3);
					h.record(i % 2000);
					sizes.record(i);
					bytes_pkts.add2(0, 1, 1500);
					pcpu::ref<tracked>::guard g(obj);
					if (i % 64 == 0) {
						auto o = cache.unique();
						o->payload[1]++;
					}
					inflight.dec();
				}
			});
		}
		for (auto &th : ts)
			th.join();

		const long n = kThreads * kIters;
		CHECK(total.fetch() == static_cast<std::uint64_t>(2 * n));
		auto kinds = per_kind.fetch_all();
		CHECK(kinds.size() == 3);
		CHECK(kinds[0] + kinds[1] + kinds[2] == static_cast<std::uint64_t>(n));
		CHECK(kinds[0] == static_cast<std::uint64_t>(kThreads * ((kIters + 2) / 3)));
		CHECK(inflight.read() == 0);
		CHECK(depth.read() == 3 * n);
		for (int w = 0; w < 4; w++)
			CHECK(requests.series({std::to_string(w)}).fetch() == static_cast<std::uint64_t>(2 * kIters));
		CHECK(requests.size() == 4);
		CHECK(requests.has({"0"}) && !requests.has({"9"}));
		auto hd = lat.series({"/"}).read();
		CHECK(hd.count == static_cast<std::uint64_t>(n));
		CHECK(hd.counts.size() == 4);
		// i % 2000 over 200000 iterations: 100 rounds of 0..1999.
		CHECK(hd.counts[0] == static_cast<std::uint64_t>(kThreads * 100 * 11));
		CHECK(hd.counts[3] == static_cast<std::uint64_t>(kThreads * 100 * 999));
		CHECK(sizes.read().count == static_cast<std::uint64_t>(n));
		auto g = bytes_pkts.read(0);
		CHECK(g.size() == 2 && g[0] == n && g[1] == 1500 * n);
		CHECK(obj.count() == 1); // the owner's, every guard gone
		auto st = cache.stats();
		CHECK(st.gets == st.puts && st.gets == static_cast<std::uint64_t>(kThreads * ((kIters + 63) / 64)));

		std::string text = reg.write();
		CHECK(text.find("requests_total{worker=\"0\"} 400000\n") != std::string::npos);
		CHECK(text.find("latency_count{path=\"/\"} 1600000\n") != std::string::npos);
		CHECK(reg.write(pcpu::format::openmetrics).find("# EOF") != std::string::npos);
		CHECK(requests.remove({"3"}) && !requests.remove({"3"}));

		// Moves leave one owner.
		pcpu::counter moved = std::move(total);
		CHECK(moved.get() == raw_counter && total.get() == nullptr);
		CHECK(zone_live(raw_counter) && zone_live(raw_array) && zone_live(raw_gauge));
		CHECK(zone_live(raw_hist) && zone_live(raw_group));
		CHECK(obj.kill());
		CHECK(live_objects.load() > 1); // obj's T, plus the cache's objects
	}
	// Everything above is released: zone objects freed, every T destroyed
	// (ref's by its last put, the cache's by its destruction).
	CHECK(!zone_live(raw_counter));
	CHECK(!zone_live(raw_array));
	CHECK(!zone_live(raw_gauge));
	CHECK(!zone_live(raw_hist));
	CHECK(!zone_live(raw_group));
	CHECK(live_objects.load() == 0);
	std::printf("cxx api: 8 threads exact, everything released\n");
	return 0;
}
