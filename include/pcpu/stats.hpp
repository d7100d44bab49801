// SPDX-License-Identifier: MIT
/**
 * @file pcpu/stats.hpp
 * pcpu for C++17: the statistics registry (pcpu/stats.h) and its segment
 * (pcpu/segment.h) -- registry, family builders, families and their series,
 * publishing. Included by pcpu/pcpu.hpp, whose error policy, ownership
 * rules and handles (counter_ref, gauge_ref, histogram_ref) it shares.
 *
 *     pcpu::registry reg;
 *     pcpu::segment seg = reg.publish("myserver");        // pcpustat sees it
 *     auto requests = reg.counter_family("http_requests")
 *                         .labels({"method", "code"}).make();
 *     auto get200 = requests.series_named({{"code", "200"}, {"method", "GET"}});
 *     get200.inc();
 */
#ifndef PCPU_STATS_HPP
#define PCPU_STATS_HPP

#include <pcpu/pcpu.hpp>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pcpu {

enum class format { prometheus = PCPU_FORMAT_PROMETHEUS, openmetrics = PCPU_FORMAT_OPENMETRICS, json = PCPU_FORMAT_JSON };

/** A registry family whose series are H (counter_ref, gauge_ref or
 * histogram_ref). Families live as long as their registry; this is a view.
 *
 * Label values come in the family's label order -- a braced list
 * (`series({"GET", "200"})`), a std::vector<std::string> or a span of
 * string_views -- or by name: a braced list of name/value pairs
 * (`series({{"method", "GET"}, {"code", "200"}})`, prometheus-cpp's habit)
 * or series_named() with any container of pairs (prometheus-cpp's Labels,
 * a std::map), in any order. Each lookup takes the registry's mutex and
 * hashes the values: keep the handle it returns. A braced list mixing the
 * two forms does not compile (detail::label_text says why). */
