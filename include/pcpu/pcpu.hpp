// SPDX-License-Identifier: MIT
/**
 * @file pcpu/pcpu.hpp
 * pcpu for C++17: owning, move-only types over the C API (pcpu/pcpu.h),
 * header-only, in namespace `pcpu`.
 *
 *     pcpu::registry reg;                                  // owns its zone
 *     auto requests = reg.counter_family("http_requests")
 *                         .help("Requests served.")
 *                         .labels({"method", "code"})
 *                         .make();
 *     pcpu::counter_ref get200 = requests.series({"GET", "200"});  // keep it
 *     get200.inc();                         // the C inline add, nothing more
 *     std::string text = reg.write();       // Prometheus text format 0.0.4
 *
 * Error policy, one for the whole header: every operation that sets
 * something up -- a constructor that allocates, a registration, a series
 * lookup that may create, an exposition -- throws pcpu::error (a
 * std::system_error carrying the C call's errno, and pcpu_stats_error()'s
 * message where the statistics layer gave one) or std::bad_alloc from the
 * C++ library. Everything on a hot path -- add, inc, record, group add,
 * ref get/put, cache get/put -- and every read never throws and compiles to
 * the C inline function it wraps: the objects hold the C handle and nothing
 * else, so a loop of `c.inc()` is the loop of pcpu_counter_inc(c)
 * (bench/insn_loops.cpp, counted by bench/loop_insns.py). Exceptions fit
 * set-up (rare, and a failure there is the caller's to handle once) and
 * cost nothing on the paths that never fail; an expected-style return would
 * put a branch on every caller for errors that cannot occur there.
 * Without exceptions (-fno-exceptions; __cpp_exceptions undefined) the
 * same operations do not throw: a set-up that fails leaves an empty object
 * -- a registry, counter, family or series handle whose `explicit operator
 * bool` is false -- sets errno, and records the error that would have been
 * thrown in pcpu::last_error() (the calling thread's), where the program
 * checks it once after set-up; reads that fail return an empty value
 * (an empty string, vector or histogram_data). An empty object's own
 * hot path must not be called (it is the C API's NULL handle); destroying
 * or moving it is fine. Allocation failures inside the C++ standard library
 * (a std::string, a std::vector) terminate the program in such builds, as
 * they do for every C++ library built so. ctest cxx_no_exceptions builds
 * and runs this mode with g++ and clang++.
 * The hot paths are not declared noexcept, though they never throw: the C
 * functions they reach (a slow path's call) are not known to the compiler
 * not to, and a noexcept wrapper makes clang add a std::terminate landing
 * pad the C loop has not. Everything else that cannot fail is noexcept.
 *
 * Ownership: types named after a C object (counter, gauge, histogram,
 * group, registry, ref<T>, objcache<T>) own it and free it in their
 * destructor; they move, never copy. `*_ref` types (counter_ref, gauge_ref,
 * histogram_ref, group_ref) are copyable views of an object someone else
 * owns -- a registry's series, an owning object -- valid as long as the C
 * handle is (pcpu/stats.h: until its series, family or registry goes).
 *
 * Integers: every value (an add, a gauge's set, a histogram's observation)
 * is a 64-bit integer, in a unit the program chooses (microseconds, bytes;
 * a family's scale_exp10 shows it in seconds). A floating-point argument
 * -- h.record(0.0123), g.set(0.75) -- would be truncated silently (to 0
 * there), so it does not compile: a static_assert names the call and says
 * what to pass instead (ctest cxx_no_float).
 *
 * Thread safety and cost are the C functions' (see each C header): the
 * wrappers add no locks and no allocation except where said (label values
 * are copied into NUL-terminated strings for the C call at set-up).
 * Needs C++17 (std::string_view); compiled with -std=c++17 -Wall -Wextra
 * -Werror by g++ and clang++ in the tests (C++14 is not supported).
 */
#ifndef PCPU_PCPU_HPP
#define PCPU_PCPU_HPP

#include <pcpu/pcpu.h>
#include <pcpu/stats.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

/* The wrappers of inline hot paths are always inlined, as the C functions
 * they call are: compilers otherwise weigh the C body's size (clang kept
 * histogram_ref::record() out of line). */
