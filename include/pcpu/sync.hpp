// SPDX-License-Identifier: MIT
/**
 * @file pcpu/sync.hpp
 * pcpu for C++17: per-CPU reference counts (pcpu/ref.h) as `pcpu::ref<T>`
 * and per-CPU object caches (pcpu/objcache.h) as `pcpu::objcache<T>`.
 * Included by pcpu/pcpu.hpp, whose error policy and ownership rules it
 * shares (the one include a program needs stays pcpu/pcpu.hpp).
 *
 *     auto conf = pcpu::ref<config>::make(path);   // the owner's reference
 *     conf.get(); use(*conf); conf.put();          // readers: per-CPU adds
 *     pcpu::objcache<buffer> bufs;                 // T() made per CPU
 *     buffer *b = bufs.get(); ... bufs.put(b);
 */
#ifndef PCPU_SYNC_HPP
#define PCPU_SYNC_HPP

/* pcpu.hpp first (it includes this header at its end, after the error
 * helpers and macros used here, which this guard then finds defined). */
#include <pcpu/pcpu.hpp>

#include <memory>
#include <new>
#include <utility>

/* pcpu.hpp's PCPU_CXX_HOT, under a name of this header's: when this header
 * is included first, pcpu.hpp has ended (and undefined its macros) before
 * the code below. */
#define PCPU_SYNC_HOT __attribute__((always_inline))

