//! The handles the recorder gives `metrics`: one per series and stripe.
//!
//! `metrics::Counter` (and `Gauge`, `Histogram`) holds an `Arc` of the
//! handle, so every `counter!(...)` clones an `Arc` and drops it: two
//! atomic read-modify-writes on the `Arc`'s count. With one `Arc` per
//! series, threads that use one key at once would fight for that count's
//! cache line (what makes a shared atomic counter slow). So each series
//! keeps a few `Arc`s, one per *stripe*, each alone on its cache line
//! (the handles are 128-byte aligned), made the first time a stripe asks;
//! a thread always takes its own stripe's (threads are numbered as they
//! first register something, modulo the stripes: a power of two, the CPUs
//! rounded up, at most 64). Every stripe's handle is the same series: the
//! values are exact whatever the stripe.

use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use ::metrics::{CounterFn, GaugeFn, HistogramFn};
use pcpu_sys as sys;

use crate::{Registry, SeriesCounter};

/// A series of the recorder (or none: a key it refused), with its
/// stripes' handles.
pub(crate) struct Series<H> {
    handle: Option<H>,
    stripes: Box<[OnceLock<Arc<H>>]>,
}

/// Number of stripes: the CPUs rounded up to a power of two, 1 to 64.
pub(crate) fn stripes() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).next_power_of_two().min(64)
}

/// The calling thread's number, given the first time it asks.
fn thread_number() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static NUMBER: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    NUMBER.with(|n| *n)
}

impl<H: Clone> Series<H> {
    /// A series of `handle`, with `stripes` (a power of two) stripes.
    pub(crate) fn new(handle: H, stripes: usize) -> Series<H> {
        debug_assert!(stripes.is_power_of_two());
        Series { handle: Some(handle), stripes: (0..stripes).map(|_| OnceLock::new()).collect() }
    }

    /// A refused key: every registration gets a no-op handle.
    pub(crate) fn refused() -> Series<H> {
        Series { handle: None, stripes: Box::new([]) }
    }

    /// The calling thread's stripe's handle, made if it is the stripe's
    /// first; None for a refused key. Cost: a thread-local load, an
    /// acquire load and an `Arc` clone of a line the stripe owns.
    #[inline]
    pub(crate) fn handle(&self) -> Option<Arc<H>> {
        let h = self.handle.as_ref()?;
        let s = &self.stripes[thread_number() & (self.stripes.len() - 1)];
        Some(s.get_or_init(|| Arc::new(h.clone())).clone())
    }
}

/// A counter series. 128-byte aligned: an `Arc` of it is alone on its
/// cache lines (two on x86-64 with the adjacent-line prefetcher).
#[derive(Clone)]
#[repr(align(128))]
pub(crate) struct CounterH {
    c: SeriesCounter<'static>,
    /// Keeps the registry, and so the series (never removed), alive as
    /// long as the handle.
    _reg: Arc<Registry>,
}

impl CounterH {
    /// # Safety
    /// `raw` is a counter series of `reg`.
    pub(crate) unsafe fn new(raw: NonNull<sys::pcpu_counter>, reg: Arc<Registry>) -> crate::Result<CounterH> {
        let off = crate::inline::Offsets::get()?;
        Ok(CounterH { c: SeriesCounter { raw, off, _reg: PhantomData }, _reg: reg })
    }
}

impl CounterFn for CounterH {
    #[inline]
    fn increment(&self, value: u64) {
        self.c.add(value as i64);
    }

    /// Sets the counter by adding the difference from its value: not atomic
    /// with concurrent increments (what lands between the read and the add
    /// is kept, then overwritten by the difference).
    fn absolute(&self, value: u64) {
        let now = self.c.get();
        self.c.add(value.wrapping_sub(now) as i64);
    }
}

/// A C series pointer: its operations are thread-safe, and the handle's
/// `Arc<Registry>` keeps the series alive.
struct Ptr<T>(NonNull<T>);
// SAFETY: as said above.
unsafe impl<T> Send for Ptr<T> {}
unsafe impl<T> Sync for Ptr<T> {}
impl<T> Clone for Ptr<T> {
    fn clone(&self) -> Self {
        Ptr(self.0)
    }
}

/// A gauge series (a family with fractions: any `f64`).
#[derive(Clone)]
#[repr(align(128))]
pub(crate) struct GaugeH {
    g: Ptr<sys::pcpu_gauge>,
    _reg: Arc<Registry>,
}

impl GaugeH {
    /// # Safety
    /// `raw` is a gauge series of `reg`.
    pub(crate) unsafe fn new(raw: NonNull<sys::pcpu_gauge>, reg: Arc<Registry>) -> GaugeH {
        GaugeH { g: Ptr(raw), _reg: reg }
    }
}

/// A histogram series (a family with fractions: any `f64`; buckets in
/// billionths, [`SCALE`]).
#[derive(Clone)]
#[repr(align(128))]
pub(crate) struct HistogramH {
    h: Ptr<sys::pcpu_histogram>,
    _reg: Arc<Registry>,
}

impl HistogramH {
    /// # Safety
    /// `raw` is a histogram series of `reg`.
    pub(crate) unsafe fn new(raw: NonNull<sys::pcpu_histogram>, reg: Arc<Registry>) -> HistogramH {
        HistogramH { h: Ptr(raw), _reg: reg }
    }
}

/// Histogram buckets are in billionths of the recorded unit (the family's
/// scale_exp10): exact bounds to 10^-9, up to 9.22e9; the values and sums
/// themselves cover every `f64` (a family with fractions).
pub(crate) const SCALE: i32 = -9;

/// An `f64` bucket bound as the integer the layout takes.
#[inline]
pub(crate) fn to_recorded(v: f64) -> i64 {
    (v * 1e9).round() as i64
}

impl GaugeFn for GaugeH {
    fn increment(&self, value: f64) {
        // SAFETY: a live series of a family with fractions (the registry
        // is held).
        unsafe { sys::pcpu_gauge_add_double(self.g.0.as_ptr(), value) }
    }
    fn decrement(&self, value: f64) {
        // SAFETY: as above.
        unsafe { sys::pcpu_gauge_add_double(self.g.0.as_ptr(), -value) }
    }
    fn set(&self, value: f64) {
        // SAFETY: as above.
        unsafe { sys::pcpu_gauge_set_double(self.g.0.as_ptr(), value) };
    }
}

impl HistogramFn for HistogramH {
    fn record(&self, value: f64) {
        // SAFETY: a live series of a histogram family with fractions.
        unsafe { sys::pcpu_histogram_observe(self.h.0.as_ptr(), value) }
    }
    /// `count` observations, one by one (exact for any value and count;
    /// cost linear in `count`).
    fn record_many(&self, value: f64, count: usize) {
        for _ in 0..count {
            // SAFETY: as above.
            unsafe { sys::pcpu_histogram_observe(self.h.0.as_ptr(), value) }
        }
    }
}
