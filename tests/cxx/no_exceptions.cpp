// SPDX-License-Identifier: MIT
// pcpu.hpp built with -fno-exceptions (issue 38): every set-up failure
// leaves an empty object, sets errno and pcpu::last_error(), and the
// program goes on; what succeeds counts exactly. Run by no_exceptions.sh
// with g++ and clang++; the same source built with exceptions must report
// the same failures by throwing (CHECK_FAILS below).
#include <pcpu/pcpu.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

static int failures = 0;
#define CHECK(cond)                                                                    \
	do {                                                                           \
		if (!(cond)) {                                                         \
			std::fprintf(stderr, "FAILED line %d: %s\n", __LINE__, #cond); \
			failures++;                                                    \
		}                                                                      \
	} while (0)

// make() fails with `err` and a message containing `text`: an empty
// result, errno and last_error() without exceptions; a pcpu::error with
// that code and message with them.
template <typename F> static void check_fails(F make, int err, const char *text, int line)
{
	bool ok;
#if defined(__cpp_exceptions)
	try {
		(void)make();
		ok = false;
	} catch (const pcpu::error &e) {
		ok = e.code().value() == err && std::strstr(e.what(), text) != nullptr;
	}
#else
	errno = 0;
	auto r = make();
	ok = !r && errno == err && pcpu::last_error().code == err &&
	     std::strstr(pcpu::last_error().what.c_str(), text) != nullptr;
#endif
	if (!ok) {
		std::fprintf(stderr, "FAILED line %d: not the failure %d \"%s\" (last: %d \"%s\")\n", line, err, text,
			     pcpu::last_error().code, pcpu::last_error().what.c_str());
		failures++;
	}
}
#define CHECK_FAILS(expr, err, text) check_fails([&] { return expr; }, err, text, __LINE__)

int main()
{
	pcpu::registry reg;
	CHECK(static_cast<bool>(reg));
	// A family with an invalid name, and one whose series is asked wrongly.
	CHECK_FAILS(reg.counter_family("bad name").make(), EINVAL, "pcpu_registry_family");
	auto fam = reg.counter_family("requests").labels({"method", "code"}).make();
	CHECK(static_cast<bool>(fam));
	CHECK_FAILS(fam.series({"GET"}), EINVAL, "takes 2 label values, not 1");
	check_fails([&] { return fam.series_named({{"method", "GET"}}); }, EINVAL, "no value for label \"code\"",
		    __LINE__);
	check_fails([&] { return fam.series_named({{"method", "GET"}, {"code", "200"}, {"verb", "x"}}); }, EINVAL,
		    "has no label \"verb\"", __LINE__);
	check_fails([&] { return fam.series_named({{"method", "GET"}, {"method", "PUT"}}); }, EINVAL,
		    "label given twice", __LINE__);
	CHECK_FAILS(reg.publish("no/slash"), EINVAL, "pcpu_segment_publish");
	pcpu::counter_array arr(2);
	std::uint64_t one[1];
	check_fails([&] { return (arr.fetch_all(pcpu::span<std::uint64_t>(one)), pcpu::counter_ref(nullptr)); }, EINVAL,
		    "smaller", __LINE__);

	// What succeeds counts, by position and by name, from threads.
	auto by_pos = fam.series(std::vector<std::string>{"GET", "200"});
	auto by_name = fam.series_named(std::map<std::string, std::string>{{"code", "200"}, {"method", "GET"}});
	CHECK(by_pos && by_name && by_pos.get() == by_name.get());
	CHECK(fam.label_names() == (std::vector<std::string_view>{"method", "code"}));
	std::vector<std::thread> ts;
	for (int t = 0; t < 4; t++)
		ts.emplace_back([&] {
			for (int i = 0; i < 100000; i++)
				(i & 1 ? by_pos : by_name).inc();
		});
	for (auto &t : ts)
		t.join();
	CHECK(by_pos.fetch() == 400000);
	CHECK(fam.has(std::vector<std::string>{"GET", "200"}));
	CHECK(fam.remove(std::vector<std::string>{"GET", "200"}));
	CHECK(!fam.has({"GET", "200"}));
	std::string text = reg.write();
	CHECK(text.find("# TYPE requests_total counter") != std::string::npos);
	if (failures)
		return 1;
	std::printf("ok: %s\n",
#if defined(__cpp_exceptions)
		    "with exceptions"
#else
		    "-fno-exceptions"
#endif
	);
	return 0;
}
