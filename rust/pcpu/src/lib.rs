//! Exact per-CPU counters for Linux user space: the Rust API of pcpu.
//!
//! An add is one restartable sequence (rseq) on the calling thread's own
//! slot: no lock prefix, no atomic instruction, no shared cache line, no
//! call, and no update is ever lost, whatever the threads, migrations,
//! signals or forks. Reads sum the slots. Where the kernel refuses rseq the
//! add falls back to an exact atomic add on a per-slot word.
//!
//! ```
//! let c = pcpu::Counter::new()?;
//! c.inc();
//! c.add(5);
//! let total: u64 = c.get();
//! assert_eq!(total, 6);
//! # Ok::<(), pcpu::Error>(())
//! ```
//!
//! Handles are `Send + Sync`: share a [`Counter`] between threads by
//! reference (scoped threads) or in an `Arc`. Handles of a [`Registry`]'s
//! series borrow the registry, so none outlives it.
//!
//! On x86-64 and aarch64 the add is the C library's critical section
//! written in Rust inline assembly (a loop of `c.inc()` is the C loop's
//! instructions); elsewhere, or with the feature `stable-tier`, it calls
//! the library's exported add. The inline add depends on the C library's
//! inline layout; every constructor checks it first ([`check_layout`]) and
//! fails with [`Error::Layout`] on a mismatch, so no add ever runs against
//! a layout it was not written for.
//!
//! Features: `metrics` (a `metrics` crate recorder, `pcpu::metrics::Recorder`
//! when enabled: lock-free on the macros' path, names sanitised as
//! metrics-exporter-prometheus does, native histograms by default),
//! `prometheus-client` (`EncodeMetric` for [`Counter`], [`Gauge`] and
//! [`Histogram`], prometheus-client 0.23 to 0.26), `protobuf` (the C
//! library's Prometheus protobuf writer, [`Format::Protobuf`]: native
//! histograms; needs protoc-c and protobuf-c), `system` (link the installed C library through pkg-config
//! instead of compiling it; a program linked so also carries the ELF
//! version need `PCPU_LAYOUT_<n>`, so the dynamic linker refuses a library
//! of another layout before this crate's own check runs), `stable-tier`
//! (every add through the C library's exported function).
#![warn(missing_docs)]

use std::ffi::{c_char, CStr};
use std::fmt;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::OnceLock;

mod histogram;
mod inline;
mod registry;

#[cfg(feature = "metrics")]
pub mod metrics;
#[cfg(feature = "prometheus-client")]
pub mod prometheus_client;

pub(crate) use histogram::histogram_ops;
pub use histogram::{Histogram, HistogramLayout};
pub use registry::{
    CounterFamily, Format, GaugeFamily, HistogramFamily, Registry, Segment, SeriesCounter, SeriesGauge,
    SeriesHistogram, Snapshot,
};

use pcpu_sys as sys;

/// What went wrong in a pcpu call.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The C library was built for another inline layout than this crate's
    /// inline add: the crate refuses to count rather than count wrong.
    Layout {
        /// The layout this crate's add was written for.
        expected: u32,
        /// The layout of the library it runs with.
        found: u32,
    },
    /// A C call failed: its `errno` and the library's message (may be empty).
    Sys {
        /// The errno value.
        errno: i32,
        /// The library's message for it, or the errno's text.
        message: String,
    },
    /// A string argument held a NUL byte.
    Nul,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Layout { expected, found } => write!(
                f,
                "pcpu: the C library's inline layout is {found}, this crate's add was written for {expected}: \
                 rebuild the crate against a matching libpcpu"
            ),
            Error::Sys { errno, message } => write!(f, "pcpu: {message} (errno {errno})"),
            Error::Nul => write!(f, "pcpu: a string argument holds a NUL byte"),
        }
    }
}

impl std::error::Error for Error {}

/// A shorthand for `Result<T, pcpu::Error>`.
pub type Result<T> = std::result::Result<T, Error>;