template <typename H> class family {
public:
	explicit family(pcpu_family_t *f) noexcept : f_(f) {}
	/** The series with these label values (one per label name, in the
	 * family's order), created (zero) if absent. Throws pcpu::error
	 * (EINVAL: wrong count or invalid value; ENOMEM; ENOSPC: a published
	 * registry's file is full). */
	H series(std::initializer_list<detail::label_text> values = {}) const
	{
		detail::cstrings v(values);
		return make(v.data(), v.size());
	}
	H series(span<const std::string_view> values) const
	{
		detail::cstrings v(values.data(), values.size());
		return make(v.data(), v.size());
	}
	/** A std::vector<std::string> of values (a template, so that no
	 * braced list converts to one: see detail::label_text). */
	template <typename V, std::enable_if_t<std::is_same_v<V, std::vector<std::string>>, int> = 0>
	H series(const V &values) const
	{
		detail::cstrings v(values);
		return make(v.data(), v.size());
	}
	/** The series whose labels have these values, given by name in any
	 * order: series({{"code", "200"}, {"method", "GET"}}), as
	 * series_named(). (A template, so that the empty list `{}` is the
	 * values' overload's: no labels.) */
	template <typename P = detail::label_pair, detail::if_label_pair<P> = 0>
	H series(std::initializer_list<P> pairs) const
	{
		return named(pairs.begin(), pairs.end());
	}
	/** The series whose labels have these values, given by name in any
	 * order: series_named({{"code", "200"}, {"method", "GET"}}). Every
	 * label of the family needs exactly one value; pcpu::error EINVAL
	 * names the label that is unknown, repeated or missing. */
	H series_named(std::initializer_list<std::pair<std::string_view, std::string_view>> pairs) const
	{
		return named(pairs.begin(), pairs.end());
	}
	/** series_named() from a container of pairs whose first is the name
	 * (std::map<std::string, std::string>, prometheus::Labels, a vector
	 * of pairs...). */
	template <typename Pairs, typename = decltype(std::declval<const Pairs &>().begin()->second)>
	H series_named(const Pairs &pairs) const
	{
		return named(std::begin(pairs), std::end(pairs));
	}
	/** The label names series take values for, in order (constant labels
	 * are not among them). */
	std::vector<std::string_view> label_names() const
	{
		unsigned n = 0;
		const char *const *names = pcpu_family_label_names(f_, &n);
		return std::vector<std::string_view>(names, names + n);
	}
	/** Whether the series exists (pcpu_family_lookup()): values in the
	 * family's order, or name/value pairs (as series()). A wrong number
	 * of values, or a name unknown, repeated or missing, throws
	 * pcpu::error EINVAL. */
	bool has(std::initializer_list<detail::label_text> values) const
	{
		detail::cstrings v(values);
		return has_c(v);
	}
	template <typename V, std::enable_if_t<std::is_same_v<V, std::vector<std::string>>, int> = 0>
	bool has(const V &values) const
	{
		detail::cstrings v(values);
		return has_c(v);
	}
	template <typename P = detail::label_pair, detail::if_label_pair<P> = 0>
	bool has(std::initializer_list<P> pairs) const
	{
		std::vector<std::string> values;
		return by_name(pairs.begin(), pairs.end(), values) && has(values);
	}
	/** Removes a series (pcpu_family_remove()): false if it did not exist.
	 * No thread may still update it. Values or name/value pairs as has().
	 * Throws pcpu::error (EINVAL). */
	bool remove(std::initializer_list<detail::label_text> values) const
	{
		detail::cstrings v(values);
		return remove_c(v);
	}
	template <typename V, std::enable_if_t<std::is_same_v<V, std::vector<std::string>>, int> = 0>
	bool remove(const V &values) const
	{
		detail::cstrings v(values);
		return remove_c(v);
	}
	template <typename P = detail::label_pair, detail::if_label_pair<P> = 0>
	bool remove(std::initializer_list<P> pairs) const
	{
		std::vector<std::string> values;
		return by_name(pairs.begin(), pairs.end(), values) && remove(values);
	}
	std::size_t size() const { return pcpu_family_size(f_); }
	std::string_view name() const noexcept
	{
		const char *n = pcpu_family_name(f_);
		return n ? n : std::string_view();
	}
	/** False for an empty family (a failed make() without exceptions). */
	explicit operator bool() const noexcept { return f_ != nullptr; }
	pcpu_family_t *get() const noexcept { return f_; }

private:
	H make(const char *const *v, unsigned n) const
	{
		unsigned want = 0;
		(void)pcpu_family_label_names(f_, &want);
		if (f_ && n != want) {
			detail::fail(EINVAL, "pcpu_family_series: family \"" + std::string(name()) + "\" takes " +
						     std::to_string(want) + " label values, not " + std::to_string(n));
			return H(nullptr);
		}
		if constexpr (std::is_same_v<H, counter_ref>) {
			pcpu_counter_t c = pcpu_family_counter(f_, v);
			if (!c)
				detail::throw_errno("pcpu_family_counter", true);
			return counter_ref(c); /* empty after a failure without exceptions */
		} else if constexpr (std::is_same_v<H, gauge_ref>) {
			pcpu_gauge_t g = pcpu_family_gauge(f_, v);
			if (!g)
				detail::throw_errno("pcpu_family_gauge", true);
			return gauge_ref(g);
		} else {
			pcpu_histogram_t *h = pcpu_family_histogram(f_, v);
			if (!h)
				detail::throw_errno("pcpu_family_histogram", true);
			return histogram_ref(h);
		}
	}
	/* The values of name/value pairs, in the family's label order; false
	 * (after fail(): without exceptions) for a name unknown, repeated or
	 * missing. */
	template <typename It> bool by_name(It first, It last, std::vector<std::string> &values) const
	{
		unsigned n = 0;
		const char *const *names = pcpu_family_label_names(f_, &n);
		values.assign(n, std::string());
		std::vector<bool> seen(n, false);
		for (; first != last; ++first) {
			std::string_view key(first->first);
			unsigned i = 0;
			while (i < n && key != names[i])
				i++;
			if (i == n || seen[i]) {
				detail::fail(EINVAL, "pcpu::family::series_named: family \"" + std::string(name()) +
							     (i == n ? "\" has no label \"" : "\": label given twice: \"") +
							     std::string(key) + "\"");
				return false;
			}
			values[i] = std::string(std::string_view(first->second));
			seen[i] = true;
		}
		for (unsigned i = 0; i < n; i++)
			if (!seen[i]) {
				detail::fail(EINVAL, "pcpu::family::series_named: family \"" + std::string(name()) +
							     "\": no value for label \"" + names[i] + "\"");
				return false;
			}
		return true;
	}
	template <typename It> H named(It first, It last) const
	{
		std::vector<std::string> values;
		if (!by_name(first, last, values))
			return H(nullptr);
		detail::cstrings v(values);
		return make(v.data(), v.size());
	}
	/* pcpu_family_lookup() and pcpu_family_remove() read as many values as
	 * the family has labels: a wrong count is refused here. */
	bool count_ok(const detail::cstrings &v, const char *func) const
	{
		unsigned want = 0;
		(void)pcpu_family_label_names(f_, &want);
		if (!f_ || v.size() == want)
			return true;
		detail::fail(EINVAL, std::string(func) + ": family \"" + std::string(name()) + "\" takes " +
					     std::to_string(want) + " label values, not " + std::to_string(v.size()));
		return false;
	}
	bool has_c(const detail::cstrings &v) const
	{
		return count_ok(v, "pcpu_family_lookup") && pcpu_family_lookup(f_, v.data()) != nullptr;
	}
	bool remove_c(const detail::cstrings &v) const
	{
		if (!count_ok(v, "pcpu_family_remove"))
			return false;
		if (pcpu_family_remove(f_, v.data()) == 0)
			return true;
		if (errno != ENOENT)
			detail::throw_errno("pcpu_family_remove", true);
		return false;
	}
	pcpu_family_t *f_;
};

