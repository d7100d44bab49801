// SPDX-License-Identifier: MIT
// Label values as a braced list of name/value pairs, a prometheus-cpp
// user's habit: fam.series({{"method", "GET"}, {"code", "200"}}) is the
// series by name, in any order, never a series made of the bytes between
// two string literals (issue 50: it compiled to std::string's pointer-range
// constructor, {method="method",code="code"}, and AddressSanitizer saw a
// global-buffer-overflow). The same for has() and remove(); unknown,
// repeated and missing names throw pcpu::error EINVAL naming the label; a
// wrong number of values in order throws too (pcpu_family_lookup() and
// remove() read one value per label). label_pairs.sh builds it as C++17
// and C++20 (where a string_view is made of two pointers too) with g++ and
// clang++; label_pairs_bad.cpp holds the forms that must not compile.
#include <pcpu/pcpu.hpp>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#define CHECK(cond)                                                                          \
	do {                                                                                 \
		if (!(cond)) {                                                               \
			std::fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
			std::exit(1);                                                        \
		}                                                                            \
	} while (0)

namespace {

// The message of the pcpu::error that f() throws, or "" when it throws none.
template <typename F> std::string error_of(F f)
{
	try {
		f();
	} catch (const pcpu::error &e) {
		return e.code().value() == EINVAL ? e.what() : std::string("not EINVAL: ") + e.what();
	}
	return "";
}

bool contains(const std::string &s, const char *part) { return s.find(part) != std::string::npos; }

} // namespace

int main()
{
	pcpu::registry reg;
	auto requests = reg.counter_family("requests").labels({"method", "code"}).make();
	auto by_pairs = requests.series({{"method", "GET"}, {"code", "200"}});
	auto reversed = requests.series({{"code", "200"}, {"method", "GET"}});
	auto in_order = requests.series({"GET", "200"});
	CHECK(by_pairs.get() == in_order.get() && reversed.get() == in_order.get());
	CHECK(requests.size() == 1);
	by_pairs.inc();
	reversed.add(2);
	CHECK(in_order.fetch() == 3);
	const std::string method = "PUT", code = "500";
	auto from_strings = requests.series({{"method", method}, {"code", code}});
	from_strings.inc();
	CHECK(requests.series(std::vector<std::string>{"PUT", "500"}).fetch() == 1);
	CHECK(requests.series_named(std::map<std::string, std::string>{{"code", "500"}, {"method", "PUT"}}).fetch() == 1);

	const std::string text = reg.write();
	CHECK(contains(text, "requests_total{method=\"GET\",code=\"200\"} 3\n"));
	CHECK(contains(text, "requests_total{method=\"PUT\",code=\"500\"} 1\n"));
	CHECK(!contains(text, "method=\"method\""));

	CHECK(requests.has({{"code", "200"}, {"method", "GET"}}));
	CHECK(!requests.has({{"code", "404"}, {"method", "GET"}}));
	CHECK(requests.remove({{"method", "PUT"}, {"code", "500"}}));
	CHECK(!requests.has({"PUT", "500"}));
	CHECK(!requests.remove({{"method", "PUT"}, {"code", "500"}}));

	CHECK(contains(error_of([&] { requests.series({{"method", "GET"}, {"verb", "x"}, {"code", "1"}}); }),
		       "has no label \"verb\""));
	CHECK(contains(error_of([&] { requests.series({{"method", "GET"}}); }), "no value for label \"code\""));
	CHECK(contains(error_of([&] { requests.series({{"method", "GET"}, {"method", "PUT"}}); }),
		       "label given twice: \"method\""));
	CHECK(contains(error_of([&] { (void)requests.has({{"code", "200"}}); }), "no value for label \"method\""));
	CHECK(contains(error_of([&] { (void)requests.remove({{"path", "/"}}); }), "has no label \"path\""));
	CHECK(contains(error_of([&] { (void)requests.has({"GET"}); }), "takes 2 label values, not 1"));
	CHECK(contains(error_of([&] { (void)requests.remove({"GET", "200", "x"}); }), "takes 2 label values, not 3"));
	CHECK(contains(error_of([&] { requests.series({"GET"}); }), "takes 2 label values, not 1"));
	CHECK(requests.size() == 1 && in_order.fetch() == 3);

	// No label: the empty list is no values (not an empty list of pairs).
	auto total = reg.counter_family("total").make();
	total.series({}).inc();
	CHECK(total.series().fetch() == 1 && total.has({}) && total.remove({}) && !total.has({}));

	// One label: a single pair is a pair, not two values.
	auto paths = reg.gauge_family("in_flight").labels({"path"}).make();
	paths.series({{"path", "/a"}}).set(4);
	CHECK(paths.series({"/a"}).read() == 4);
	CHECK(contains(error_of([&] { paths.series({"path", "/a"}); }), "takes 1 label values, not 2"));

	std::printf("label pairs: by name in any order, errors named\n");
	return 0;
}