/// The calling thread's errno with `msg` (a C string the library returned,
/// possibly NULL or empty) or the errno's own text.
pub(crate) fn last_error(msg: *const c_char) -> Error {
    let os = std::io::Error::last_os_error();
    let errno = os.raw_os_error().unwrap_or(0);
    let lib = if msg.is_null() {
        String::new()
    } else {
        // SAFETY: the library returns a NUL-terminated thread-local string.
        unsafe { CStr::from_ptr(msg) }.to_string_lossy().into_owned()
    };
    let message = if lib.is_empty() { os.to_string() } else { lib };
    Error::Sys { errno, message }
}

/// The errno of the last call, with no library message.
pub(crate) fn errno_error() -> Error {
    last_error(std::ptr::null())
}

/// Compares the C library's inline layout with the one this crate's inline
/// add was written for (`pcpu_sys::PCPU_INLINE_LAYOUT`), once per process.
/// Every constructor calls it before it returns a handle; call it yourself
/// to fail at start rather than at the first allocation.
///
/// Errors: [`Error::Layout`] when they differ, every time it is called.
/// Thread-safe. Cost: a call the first time, a load after.
///
/// ```
/// pcpu::check_layout().expect("libpcpu matches this crate");
/// ```
pub fn check_layout() -> Result<()> {
    static FOUND: OnceLock<u32> = OnceLock::new();
    // SAFETY: a plain query of a constant.
    let found = *FOUND.get_or_init(|| unsafe { sys::pcpu_inline_layout() });
    layout_matches(sys::PCPU_INLINE_LAYOUT, found)
}

fn layout_matches(expected: u32, found: u32) -> Result<()> {
    // The stable tier's exported add does not depend on the layout.
    if !inline::INLINE_ASM || expected == found {
        Ok(())
    } else {
        Err(Error::Layout { expected, found })
    }
}

/// How the calling thread updates counters (registering it first where
/// pcpu registers rseq areas itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RseqMode {
    /// rseq area registered by glibc.
    Glibc,
    /// rseq area registered by pcpu.
    Own,
    /// No rseq: exact atomic adds on per-slot words.
    Fallback,
}

/// The calling thread's [`RseqMode`]. Thread-safe; async-signal-safe.
/// Cost: a few loads once registered.
///
/// ```
/// let mode = pcpu::rseq_mode();
/// println!("{mode:?}");
/// ```
pub fn rseq_mode() -> RseqMode {
    // SAFETY: no arguments; the library initialises itself if need be.
    match unsafe { sys::pcpu_rseq_mode() } {
        sys::PCPU_RSEQ_GLIBC => RseqMode::Glibc,
        sys::PCPU_RSEQ_OWN => RseqMode::Own,
        _ => RseqMode::Fallback,
    }
}

/// Whether [`Counter::add`] (and `inc`, [`CounterArray::add`],
/// [`SeriesCounter`]'s) is this crate's inline rseq critical section
/// (`true`: x86-64 and aarch64 Linux without the feature `stable-tier`) or
/// a call of the C library's exported add (`false`). Either is exact; the
/// emulated machines' test (rust/pcpu-vm) asserts it is the inline one.
/// Thread-safe. Cost: none (a constant).
///
/// ```
/// println!("inline add: {}", pcpu::inline_add());
/// ```
pub const fn inline_add() -> bool {
    inline::INLINE_ASM
}

/// Number of slots every per-CPU object has (possible CPUs plus owned
/// slots). Thread-safe. Cost: a load once initialised.
///
/// ```
/// assert!(pcpu::nslots() >= 1);
/// ```
pub fn nslots() -> u32 {
    // SAFETY: no arguments.
    unsafe { sys::pcpu_nslots() }
}

/// The first `PCPU_*` environment variable the C library read and did not
/// understand, with what it did instead (`pcpu_environment_error(3)`), or
/// `None`. The library never prints and always takes an exact choice (a
/// refused `PCPU_SLOT_WALK` walks every slot); a program that wants the
/// typo reported calls this at start-up. Thread-safe. Cost: a load once
/// initialised.
///
/// ```
/// if let Some(refused) = pcpu::environment_error() {
///     eprintln!("warning: {refused}");
/// }
/// ```
pub fn environment_error() -> Option<&'static str> {
    // SAFETY: no arguments; NULL or a static NUL-terminated string.
    let p = unsafe { sys::pcpu_environment_error() };
    if p.is_null() {
        return None;
    }
    // SAFETY: p is not NULL and points at a string constant.
    unsafe { CStr::from_ptr(p) }.to_str().ok()
}