/** A registry published as a segment (pcpu_segment_publish()), which
 * `pcpustat`, `pcpustat serve`, `pcpustat push` and the Python reader read
 * from outside the process. A view: the segment lives as long as its
 * registry, which removes its file when destroyed. */
class segment {
public:
	explicit segment(pcpu_segment_t *s) noexcept : s_(s) {}
	/** The file's path ("" for an empty segment or in a fork() child). */
	std::string_view path() const noexcept
	{
		const char *p = pcpu_segment_path(s_);
		return p ? p : std::string_view();
	}
	/** pcpu_segment_unpublish(): removes the file name now; counting
	 * goes on. */
	void unpublish() const noexcept { (void)pcpu_segment_unpublish(s_); }
	/** pcpu_segment_dropped() and pcpu_segment_nospace(): non-zero when
	 * readers see the segment incomplete. */
	std::uint64_t dropped() const noexcept { return pcpu_segment_dropped(s_); }
	std::uint64_t nospace() const noexcept { return pcpu_segment_nospace(s_); }
	explicit operator bool() const noexcept { return s_ != nullptr; }
	pcpu_segment_t *get() const noexcept { return s_; }

private:
	pcpu_segment_t *s_;
};

template <typename H> class family_builder;

/** A statistics registry (pcpu/stats.h): owns its zone, families and
 * series; destroyed with everything in it (no thread may still use a
 * handle then). registry::global() is the process-wide one, never
 * destroyed. */
class registry {
public:
	registry() : r_(pcpu_registry_create()), own_(true)
	{
		if (!r_) {
			own_ = false;
			detail::throw_errno("pcpu_registry_create");
		}
	}
	/** The process-wide registry (pcpu_registry_default()), not owned. */
	static registry global()
	{
		pcpu_registry_t *r = pcpu_registry_default();
		if (!r)
			detail::throw_errno("pcpu_registry_default");
		return registry(r, false);
	}
	registry(registry &&o) noexcept : r_(std::exchange(o.r_, nullptr)), own_(o.own_) {}
	registry(const registry &) = delete;
	registry &operator=(const registry &) = delete;
	registry &operator=(registry &&) = delete;
	~registry()
	{
		if (own_)
			pcpu_registry_destroy(r_);
	}

	inline family_builder<counter_ref> counter_family(std::string_view name);
	inline family_builder<gauge_ref> gauge_family(std::string_view name);
	inline family_builder<histogram_ref> histogram_family(std::string_view name, histogram_layout layout);

	/** The unlabelled counter `name` (pcpu_registry_counter()). */
	counter_ref counter(std::string_view name, std::string_view help = {})
	{
		std::string n(name), h(help);
		pcpu_counter_t c = pcpu_registry_counter(r_, n.c_str(), help.empty() ? nullptr : h.c_str());
		if (!c)
			detail::throw_errno("pcpu_registry_counter", true);
		return counter_ref(c);
	}
	/** The unlabelled gauge `name` (pcpu_registry_gauge()). */
	gauge_ref gauge(std::string_view name, std::string_view help = {})
	{
		std::string n(name), h(help);
		pcpu_gauge_t g = pcpu_registry_gauge(r_, n.c_str(), help.empty() ? nullptr : h.c_str());
		if (!g)
			detail::throw_errno("pcpu_registry_gauge", true);
		return gauge_ref(g);
	}
	/** The whole exposition in `fmt` (pcpu_registry_write()). */
	std::string write(format fmt = format::prometheus) const
	{
		char *out = nullptr;
		std::size_t len = 0;
		if (pcpu_registry_write(r_, static_cast<pcpu_format>(fmt), &out, &len) != 0) {
			detail::throw_errno("pcpu_registry_write", true);
			return {};
		}
		struct freer {
			char *p;
			~freer() { std::free(p); }
		} f{out};
		return std::string(out, len);
	}
	/** pcpu_registry_collect(): runs the callbacks; the number that failed. */
	int collect() const
	{
		int n = pcpu_registry_collect(r_);
		if (n < 0)
			detail::throw_errno("pcpu_registry_collect", true);
		return n;
	}
	/**
	 * Publishes the registry as the segment `name` (pcpu_segment_publish():
	 * call it before the first series is made; `opts` NULL: the
	 * defaults). Throws pcpu::error with pcpu_segment_error()'s message
	 * (EINVAL: invalid name; EBUSY: series exist already or published;
	 * EEXIST, EPERM, ENOSPC...: see pcpu_segment_publish(3)).
	 * Thread-safe; a few system calls.
	 */
	pcpu::segment publish(std::string_view name, const pcpu_segment_options *opts = nullptr)
	{
		std::string n(name);
		pcpu_segment_t *s = pcpu_segment_publish(r_, n.c_str(), opts);
		if (!s) {
			int err = errno ? errno : EINVAL;
			detail::fail(err, std::string("pcpu_segment_publish: ") + pcpu_segment_error());
		}
		return pcpu::segment(s);
	}
	explicit operator bool() const noexcept { return r_ != nullptr; }
	pcpu_registry_t *get() const noexcept { return r_; }

private:
	registry(pcpu_registry_t *r, bool own) noexcept : r_(r), own_(own) {}
	pcpu_registry_t *r_;
	bool own_;
};