namespace pcpu {

/* ---- per-CPU reference counts -------------------------------------------- */

/**
 * A T whose lifetime a per-CPU reference count (pcpu/ref.h) governs.
 * `pcpu::ref<T>::make(args...)` constructs the T and the count, the ref
 * object holding the owner's reference. Threads that already hold a
 * reference take more with get() and drop them with put() (or hold one with
 * a ref<T>::guard); tryget() takes one only while the object lives.
 * kill() -- or the owner's destructor -- drops the owner's reference and
 * switches the count to atomic mode; the T is destroyed by the put (or
 * kill) that drops the last reference, in that thread.
 */
template <typename T> class ref {
	struct block {
		pcpu_ref_t *r = nullptr;
		T value;
		template <typename... A> explicit block(A &&...a) : value(std::forward<A>(a)...) {}
	};
	static void release(void *arg) noexcept
	{
		block *b = static_cast<block *>(arg);
		pcpu_ref_t *r = b->r;
		delete b;
		pcpu_ref_destroy(r);
	}

public:
	/** Constructs T(args...) and its count; throws pcpu::error (ENOMEM) or
	 * what T's constructor throws. */
	template <typename... A> static ref make(A &&...a)
	{
#if PCPU_CXX_EXCEPTIONS
		block *b = new block(std::forward<A>(a)...);
#else
		block *b = new (std::nothrow) block(std::forward<A>(a)...);
		if (!b) {
			detail::fail(ENOMEM, "pcpu::ref::make: out of memory");
			return ref(nullptr);
		}
#endif
		b->r = pcpu_ref_create(&release, b);
		if (!b->r) {
			int err = errno;
			delete b;
			errno = err;
			detail::throw_errno("pcpu_ref_create");
			return ref(nullptr);
		}
		return ref(b);
	}
	ref(ref &&o) noexcept : b_(std::exchange(o.b_, nullptr)), killed_(std::exchange(o.killed_, true)) {}
	ref &operator=(ref &&o) noexcept
	{
		if (this != &o) {
			kill();
			b_ = std::exchange(o.b_, nullptr);
			killed_ = std::exchange(o.killed_, true);
		}
		return *this;
	}
	ref(const ref &) = delete;
	ref &operator=(const ref &) = delete;
	/** Drops the owner's reference if kill() did not. */
	~ref() { kill(); }

	/** The object; valid while the caller holds a reference (the owner's
	 * until kill()). */
	T &operator*() const noexcept { return b_->value; }
	T *operator->() const noexcept { return &b_->value; }
	/** pcpu_ref_get(): the caller already holds a reference. */
	PCPU_SYNC_HOT void get() const { pcpu_ref_get(b_->r); }
	/** pcpu_ref_put(). */
	PCPU_SYNC_HOT void put() const { pcpu_ref_put(b_->r); }
	/** pcpu_ref_tryget(): true if a reference was taken. */
	PCPU_SYNC_HOT bool tryget() const { return pcpu_ref_tryget(b_->r) != 0; }
	/** pcpu_ref_read(): references held now. */
	std::int64_t count() const noexcept { return pcpu_ref_read(b_->r); }
	/** Drops the owner's reference (pcpu_ref_kill()); later gets need a
	 * reference held. Idempotent. If membarrier is refused at this point
	 * (a seccomp filter installed since creation: see pcpu_ref_kill()) the
	 * count stays per-CPU and this returns false; call it again. */
	bool kill() noexcept
	{
		if (!b_ || killed_)
			return true;
		if (pcpu_ref_kill(b_->r) != 0)
			return false;
		killed_ = true;
		return true;
	}
	pcpu_ref_t *c_ref() const noexcept { return b_ ? b_->r : nullptr; }
	/** False for an empty ref (moved from, or a failed make() without
	 * exceptions). */
	explicit operator bool() const noexcept { return b_ != nullptr; }

	/** Holds one reference for its scope: get() on construction (the caller
	 * already holds one), put() on destruction. */
	class guard {
	public:
		explicit guard(const ref &r) noexcept : r_(r.c_ref()) { pcpu_ref_get(r_); }
		guard(const guard &) = delete;
		guard &operator=(const guard &) = delete;
		~guard() { pcpu_ref_put(r_); }

	private:
		pcpu_ref_t *r_;
	};

private:
	explicit ref(block *b) noexcept : b_(b), killed_(false) {}
	block *b_;
	bool killed_;
};

/* ---- object caches ------------------------------------------------------- */

/**
 * A per-CPU cache of T objects (pcpu/objcache.h). Objects are constructed
 * T() when the cache makes them and destroyed when it frees them (drain,
 * destruction), as a slab cache does: get() hands out an object that is
 * constructed but holds whatever its last user left. get() and put() are
 * the C inline paths (noexcept); get() returns nullptr when the cache
 * cannot make an object (ENOMEM, its limit, or T() threw). unique() wraps
 * get() in a handle that puts the object back.
 * The destructor destroys the cache; every object must have been put back
 * (otherwise the cache leaks and the objects held stay valid memory).
 */
template <typename T> class objcache {
	static_assert(alignof(T) <= 4096, "pcpu::objcache: alignment above 4096");
	static int ctor(void *obj, void *) noexcept
	{
#if PCPU_CXX_EXCEPTIONS
		try {
			::new (obj) T();
			return 0;
		} catch (...) {
			errno = ENOMEM;
			return -1;
		}
#else
		::new (obj) T();
		return 0;
#endif
	}
	static void dtor(void *obj, void *) noexcept { static_cast<T *>(obj)->~T(); }

public:
	/** Settings beyond the type (see struct pcpu_objcache_desc). */
	struct options {
		unsigned capacity = 0; /**< per slot, 2..1024; 0: 64 */
		std::size_t limit = 0; /**< most objects in existence; 0: none */
	};
	objcache() : objcache(options{}) {}
	explicit objcache(options o)
	{
		pcpu_objcache_desc d{};
		d.size = sizeof(T);
		d.align = alignof(T) < 16 ? 16 : alignof(T);
		d.capacity = o.capacity;
		d.limit = o.limit;
		d.ctor = &ctor;
		d.dtor = &dtor;
		c_ = pcpu_objcache_create(&d);
		if (!c_)
			detail::throw_errno("pcpu_objcache_create");
	}
	objcache(objcache &&o) noexcept : c_(std::exchange(o.c_, nullptr)) {}
	objcache(const objcache &) = delete;
	objcache &operator=(const objcache &) = delete;
	objcache &operator=(objcache &&) = delete;
	~objcache()
	{
		if (c_)
			(void)pcpu_objcache_destroy(c_);
	}

	PCPU_SYNC_HOT T *get() { return static_cast<T *>(pcpu_objcache_get(c_)); }
	PCPU_SYNC_HOT void put(T *obj) { pcpu_objcache_put(c_, obj); }

	/** Puts the object back when the handle goes. */
	struct deleter {
		objcache *cache;
		void operator()(T *obj) const noexcept { cache->put(obj); }
	};
	using handle = std::unique_ptr<T, deleter>;
	/** get() in a handle; throws std::bad_alloc when get() returns null
	 * (without exceptions: an empty handle, errno ENOMEM). */
	handle unique()
	{
		T *p = get();
		if (!p) {
#if PCPU_CXX_EXCEPTIONS
			throw std::bad_alloc();
#else
			detail::fail(ENOMEM, "pcpu::objcache::unique: the cache made no object");
			return handle(nullptr, deleter{this});
#endif
		}
		return handle(p, deleter{this});
	}
	/** pcpu_objcache_stats(). */
	struct pcpu_objcache_stats stats() const noexcept
	{
		struct pcpu_objcache_stats s{};
		(void)pcpu_objcache_stats(c_, &s);
		return s;
	}
	/** pcpu_objcache_drain(): frees the cached objects; the number freed. */
	std::size_t drain() noexcept { return pcpu_objcache_drain(c_); }
	pcpu_objcache_t *get_cache() const noexcept { return c_; }
	explicit operator bool() const noexcept { return c_ != nullptr; }

private:
	pcpu_objcache_t *c_ = nullptr;
};

} // namespace pcpu

#undef PCPU_SYNC_HOT

#endif // PCPU_SYNC_HPP