/// The C library's version, "MAJOR.MINOR.PATCH". Thread-safe. Cost: a load.
///
/// ```
/// assert_eq!(pcpu::library_version().split('.').count(), 3);
/// ```
pub fn library_version() -> &'static str {
    // SAFETY: a static NUL-terminated string.
    unsafe { CStr::from_ptr(sys::pcpu_version_string()) }.to_str().unwrap_or("")
}

// ---- counters ---------------------------------------------------------------

/// The operations of a counter handle, shared by [`Counter`] and
/// [`SeriesCounter`].
macro_rules! counter_ops {
    () => {
        /// Adds `v` (negative allowed; the value wraps modulo 2^64). One
        /// rseq critical section on the calling thread's slot (on x86-64:
        /// a load of the index, the arming store, a compare, a shift and an
        /// unlocked `add`), no call. Exact with every other update.
        /// Thread-safe; async-signal-safe (a signal handler may add to the
        /// counter the code it interrupted is adding to).
        ///
        /// ```
        /// let c = pcpu::Counter::new()?;
        /// c.add(5);
        /// c.add(-2);
        /// assert_eq!(c.get(), 3);
        /// # Ok::<(), pcpu::Error>(())
        /// ```
        #[inline(always)]
        pub fn add(&self, v: i64) {
            // SAFETY: the handle is live (it borrows or owns the counter)
            // and was made after check_layout() succeeded.
            unsafe { crate::inline::counter_add(self.raw.as_ptr(), v, self.off) }
        }

        /// `add(1)`. Thread-safe; async-signal-safe. Cost: as `add`.
        ///
        /// ```
        /// let c = pcpu::Counter::new()?;
        /// c.inc();
        /// assert_eq!(c.get(), 1);
        /// # Ok::<(), pcpu::Error>(())
        /// ```
        #[inline(always)]
        pub fn inc(&self) {
            self.add(1)
        }

        /// The sum of every slot. Not a point-in-time snapshot while adds
        /// run (each slot is read once); exact once adders have stopped and
        /// their stores are visible (e.g. after joining them).
        /// Thread-safe. Cost: a call and a read of each slot that was used.
        ///
        /// ```
        /// let c = pcpu::Counter::new()?;
        /// std::thread::scope(|s| { s.spawn(|| c.add(7)); });
        /// assert_eq!(c.get(), 7);
        /// # Ok::<(), pcpu::Error>(())
        /// ```
        #[inline]
        pub fn get(&self) -> u64 {
            // SAFETY: a live counter.
            unsafe { pcpu_sys::pcpu_counter_fetch(self.raw.as_ptr()) }
        }

        /// Reads and zeroes: every add is reported by exactly one
        /// `get_and_reset` or by a final `get`, with any number of
        /// concurrent adders and resetters. Thread-safe. Cost: a read of
        /// each slot and an atomic add.
        ///
        /// ```
        /// let c = pcpu::Counter::new()?;
        /// c.add(4);
        /// assert_eq!(c.get_and_reset(), 4);
        /// assert_eq!(c.get(), 0);
        /// # Ok::<(), pcpu::Error>(())
        /// ```
        pub fn get_and_reset(&self) -> u64 {
            // SAFETY: a live counter.
            unsafe { pcpu_sys::pcpu_counter_fetch_and_zero(self.raw.as_ptr()) }
        }
    };
}

/// An exact per-CPU counter, owned: freed when dropped.
///
/// `Send + Sync`: share it by reference or in an `Arc`; the borrow checker
/// keeps every use before the drop.
///
/// A hot loop runs C's instructions when it adds through a `&Counter`
/// parameter of the function that holds the loop (`fn work(c: &Counter)`):
/// the handle is then immutable for the call, and its 16 bytes are loaded
/// once, before the loop. Through an `Arc` or a `Vec` element inside the
/// loop the compiler loads them again after each add (whose asm may write
/// memory): three loads more per add.
///
/// ```
/// use std::sync::Arc;
/// let c = Arc::new(pcpu::Counter::new()?);
/// let threads: Vec<_> = (0..4)
///     .map(|_| { let c = c.clone(); std::thread::spawn(move || for _ in 0..1000 { c.inc() }) })
///     .collect();
/// for t in threads { t.join().unwrap(); }
/// assert_eq!(c.get(), 4000);
/// # Ok::<(), pcpu::Error>(())
/// ```
pub struct Counter {
    raw: NonNull<sys::pcpu_counter>,
    off: inline::Offsets,
}