/** Describes a family field by field, then make() registers it (or
 * returns the existing identical one): pcpu_registry_family(). */
template <typename H> class family_builder {
public:
	family_builder(pcpu_registry_t *r, std::string_view name, pcpu_metric_type type) : r_(r), name_(name), type_(type) {}
	family_builder &help(std::string_view h)
	{
		help_ = h;
		return *this;
	}
	family_builder &unit(std::string_view u)
	{
		unit_ = u;
		return *this;
	}
	/** The label names, in the order series() takes their values. */
	family_builder &labels(std::initializer_list<detail::label_text> names)
	{
		labels_.clear();
		for (const detail::label_text &n : names)
			labels_.emplace_back(n.view);
		return *this;
	}
	template <typename V, std::enable_if_t<std::is_same_v<V, std::vector<std::string>>, int> = 0>
	family_builder &labels(const V &names)
	{
		labels_ = names;
		return *this;
	}
	/** Name/value pairs are not label names: a compile-time error. */
	template <typename P = void>
	family_builder &labels(std::initializer_list<std::pair<std::string_view, std::string_view>>)
	{
		static_assert(detail::dependent_false<P>,
			      "pcpu::family_builder::labels() takes label names ({\"method\", \"code\"}); a name/value "
			      "pair is a constant label: const_label(name, value)");
		return *this;
	}
	/** Exposed value = value * 10^e (e.g. -9: record ns, expose seconds). */
	family_builder &scale_exp10(int e) noexcept
	{
		scale_ = e;
		return *this;
	}
	/** Constant labels of this family only (pcpu_registry_family_const()). */
	family_builder &const_label(std::string_view name, std::string_view value)
	{
		const_names_.emplace_back(name);
		const_values_.emplace_back(value);
		return *this;
	}
	/** Registers the family; throws pcpu::error (EINVAL, EEXIST, ENOMEM). */
	family<H> make()
	{
		detail::cstrings ln(labels_);
		pcpu_family_desc d{};
		d.name = name_.c_str();
		d.help = help_.empty() ? nullptr : help_.c_str();
		d.unit = unit_.empty() ? nullptr : unit_.c_str();
		d.type = type_;
		d.nlabels = ln.size();
		d.label_names = ln.data();
		d.scale_exp10 = scale_;
		d.histogram = layout_ ? layout_->c_layout() : nullptr;
		pcpu_family_t *f;
		if (const_names_.empty()) {
			f = pcpu_registry_family(r_, &d);
		} else {
			detail::cstrings cn(const_names_), cv(const_values_);
			f = pcpu_registry_family_const(r_, &d, cn.size(), cn.data(), cv.data());
		}
		if (!f)
			detail::throw_errno("pcpu_registry_family", true);
		return family<H>(f);
	}

private:
	friend class registry;
	pcpu_registry_t *r_;
	std::string name_, help_, unit_;
	pcpu_metric_type type_;
	std::vector<std::string> labels_, const_names_, const_values_;
	int scale_ = 0;
	std::unique_ptr<histogram_layout> layout_;
};

inline family_builder<counter_ref> registry::counter_family(std::string_view name)
{
	return family_builder<counter_ref>(r_, name, PCPU_METRIC_COUNTER);
}

inline family_builder<gauge_ref> registry::gauge_family(std::string_view name)
{
	return family_builder<gauge_ref>(r_, name, PCPU_METRIC_GAUGE);
}

inline family_builder<histogram_ref> registry::histogram_family(std::string_view name, histogram_layout layout)
{
	family_builder<histogram_ref> b(r_, name, PCPU_METRIC_HISTOGRAM);
	b.layout_ = std::make_unique<histogram_layout>(std::move(layout));
	return b;
}

} // namespace pcpu

#endif // PCPU_STATS_HPP