#define PCPU_CXX_HOT __attribute__((always_inline))

/* Whether this unit is compiled with exceptions (see "Error policy"). */
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
#define PCPU_CXX_EXCEPTIONS 1
#define PCPU_CXX_NORETURN_IF_THROWING [[noreturn]]
#else
#define PCPU_CXX_EXCEPTIONS 0
#define PCPU_CXX_NORETURN_IF_THROWING
#endif

/* Declares `method` for floating-point arguments, so that a double picks it
 * over the integer overload (an exact match beats a conversion) and the
 * static_assert stops the build with `why` (see "Integers" above). */
#define PCPU_CXX_NO_FLOAT(method, why)                                                    \
	template <typename... A,                                                         \
		  typename std::enable_if<::pcpu::detail::any_floating<A...>::value, int>::type = 0> \
	void method(A &&...) const                                                       \
	{                                                                                \
		static_assert(!::pcpu::detail::any_floating<A...>::value, why);             \
	}
#define PCPU_CXX_NO_FLOAT_COUNT(method)                                                   \
	PCPU_CXX_NO_FLOAT(method, "pcpu: " #method "() takes an integer (a count, bytes, "  \
				  "a time in your unit): a double would be truncated; "     \
				  "pass std::llround(x * 1e6) for microseconds, say")
#define PCPU_CXX_NO_FLOAT_OBSERVATION(method)                                             \
	PCPU_CXX_NO_FLOAT(method, "pcpu: " #method "() takes an integer in the histogram's " \
				  "unit: a double would be truncated (0.0123 s records 0); "   \
				  "record std::llround(seconds * 1e6) microseconds, and give " \
				  "the family scale_exp10 = -6 to expose seconds")