// SAFETY: the C counter's operations are thread-safe; the handle is a
// pointer the C library owns until Drop.
unsafe impl Send for Counter {}
unsafe impl Sync for Counter {}

impl Counter {
    /// A new counter at zero, in the library's default zone.
    ///
    /// Errors: [`Error::Layout`] (see [`check_layout`]); [`Error::Sys`] with
    /// ENOMEM. Thread-safe. Cost: a zone allocation (a mutex section).
    ///
    /// ```
    /// let c = pcpu::Counter::new()?;
    /// assert_eq!(c.get(), 0);
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn new() -> Result<Counter> {
        check_layout()?;
        // SAFETY: no arguments.
        let raw = NonNull::new(unsafe { sys::pcpu_counter_alloc() }).ok_or_else(errno_error)?;
        let c = Counter { raw, off: inline::Offsets::get()? };
        Ok(c)
    }

    counter_ops!();

    /// The C handle, for calls through `pcpu_sys`; valid while `self` is.
    ///
    /// ```
    /// let c = pcpu::Counter::new()?;
    /// unsafe { pcpu_sys::pcpu_counter_add(c.as_raw(), 2) };
    /// assert_eq!(c.get(), 2);
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn as_raw(&self) -> sys::pcpu_counter_t {
        self.raw.as_ptr()
    }
}

impl Drop for Counter {
    fn drop(&mut self) {
        // SAFETY: owned, and no borrow outlives self.
        unsafe { sys::pcpu_counter_free(self.raw.as_ptr()) };
    }
}

impl fmt::Debug for Counter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Counter").field("value", &self.get()).finish()
    }
}

/// `n` counters allocated together (consecutive words of each slot): one
/// allocation, one read for all of them ([`CounterArray::get_all`]).
///
/// ```
/// let a = pcpu::CounterArray::new(3)?;
/// a.add(2, 7);
/// assert_eq!(a.get_all(), vec![0, 0, 7]);
/// # Ok::<(), pcpu::Error>(())
/// ```
pub struct CounterArray {
    raw: NonNull<sys::pcpu_counter>,
    len: usize,
    off: inline::Offsets,
}

// SAFETY: as Counter.
unsafe impl Send for CounterArray {}
unsafe impl Sync for CounterArray {}

impl CounterArray {
    /// `n` (>= 1) counters at zero.
    ///
    /// Errors: [`Error::Layout`]; [`Error::Sys`] with EINVAL (n is 0 or too
    /// large) or ENOMEM. Thread-safe. Cost: a zone allocation.
    ///
    /// ```
    /// assert!(pcpu::CounterArray::new(0).is_err());
    /// ```
    pub fn new(n: usize) -> Result<CounterArray> {
        check_layout()?;
        // SAFETY: any n; the library checks it.
        let raw = NonNull::new(unsafe { sys::pcpu_counter_alloc_array(n) }).ok_or_else(errno_error)?;
        let a = CounterArray { raw, len: n, off: inline::Offsets::get()? };
        Ok(a)
    }

    /// Number of counters. Cost: a load.
    ///
    /// ```
    /// assert_eq!(pcpu::CounterArray::new(4)?.len(), 4);
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: an array holds at least one counter.
    ///
    /// ```
    /// assert!(!pcpu::CounterArray::new(1)?.is_empty());
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline(always)]
    fn element(&self, i: usize) -> *mut sys::pcpu_counter {
        assert!(i < self.len, "pcpu::CounterArray: index {i} out of range (len {})", self.len);
        // Element i is word i of the same slot (i < len). Wrapping, not
        // `add`: the words are the C library's, memory Rust's abstract
        // machine does not see, so Miri cannot prove an in-bounds offset
        // on it; the pointer is only handed to the add, never read here.
        self.raw.as_ptr().wrapping_add(i)
    }

    /// Adds `v` to counter `i`, as [`Counter::add`]. Panics if `i` is out
    /// of range. Thread-safe; async-signal-safe. Cost: a bounds check and
    /// the add.
    ///
    /// ```
    /// let a = pcpu::CounterArray::new(2)?;
    /// a.add(1, 3);
    /// assert_eq!(a.get(1), 3);
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    #[inline(always)]
    pub fn add(&self, i: usize, v: i64) {
        let c = self.element(i);
        // SAFETY: a live element; the layout was checked at creation.
        unsafe { inline::counter_add(c, v, self.off) }
    }

    /// `add(i, 1)`. Thread-safe; async-signal-safe. Cost: as `add`.
    ///
    /// ```
    /// let a = pcpu::CounterArray::new(2)?;
    /// a.inc(0);
    /// assert_eq!(a.get(0), 1);
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    #[inline(always)]
    pub fn inc(&self, i: usize) {
        self.add(i, 1)
    }

    /// Counter `i`'s value, as [`Counter::get`]. Panics if out of range.
    /// Thread-safe. Cost: a read of each used slot.
    ///
    /// ```
    /// assert_eq!(pcpu::CounterArray::new(2)?.get(1), 0);
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn get(&self, i: usize) -> u64 {
        let c = self.element(i);
        // SAFETY: a live element.
        unsafe { sys::pcpu_counter_fetch(c) }
    }

    /// Every counter's value, in one pass over the slots. Thread-safe.
    /// Cost: a read of each used slot's `len` words.
    ///
    /// ```
    /// let a = pcpu::CounterArray::new(2)?;
    /// a.add(0, 4);
    /// assert_eq!(a.get_all(), [4, 0]);
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn get_all(&self) -> Vec<u64> {
        let mut out = vec![0u64; self.len];
        // SAFETY: out holds len words.
        let rc = unsafe { sys::pcpu_counter_fetch_array(self.raw.as_ptr(), self.len, out.as_mut_ptr()) };
        debug_assert_eq!(rc, 0);
        out
    }
}

impl Drop for CounterArray {
    fn drop(&mut self) {
        // SAFETY: owned.
        unsafe { sys::pcpu_counter_free(self.raw.as_ptr()) };
    }
}

impl fmt::Debug for CounterArray {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CounterArray").field("values", &self.get_all()).finish()
    }
}

// ---- gauges -----------------------------------------------------------------

macro_rules! gauge_ops {
    () => {
        /// Adds `v` (negative allowed). Exact; an rseq add in the library.
        /// Thread-safe; async-signal-safe. Cost: a call and an rseq add.
        ///
        /// ```
        /// let g = pcpu::Gauge::new()?;
        /// g.add(-3);
        /// assert_eq!(g.get(), -3);
        /// # Ok::<(), pcpu::Error>(())
        /// ```
        #[inline]
        pub fn add(&self, v: i64) {
            // SAFETY: a live gauge.
            unsafe { pcpu_sys::pcpu_gauge_add(self.raw.as_ptr(), v) }
        }

        /// `add(1)`. Thread-safe; async-signal-safe. Cost: as `add`.
        ///
        /// ```
        /// let g = pcpu::Gauge::new()?;
        /// g.inc();
        /// assert_eq!(g.get(), 1);
        /// # Ok::<(), pcpu::Error>(())
        /// ```
        #[inline]
        pub fn inc(&self) {
            self.add(1)
        }

        /// `add(-1)`. Thread-safe; async-signal-safe. Cost: as `add`.
        ///
        /// ```
        /// let g = pcpu::Gauge::new()?;
        /// g.dec();
        /// assert_eq!(g.get(), -1);
        /// # Ok::<(), pcpu::Error>(())
        /// ```
        #[inline]
        pub fn dec(&self) {
            self.add(-1)
        }

        /// `add(-v)`. Thread-safe; async-signal-safe. Cost: as `add`.
        ///
        /// ```
        /// let g = pcpu::Gauge::new()?;
        /// g.sub(2);
        /// assert_eq!(g.get(), -2);
        /// # Ok::<(), pcpu::Error>(())
        /// ```
        #[inline]
        pub fn sub(&self, v: i64) {
            // SAFETY: a live gauge.
            unsafe { pcpu_sys::pcpu_gauge_sub(self.raw.as_ptr(), v) }
        }

        /// Sets the value; adds that run concurrently land before or after.
        /// Thread-safe; not async-signal-safe (takes a lock). Cost: a read
        /// of every slot under a striped lock.
        ///
        /// ```
        /// let g = pcpu::Gauge::new()?;
        /// g.add(9);
        /// g.set(4);
        /// assert_eq!(g.get(), 4);
        /// # Ok::<(), pcpu::Error>(())
        /// ```
        pub fn set(&self, v: i64) {
            // SAFETY: a live gauge.
            let rc = unsafe { pcpu_sys::pcpu_gauge_set(self.raw.as_ptr(), v) };
            debug_assert_eq!(rc, 0);
        }

        /// The value (sum of the slots). Thread-safe. Cost: a read of each
        /// used slot.
        ///
        /// ```
        /// let g = pcpu::Gauge::new()?;
        /// assert_eq!(g.get(), 0);
        /// # Ok::<(), pcpu::Error>(())
        /// ```
        pub fn get(&self) -> i64 {
            // SAFETY: a live gauge.
            unsafe { pcpu_sys::pcpu_gauge_read(self.raw.as_ptr()) }
        }
    };
}
pub(crate) use counter_ops;
pub(crate) use gauge_ops;