namespace pcpu {

/** What every set-up failure throws: errno as the error code, and the C
 * function's name plus pcpu_stats_error()'s message (when it has one) in
 * what(). */
class error : public std::system_error {
public:
	error(int err, const std::string &what) : std::system_error(err, std::generic_category(), what) {}
};

/** The calling thread's last set-up failure (see "Error policy"): code 0
 * and an empty message until one happens. Recorded in both modes; without
 * exceptions it is the only report besides errno. Valid until the thread's
 * next failure. */
struct failure {
	int code = 0;	  /**< the errno value */
	std::string what; /**< the C function's name and its message */
};

namespace detail {
/** Whether any of A is a floating-point type (see "Integers" above). */
template <typename... A> struct any_floating : std::false_type {};
template <typename T, typename... A>
struct any_floating<T, A...>
	: std::integral_constant<bool, std::is_floating_point<typename std::decay<T>::type>::value ||
					       any_floating<A...>::value> {};

/* One per thread in the whole program: default visibility, so that a
 * shared library built with -fvisibility=hidden that reports through it
 * (libpcpu-prometheus-pull's pcpu::exposer) shares the program's. */
__attribute__((visibility("default"))) inline failure &last_failure_slot() noexcept
{
	static thread_local failure f;
	return f;
}

/** Reports set-up failure `err` described by `what`: throws pcpu::error
 * with exceptions; without, records it for pcpu::last_error(), sets errno
 * and returns, the caller then returning its empty value. */
PCPU_CXX_NORETURN_IF_THROWING inline void fail(int err, std::string what)
{
	failure &f = last_failure_slot();
	f.code = err;
	f.what = what;
	errno = err;
#if PCPU_CXX_EXCEPTIONS
	throw error(err, what);
#endif
}

/** fail() for the C call `func` that just failed, from errno (and
 * pcpu_stats_error()'s message where the statistics layer gave one). */
PCPU_CXX_NORETURN_IF_THROWING inline void throw_errno(const char *func, bool stats_message = false)
{
	int err = errno ? errno : EINVAL;
	std::string what(func);
	if (stats_message) {
		const char *m = pcpu_stats_error();
		if (m && *m) {
			what += ": ";
			what += m;
		}
	}
	fail(err, std::move(what));
}
/**
 * One label name or value of a braced list (`{"GET", "200"}`): made from
 * one argument that converts to std::string_view (a string literal, a
 * std::string, a string_view), never from two. A std::string or a C++20
 * string_view is also made from two pointers, the range between them, so
 * a braced list of std::string or string_view takes the name/value pair
 * `{"method", "GET"}` for one string made of whatever lies between the two
 * literals (issue 50: it compiled, and read out of bounds). With this
 * element type a pair is no element: it selects the by-name overload where
 * there is one, and does not compile where there is none.
 */
struct label_text {
	template <typename S, typename = std::enable_if_t<std::is_convertible_v<const S &, std::string_view>>>
	label_text(const S &s) : view(s)
	{
	}
	std::string_view view;
};
/** A name/value pair of a braced list: {"method", "GET"}. */
using label_pair = std::pair<std::string_view, std::string_view>;
/** The overloads taking a braced list of pairs are templates whose element
 * type defaults to label_pair (a braced pair deduces nothing) and must be
 * it: an element deduced from a plain value ("GET": const char *) drops
 * the overload, and an empty list `{}` goes to the non-template overload
 * of values. */
template <typename P> using if_label_pair = std::enable_if_t<std::is_same_v<P, label_pair>, int>;
/** Always false, for a static_assert in a template that must not be used. */
template <typename> inline constexpr bool dependent_false = false;
/** NUL-terminated copies of string_views for a C call that wants
 * `const char *const *`. */
class cstrings {
public:
	explicit cstrings(std::initializer_list<label_text> v) : cstrings(v.begin(), v.size()) {}
	cstrings(const std::string_view *v, std::size_t n)
	{
		own_.reserve(n);
		ptrs_.reserve(n);
		for (std::size_t i = 0; i < n; i++)
			own_.emplace_back(v[i]);
		for (const std::string &s : own_)
			ptrs_.push_back(s.c_str());
	}
	cstrings(const label_text *v, std::size_t n)
	{
		own_.reserve(n);
		ptrs_.reserve(n);
		for (std::size_t i = 0; i < n; i++)
			own_.emplace_back(v[i].view);
		for (const std::string &s : own_)
			ptrs_.push_back(s.c_str());
	}
	cstrings(const std::vector<std::string> &v) : cstrings(static_cast<const std::string_view *>(nullptr), 0)
	{
		for (const std::string &s : v)
			ptrs_.push_back(s.c_str());
	}
	const char *const *data() const noexcept { return ptrs_.empty() ? nullptr : ptrs_.data(); }
	unsigned size() const noexcept { return static_cast<unsigned>(ptrs_.size()); }

private:
	std::vector<std::string> own_;
	std::vector<const char *> ptrs_;
};
} // namespace detail

/** The calling thread's last set-up failure (see "Error policy" above). */
inline const failure &last_error() noexcept { return detail::last_failure_slot(); }

/** A view of `n` contiguous T: what the C API takes as pointer and length
 * (std::span is C++20). Built from a pointer and length, a C array, a
 * or a std::vector. */
template <typename T> class span {
public:
	constexpr span() noexcept = default;
	constexpr span(T *p, std::size_t n) noexcept : p_(p), n_(n) {}
	template <std::size_t N> constexpr span(T (&a)[N]) noexcept : p_(a), n_(N) {}
	template <typename U, typename = std::enable_if_t<std::is_same_v<std::remove_const_t<T>, U>>>
	span(std::vector<U> &v) noexcept : p_(v.data()), n_(v.size()) {}
	template <typename U, typename = std::enable_if_t<std::is_const_v<T> && std::is_same_v<std::remove_const_t<T>, U>>>
	span(const std::vector<U> &v) noexcept : p_(v.data()), n_(v.size()) {}
	constexpr T *data() const noexcept { return p_; }
	constexpr std::size_t size() const noexcept { return n_; }
	constexpr T &operator[](std::size_t i) const noexcept { return p_[i]; }
	constexpr T *begin() const noexcept { return p_; }
	constexpr T *end() const noexcept { return p_ + n_; }

private:
	T *p_ = nullptr;
	std::size_t n_ = 0;
};

/* ---- handles ------------------------------------------------------------ */

/* Every metric comes as a view (`counter_ref`: copyable, owns nothing) and
 * an owner (`counter`: move-only, frees the C object), with the same
 * operations. One template holds each shape: the operations are written
 * once per metric (detail::counter_ops<Handle>, ...) over a handle that is
 * either a view or an owner (detail::view_handle, detail::owned_handle);
 * the public classes only add their constructors and ref(). */
namespace detail {
/** A C handle borrowed: copyable, never freed. */
template <typename H> class view_handle {
public:
	explicit view_handle(H h) noexcept : h_(h) {}
	/** False for an empty handle (a failed set-up without exceptions). */
	explicit operator bool() const noexcept { return h_ != nullptr; }
	H get() const noexcept { return h_; }

private:
	H h_;
};

/** A C handle owned: move-only, Free::free(h) at destruction unless
 * empty (moved from, or a failed set-up without exceptions). */
template <typename H, typename Free> class owned_handle {
public:
	explicit owned_handle(H h) noexcept : h_(h) {}
	owned_handle(owned_handle &&o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
	owned_handle &operator=(owned_handle &&o) noexcept
	{
		if (this != &o) {
			reset();
			h_ = std::exchange(o.h_, nullptr);
		}
		return *this;
	}
	owned_handle(const owned_handle &) = delete;
	owned_handle &operator=(const owned_handle &) = delete;
	~owned_handle() { reset(); }
	/** False for an empty handle (a failed set-up without exceptions). */
	explicit operator bool() const noexcept { return h_ != nullptr; }
	H get() const noexcept { return h_; }

private:
	void reset() noexcept
	{
		if (h_)
			Free::free(h_);
		h_ = nullptr;
	}
	H h_;
};

struct free_counter {
	static void free(pcpu_counter_t c) noexcept { (void)pcpu_counter_free(c); }
};
struct free_gauge {
	static void free(pcpu_gauge_t g) noexcept { (void)pcpu_gauge_free(g); }
};
struct free_histogram {
	static void free(pcpu_histogram_t *h) noexcept { pcpu_histogram_destroy(h); }
};
struct free_group {
	static void free(pcpu_group_t *g) noexcept { pcpu_group_free(g); }
};

/** A counter's operations (pcpu/counter.h) over handle H. */
template <typename H> class counter_ops : public H {
public:
	using H::H;
	/** pcpu_counter_add(): one rseq add on this CPU's slot. */
	PCPU_CXX_HOT void add(std::int64_t v) const { pcpu_counter_add(this->get(), v); }
	PCPU_CXX_NO_FLOAT_COUNT(add)
	/** pcpu_counter_inc(). */
	PCPU_CXX_HOT void inc() const { pcpu_counter_inc(this->get()); }
	/** pcpu_counter_add_atomic(): for a counter shared with other processes. */
	PCPU_CXX_HOT void add_atomic(std::int64_t v) const { pcpu_counter_add_atomic(this->get(), v); }
	PCPU_CXX_NO_FLOAT_COUNT(add_atomic)
	/** pcpu_counter_fetch(): the sum of the slots (modulo 2^64). */
	std::uint64_t fetch() const noexcept { return pcpu_counter_fetch(this->get()); }
	/** pcpu_counter_zero(). */
	void zero() const noexcept { pcpu_counter_zero(this->get()); }
};
} // namespace detail

/* ---- counters ---------------------------------------------------------- */

/** A copyable view of a counter (pcpu/counter.h) owned elsewhere. */
class counter_ref : public detail::counter_ops<detail::view_handle<pcpu_counter_t>> {
public:
	explicit counter_ref(pcpu_counter_t c) noexcept : counter_ops(c) {}
};

/** An owning counter (pcpu_counter_alloc() / pcpu_counter_free()). */
class counter : public detail::counter_ops<detail::owned_handle<pcpu_counter_t, detail::free_counter>> {
public:
	/** Allocates a zeroed counter in the default zone; throws pcpu::error. */
	counter() : counter_ops(pcpu_counter_alloc())
	{
		if (!get())
			detail::throw_errno("pcpu_counter_alloc");
	}
	/** Allocates it in `zone` (pcpu_counter_alloc_in()). */
	explicit counter(pcpu_zone_t *zone) : counter_ops(pcpu_counter_alloc_in(zone, 1))
	{
		if (!get())
			detail::throw_errno("pcpu_counter_alloc_in");
	}
	counter_ref ref() const noexcept { return counter_ref(get()); }
};

/** `n` owning counters in one allocation (pcpu_counter_alloc_array()):
 * element i with operator[], all read at once with fetch_all(). */
class counter_array {
public:
	explicit counter_array(std::size_t n) : c_(pcpu_counter_alloc_array(n)), n_(n)
	{
		if (!c_) {
			n_ = 0;
			detail::throw_errno("pcpu_counter_alloc_array");
		}
	}
	counter_array(counter_array &&o) noexcept : c_(std::exchange(o.c_, nullptr)), n_(std::exchange(o.n_, 0)) {}
	counter_array &operator=(counter_array &&o) noexcept
	{
		if (this != &o) {
			if (c_)
				pcpu_counter_free(c_);
			c_ = std::exchange(o.c_, nullptr);
			n_ = std::exchange(o.n_, 0);
		}
		return *this;
	}
	counter_array(const counter_array &) = delete;
	counter_array &operator=(const counter_array &) = delete;
	~counter_array()
	{
		if (c_)
			pcpu_counter_free(c_);
	}
	std::size_t size() const noexcept { return n_; }
	/** Counter i (i < size(), unchecked as in C). */
	PCPU_CXX_HOT counter_ref operator[](std::size_t i) const { return counter_ref(pcpu_counter_at(c_, i)); }
	/** pcpu_counter_fetch_array() into out; pcpu::error EINVAL (out
	 * untouched) when out.size() < size(). */
	void fetch_all(span<std::uint64_t> out) const
	{
		if (out.size() < n_) {
			detail::fail(EINVAL, "pcpu_counter_fetch_array: output smaller than the array");
			return;
		}
		(void)pcpu_counter_fetch_array(c_, n_, out.data());
	}
	std::vector<std::uint64_t> fetch_all() const
	{
		std::vector<std::uint64_t> v(n_);
		fetch_all(span<std::uint64_t>(v));
		return v;
	}
	/** False for an empty handle (a failed set-up without exceptions). */
	explicit operator bool() const noexcept { return c_ != nullptr; }
	pcpu_counter_t get() const noexcept { return c_; }

private:
	pcpu_counter_t c_;
	std::size_t n_;
};

/* ---- gauges -------------------------------------------------------------- */

namespace detail {
/** A gauge's operations (pcpu/gauge.h) over handle H. */
template <typename H> class gauge_ops : public H {
public:
	using H::H;
	PCPU_CXX_HOT void add(std::int64_t v) const { pcpu_gauge_add(this->get(), v); }
	PCPU_CXX_NO_FLOAT_COUNT(add)
	PCPU_CXX_HOT void sub(std::int64_t v) const { pcpu_gauge_sub(this->get(), v); }
	PCPU_CXX_NO_FLOAT_COUNT(sub)
	PCPU_CXX_HOT void inc() const { pcpu_gauge_inc(this->get()); }
	PCPU_CXX_HOT void dec() const { pcpu_gauge_dec(this->get()); }
	/** pcpu_gauge_set() (a striped lock: not a hot path; never fails on a
	 * valid gauge). */
	void set(std::int64_t v) const noexcept { (void)pcpu_gauge_set(this->get(), v); }
	PCPU_CXX_NO_FLOAT_COUNT(set)
	std::int64_t read() const noexcept { return pcpu_gauge_read(this->get()); }
};
} // namespace detail

/** A copyable view of a gauge (pcpu/gauge.h) owned elsewhere. */
class gauge_ref : public detail::gauge_ops<detail::view_handle<pcpu_gauge_t>> {
public:
	explicit gauge_ref(pcpu_gauge_t g) noexcept : gauge_ops(g) {}
};

/** An owning gauge (pcpu_gauge_alloc() / pcpu_gauge_free()). */
class gauge : public detail::gauge_ops<detail::owned_handle<pcpu_gauge_t, detail::free_gauge>> {
public:
	/** Allocates a zeroed gauge in the default zone; throws pcpu::error. */
	gauge() : gauge_ops(pcpu_gauge_alloc())
	{
		if (!get())
			detail::throw_errno("pcpu_gauge_alloc");
	}
	gauge_ref ref() const noexcept { return gauge_ref(get()); }
};

/* ---- histograms -------------------------------------------------------- */

/** A bucket layout (struct pcpu_histogram_layout) built by name. It keeps
 * its own copy of explicit bounds. */
class histogram_layout {
public:
	/** Explicit inclusive upper bounds (strictly increasing) plus +Inf. */
	static histogram_layout explicit_bounds(span<const std::int64_t> bounds)
	{
		histogram_layout l;
		l.bounds_.assign(bounds.begin(), bounds.end());
		l.l_.scheme = PCPU_HISTOGRAM_EXPLICIT;
		return l;
	}
	static histogram_layout explicit_bounds(std::initializer_list<std::int64_t> bounds)
	{
		return explicit_bounds(span<const std::int64_t>(bounds.begin(), bounds.size()));
	}
	/** Log-linear: relative precision 2^-bits up to max_value. */
	static histogram_layout log_linear(unsigned precision_bits, std::int64_t max_value) noexcept
	{
		histogram_layout l;
		l.l_.scheme = PCPU_HISTOGRAM_LOG_LINEAR;
		l.l_.precision_bits = precision_bits;
		l.l_.max_value = max_value;
		return l;
	}
	/** Exponential (native histogram) buckets, base 2^(2^-schema), bounds
	 * in value * 10^scale_exp10. */
	static histogram_layout exponential(int schema, int scale_exp10 = 0) noexcept
	{
		histogram_layout l;
		l.l_.scheme = PCPU_HISTOGRAM_EXPONENTIAL;
		l.l_.schema = schema;
		l.l_.scale_exp10 = scale_exp10;
		return l;
	}
	/** The C layout; valid while this object lives unmoved. */
	const pcpu_histogram_layout *c_layout() noexcept
	{
		l_.bounds = bounds_.empty() ? nullptr : bounds_.data();
		l_.nbounds = bounds_.size();
		return &l_;
	}

private:
	histogram_layout() noexcept : l_() {}
	pcpu_histogram_layout l_;
	std::vector<std::int64_t> bounds_;
};

/** What histogram_ref::read() returns. */
struct histogram_data {
	std::vector<std::uint64_t> counts; /**< per bucket, not cumulative */
	std::uint64_t count = 0;
	std::int64_t sum = 0;
};

namespace detail {
/** A histogram's operations (pcpu/histogram.h) over handle H. */
template <typename H> class histogram_ops : public H {
public:
	using H::H;
	/** pcpu_histogram_record(): locate the bucket, one rseq section. */
	PCPU_CXX_HOT void record(std::int64_t v) const { pcpu_histogram_record(this->get(), v); }
	PCPU_CXX_HOT void record_n(std::int64_t v, std::uint64_t n) const
	{
		pcpu_histogram_record_n(this->get(), v, n);
	}
	PCPU_CXX_NO_FLOAT_OBSERVATION(record)
	PCPU_CXX_NO_FLOAT_OBSERVATION(record_n)
	PCPU_CXX_HOT std::size_t bucket_of(std::int64_t v) const { return pcpu_histogram_bucket_of(this->get(), v); }
	std::size_t nbuckets() const noexcept { return pcpu_histogram_nbuckets(this->get()); }
	/** pcpu_histogram_lost(): observations a sparse histogram could not store. */
	std::uint64_t lost() const noexcept { return pcpu_histogram_lost(this->get()); }
	/** pcpu_histogram_read() into a new histogram_data. */
	histogram_data read() const
	{
		histogram_data d;
		d.counts.resize(nbuckets());
		if (pcpu_histogram_read(this->get(), d.counts.data(), d.counts.size(), &d.count, &d.sum) != 0) {
			detail::throw_errno("pcpu_histogram_read");
			return histogram_data{};
		}
		return d;
	}
};
} // namespace detail

/** A copyable view of a histogram (pcpu/histogram.h) owned elsewhere. */
class histogram_ref : public detail::histogram_ops<detail::view_handle<const pcpu_histogram_t *>> {
public:
	explicit histogram_ref(const pcpu_histogram_t *h) noexcept : histogram_ops(h) {}
};

/** An owning histogram (pcpu_histogram_create() / pcpu_histogram_destroy()). */
class histogram
	: public detail::histogram_ops<detail::owned_handle<pcpu_histogram_t *, detail::free_histogram>> {
public:
	/** Creates it with `layout`; throws pcpu::error (EINVAL: a bad layout). */
	explicit histogram(histogram_layout layout) : histogram_ops(pcpu_histogram_create(layout.c_layout()))
	{
		if (!get())
			detail::throw_errno("pcpu_histogram_create", true);
	}
	/** Creates it with `layout` and pcpu_histogram_create_ex() flags
	 * (PCPU_HISTOGRAM_SPARSE: buckets made as used), in the default zone;
	 * throws pcpu::error (EINVAL: a bad layout or flag). */
	histogram(histogram_layout layout, unsigned flags)
		: histogram_ops(pcpu_histogram_create_ex(nullptr, layout.c_layout(), flags))
	{
		if (!get())
			detail::throw_errno("pcpu_histogram_create_ex", true);
	}
	histogram_ref ref() const noexcept { return histogram_ref(get()); }
};

/* ---- owned slots (pcpu/worker.h) -------------------------------------- */

/** A counter array's words in the calling thread's owned slot
 * (pcpu_counter_owned_array()): add(i, v) is one `add` to memory through a
 * pointer the loop keeps in a register, DPDK's Per Core update. Valid
 * while the claim it came from is held, in that thread. */
class owned_array {
public:
	/** pcpu_owned_array_add(): element i (unchecked, as in C). */
	PCPU_CXX_HOT void add(std::size_t i, std::int64_t v) const { pcpu_owned_array_add(a_, i, v); }
	PCPU_CXX_NO_FLOAT_COUNT(add)
	explicit operator bool() const noexcept { return a_.pcpu__words != nullptr; }
	pcpu_owned_array_t get() const noexcept { return a_; }

private:
	friend class claim;
	explicit owned_array(pcpu_owned_array_t a) noexcept : a_(a) {}
	pcpu_owned_array_t a_;
};

/** A claim of an owned slot as a value (pcpu_worker_t), for a worker's
 * loop: take it by value or copy it into a local (a reference is reloaded
 * from memory after every update). Its updates are the `_owned` ones: a
 * plain add to the thread's own copy; the zero claim's (default
 * constructed, or from a worker that got no slot) are the ordinary ones. */
class claim {
public:
	claim() noexcept = default;
	explicit claim(pcpu_worker_t w) noexcept : w_(w) {}
	bool claimed() const noexcept { return w_.pcpu__off != 0; }
	/** pcpu_worker_slot(): the slot number, -1 for the zero claim. */
	int slot() const noexcept { return pcpu_worker_slot(w_); }
	/** pcpu_counter_add_owned(). */
	PCPU_CXX_HOT void add(counter_ref c, std::int64_t v) const { pcpu_counter_add_owned(w_, c.get(), v); }
	PCPU_CXX_HOT void add(const counter &c, std::int64_t v) const { pcpu_counter_add_owned(w_, c.get(), v); }
	PCPU_CXX_HOT void inc(counter_ref c) const { pcpu_counter_add_owned(w_, c.get(), 1); }
	/** pcpu_histogram_record_owned(). */
	PCPU_CXX_HOT void record(histogram_ref h, std::int64_t v) const
	{
		pcpu_histogram_record_owned(w_, h.get(), v);
	}
	PCPU_CXX_HOT void record(const histogram &h, std::int64_t v) const
	{
		pcpu_histogram_record_owned(w_, h.get(), v);
	}
	PCPU_CXX_NO_FLOAT_COUNT(add)
	PCPU_CXX_NO_FLOAT_OBSERVATION(record)
	/** pcpu_counter_owned_array() of `a`; throws pcpu::error EINVAL for
	 * the zero claim or a claim that is not the calling thread's (use the
	 * array's ordinary adds then). */
	owned_array view(const counter_array &a) const { return view(a.get()); }
	owned_array view(pcpu_counter_t array) const
	{
		pcpu_owned_array_t v{};

		if (pcpu_counter_owned_array(w_, array, &v) != 0) {
			detail::throw_errno("pcpu_counter_owned_array");
			return owned_array(pcpu_owned_array_t{});
		}
		return owned_array(v);
	}
	pcpu_worker_t get() const noexcept { return w_; }

private:
	pcpu_worker_t w_{};
};

/**
 * The calling thread's owned slot (pcpu_worker_claim()), held for the
 * object's life: a pinned worker's claim. claim() gives the value its loop
 * updates through. The object belongs to the thread that made it (neither
 * copied nor moved); its destructor releases the claim if this object
 * made it (where the thread held one already, the two share it and the
 * first owner keeps it).
 */
class worker {
public:
	/** Claims a slot; throws pcpu::error (EBUSY: every owned slot is
	 * held; ENOTSUP, ENOSPC, ENOMEM: see pcpu_worker_claim(3)). */
	worker() : owns_(pcpu_worker_self().pcpu__off == 0)
	{
		if (pcpu_worker_claim(&w_) != 0) {
			owns_ = false;
			detail::throw_errno("pcpu_worker_claim");
		}
	}
	/** Claims a slot if one is free; claimed() says whether. Without
	 * one, claim() is the zero claim, whose updates are ordinary. */
	explicit worker(std::nothrow_t) noexcept : owns_(pcpu_worker_self().pcpu__off == 0)
	{
		if (pcpu_worker_claim(&w_) != 0)
			owns_ = false;
	}
	worker(const worker &) = delete;
	worker &operator=(const worker &) = delete;
	~worker()
	{
		if (owns_)
			pcpu_worker_release();
	}
	bool claimed() const noexcept { return w_.pcpu__off != 0; }
	/** pcpu_worker_slot(): the slot number, -1 without a claim. */
	int slot() const noexcept { return pcpu_worker_slot(w_); }
	/** The claim as a value for the loop. */
	pcpu::claim claim() const noexcept { return pcpu::claim(w_); }

private:
	pcpu_worker_t w_{};
	bool owns_;
};

/* ---- consistent groups -------------------------------------------------- */

namespace detail {
/** A consistent group's operations (pcpu/group.h) over handle H. */
template <typename H> class group_ops : public H {
public:
	using H::H;
	/** pcpu_group_add(): d.size() must be members() (unchecked, as in C). */
	PCPU_CXX_HOT void add(std::size_t i, span<const std::int64_t> d) const
	{
		pcpu_group_add(this->get(), i, d.data());
	}
	PCPU_CXX_HOT void add2(std::size_t i, std::int64_t d0, std::int64_t d1) const
	{
		pcpu_group_add2(this->get(), i, d0, d1);
	}
	PCPU_CXX_NO_FLOAT_COUNT(add2)
	unsigned members() const noexcept { return pcpu_group_members(this->get()); }
	std::size_t count() const noexcept { return pcpu_group_count(this->get()); }
	/** pcpu_group_read() of group i: one consistent read of its members.
	 * Throws pcpu::error (ETIMEDOUT: a writer stayed mid-update). */
	std::vector<std::int64_t> read(std::size_t i) const
	{
		std::vector<std::int64_t> out(members());
		if (pcpu_group_read(this->get(), i, out.data()) != 0) {
			detail::throw_errno("pcpu_group_read");
			return {};
		}
		return out;
	}
};
} // namespace detail

/** A copyable view of a group object (pcpu/group.h) owned elsewhere. */
class group_ref : public detail::group_ops<detail::view_handle<const pcpu_group_t *>> {
public:
	explicit group_ref(const pcpu_group_t *g) noexcept : group_ops(g) {}
};

/** `count` owning groups of `members` counters (pcpu_group_alloc()). */
class group : public detail::group_ops<detail::owned_handle<pcpu_group_t *, detail::free_group>> {
public:
	/** Throws pcpu::error (EINVAL, ENOMEM: see pcpu_group_alloc(3)). */
	group(unsigned members, std::size_t count) : group_ops(pcpu_group_alloc(members, count))
	{
		if (!get())
			detail::throw_errno("pcpu_group_alloc");
	}
	group_ref ref() const noexcept { return group_ref(get()); }
};

} // namespace pcpu

/* The reference counts and object caches, and the statistics registry's
 * wrappers: in their own headers, included here so that pcpu.hpp stays the
 * one include a program needs. */
#include <pcpu/sync.hpp>
#include <pcpu/stats.hpp>

#undef PCPU_CXX_HOT
#undef PCPU_CXX_NO_FLOAT
#undef PCPU_CXX_NO_FLOAT_COUNT
#undef PCPU_CXX_NO_FLOAT_OBSERVATION

#endif // PCPU_PCPU_HPP