/// A gauge: a value that goes up and down, and may be set.
///
/// ```
/// let g = pcpu::Gauge::new()?;
/// g.add(5);
/// g.sub(2);
/// assert_eq!(g.get(), 3);
/// g.set(10);
/// assert_eq!(g.get(), 10);
/// # Ok::<(), pcpu::Error>(())
/// ```
pub struct Gauge {
    raw: NonNull<sys::pcpu_gauge>,
}

// SAFETY: the C gauge's operations are thread-safe.
unsafe impl Send for Gauge {}
unsafe impl Sync for Gauge {}

impl Gauge {
    /// A new gauge at zero.
    ///
    /// Errors: [`Error::Layout`]; [`Error::Sys`] with ENOMEM. Thread-safe.
    /// Cost: a zone allocation.
    ///
    /// ```
    /// assert_eq!(pcpu::Gauge::new()?.get(), 0);
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn new() -> Result<Gauge> {
        check_layout()?;
        // SAFETY: no arguments.
        let p = unsafe { sys::pcpu_gauge_alloc() };
        NonNull::new(p).map(|raw| Gauge { raw }).ok_or_else(errno_error)
    }

    gauge_ops!();
}

impl Drop for Gauge {
    fn drop(&mut self) {
        // SAFETY: owned.
        unsafe { sys::pcpu_gauge_free(self.raw.as_ptr()) };
    }
}

impl fmt::Debug for Gauge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gauge").field("value", &self.get()).finish()
    }
}

// ---- owned slots ------------------------------------------------------------

thread_local! {
    /// Whether the thread holds a [`Worker`].
    static CLAIMED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The calling thread's claim of an owned slot (pcpu/worker.h): a pinned
/// worker's own slot of every counter, added to with a plain `add`, no rseq
/// and no atomic (DPDK's per-core statistics). Released when dropped.
/// Neither `Send` nor `Sync`: it belongs to the thread that claimed it.
///
/// ```
/// let c = pcpu::Counter::new()?;
/// std::thread::spawn(move || {
///     let w = pcpu::Worker::claim().expect("an owned slot");
///     for _ in 0..100 { w.add(&c, 1) }
///     drop(w);
///     assert_eq!(c.get(), 100);
/// }).join().unwrap();
/// # Ok::<(), pcpu::Error>(())
/// ```
pub struct Worker {
    w: sys::pcpu_worker_t,
    _thread: PhantomData<*mut ()>,
}

impl Worker {
    /// Claims an owned slot for the calling thread.
    ///
    /// Errors: [`Error::Layout`]; [`Error::Sys`] with EBUSY (the thread
    /// holds a `Worker` already, or every owned slot is held), EINVAL (the
    /// process has no owned slots: `PCPU_OWNED_SLOTS=0`), ENOSPC, ENOMEM. Thread-safe. Cost: a mutex section.
    ///
    /// ```
    /// let w = pcpu::Worker::claim()?;
    /// assert!(pcpu::Worker::claim().is_err()); // one claim per thread
    /// drop(w);
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn claim() -> Result<Worker> {
        check_layout()?;
        // The C library hands a thread its claim again; one Worker per
        // thread, so that dropping one never leaves another adding
        // plainly into a released slot.
        if CLAIMED.with(|c| c.replace(true)) {
            return Err(Error::Sys { errno: 16, message: "the thread holds a pcpu::Worker already".into() });
        }
        let mut w = sys::pcpu_worker_t::default();
        // SAFETY: w is a valid out pointer.
        if unsafe { sys::pcpu_worker_claim(&mut w) } != 0 {
            let e = errno_error();
            CLAIMED.with(|c| c.set(false));
            return Err(e);
        }
        Ok(Worker { w, _thread: PhantomData })
    }

    /// Adds `v` to `c` in this thread's owned slot: exact with every other
    /// update of `c`. Async-signal-safe on x86-64. Cost: an address add and
    /// an unlocked `add` to memory on x86-64; a call elsewhere.
    ///
    /// ```
    /// let c = pcpu::Counter::new()?;
    /// let w = pcpu::Worker::claim()?;
    /// w.add(&c, 3);
    /// assert_eq!(c.get(), 3);
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    #[inline(always)]
    pub fn add(&self, c: &Counter, v: i64) {
        self.add_raw(c.raw.as_ptr(), v)
    }

    /// Adds `v` to element `i` of `a` in this thread's owned slot, as
    /// [`Worker::add`]. Panics if `i` is out of range.
    ///
    /// ```
    /// let a = pcpu::CounterArray::new(4)?;
    /// let w = pcpu::Worker::claim()?;
    /// w.add_array(&a, 3, 2);
    /// assert_eq!(a.get(3), 2);
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    #[inline(always)]
    pub fn add_array(&self, a: &CounterArray, i: usize, v: i64) {
        self.add_raw(a.element(i), v)
    }

    #[inline(always)]
    fn add_raw(&self, c: *mut sys::pcpu_counter, v: i64) {
        #[cfg(all(target_arch = "x86_64", not(feature = "stable-tier")))]
        // SAFETY: the claim is this thread's (Worker is !Send) and nonzero;
        // c is live: its word in the owned slot is c + the claim's offset.
        unsafe {
            inline::owned_add((c as *mut u8).add(self.w.pcpu__off) as *mut i64, v)
        }
        #[cfg(not(all(target_arch = "x86_64", not(feature = "stable-tier"))))]
        // SAFETY: as above.
        unsafe {
            sys::pcpu_counter_add_owned(self.w, c, v)
        }
    }

    /// The claimed slot's number (below [`nslots`]). Cost: a call.
    ///
    /// ```
    /// let w = pcpu::Worker::claim()?;
    /// assert!(w.slot() < pcpu::nslots());
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn slot(&self) -> u32 {
        // SAFETY: a valid claim.
        unsafe { sys::pcpu_worker_slot(self.w) as u32 }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // SAFETY: releases the calling thread's claim, which is this one
        // (Worker never leaves its thread).
        unsafe { sys::pcpu_worker_release() };
        CLAIMED.with(|c| c.set(false));
    }
}

impl fmt::Debug for Worker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Worker").field("slot", &self.slot()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_mismatch_refused() {
        if inline::INLINE_ASM {
            assert_eq!(layout_matches(3, 4), Err(Error::Layout { expected: 3, found: 4 }));
        }
        assert_eq!(layout_matches(3, 3), Ok(()));
        assert!(check_layout().is_ok());
    }

    #[test]
    fn handles_are_send_sync() {
        fn ok<T: Send + Sync>() {}
        ok::<Counter>();
        ok::<CounterArray>();
        ok::<Gauge>();
        ok::<Histogram>();
        ok::<Registry>();
    }
}
