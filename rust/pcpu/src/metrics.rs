//! A `metrics` crate recorder backed by a pcpu [`Registry`]
//! (feature `metrics`): `metrics::counter!("x").increment(1)` becomes a
//! per-CPU add, and the registry writes the exposition (or is published
//! for `pcpustat`).
//!
//! ```
//! let rec = pcpu::metrics::Recorder::new()?;
//! let text = ::metrics::with_local_recorder(&rec, || {
//!     ::metrics::describe_counter!("requests", "Requests served.");
//!     ::metrics::counter!("requests", "method" => "GET").increment(3);
//!     ::metrics::gauge!("temperature").set(21.5);
//!     rec.registry().write(pcpu::Format::Prometheus)
//! })?;
//! assert!(text.contains("requests_total{method=\"GET\"} 3"));
//! assert!(text.contains("temperature 21.5"));
//! # Ok::<(), pcpu::Error>(())
//! ```
//!
//! Mapping: a key's name is a family, its labels' names the family's label
//! names (every key of one name must use the same label names, in the same
//! order: a key that does not gets a no-op handle, as a recorder does for
//! what it cannot record), its labels' values a series. Counters are
//! pcpu counters (exact, the inline add). Gauges and histograms take `f64`
//! values: they are recorded in billionths (a family exposed with
//! `scale_exp10 = -9`), exact to 10^-9; histograms use log-linear buckets
//! of 2^-3 relative width up to 2^62 billionths. A description given
//! before a key's first registration becomes its family's help.

use std::collections::HashMap;
use std::ffi::CString;
use std::marker::PhantomData;
use std::ptr::{self, NonNull};
use std::sync::{Arc, Mutex};

use ::metrics::{Counter, CounterFn, Gauge, GaugeFn, Histogram, HistogramFn, Key, KeyName, Metadata, SharedString, Unit};
use pcpu_sys as sys;

use crate::{HistogramLayout, Registry, Result, SeriesCounter};

/// A `metrics::Recorder` that records into a pcpu [`Registry`]. Install it
/// with `metrics::set_global_recorder` (or use it locally); read it through
/// [`Recorder::registry`].
pub struct Recorder {
    reg: Arc<Registry>,
    help: Mutex<HashMap<String, String>>,
    layout: HistogramLayout,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").finish_non_exhaustive()
    }
}

/// Exposed value = recorded value × 10^-9: gauges and histograms record
/// billionths of their `f64` values.
const NANO: i32 = -9;

impl Recorder {
    /// A recorder over a new registry.
    ///
    /// Errors: as [`Registry::new`]. Thread-safe. Cost: a registry.
    ///
    /// ```
    /// let rec = pcpu::metrics::Recorder::new()?;
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn new() -> Result<Recorder> {
        Ok(Recorder::with_registry(Arc::new(Registry::new()?)))
    }

    /// A recorder over `reg` (e.g. one published with
    /// [`Registry::publish`], so `pcpustat` reads what `metrics` records).
    /// Cost: none.
    ///
    /// ```
    /// let reg = std::sync::Arc::new(pcpu::Registry::new()?);
    /// let rec = pcpu::metrics::Recorder::with_registry(reg.clone());
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn with_registry(reg: Arc<Registry>) -> Recorder {
        Recorder {
            reg,
            help: Mutex::new(HashMap::new()),
            layout: HistogramLayout::log_linear(3, 1 << 62),
        }
    }

    /// The registry the recorder writes into. Cost: none.
    ///
    /// ```
    /// let rec = pcpu::metrics::Recorder::new()?;
    /// assert_eq!(rec.registry().write(pcpu::Format::Prometheus)?, "");
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn registry(&self) -> &Arc<Registry> {
        &self.reg
    }

    fn describe(&self, key: KeyName, description: SharedString) {
        self.help.lock().unwrap().insert(key.as_str().to_string(), description.into_owned());
    }

    /// The series of `key` in a family of `type_`, or None (no-op handle).
    fn series(&self, key: &Key, type_: sys::pcpu_metric_type) -> Option<NonNull<std::ffi::c_void>> {
        let help = self.help.lock().unwrap().get(key.name()).cloned().unwrap_or_default();
        let names: Vec<CString> = key.labels().map(|l| CString::new(l.key()).ok()).collect::<Option<_>>()?;
        let values: Vec<CString> = key.labels().map(|l| CString::new(l.value()).ok()).collect::<Option<_>>()?;
        let name_ptrs: Vec<_> = names.iter().map(|c| c.as_ptr()).collect();
        let value_ptrs: Vec<_> = values.iter().map(|c| c.as_ptr()).collect();
        let (cname, chelp) = (CString::new(key.name()).ok()?, CString::new(help).ok()?);
        let layout = self.layout.as_raw();
        let desc = sys::pcpu_family_desc {
            name: cname.as_ptr(),
            help: chelp.as_ptr(),
            unit: ptr::null(),
            type_,
            nlabels: names.len() as u32,
            label_names: if names.is_empty() { ptr::null() } else { name_ptrs.as_ptr() },
            scale_exp10: if type_ == sys::PCPU_METRIC_COUNTER { 0 } else { NANO },
            histogram: if type_ == sys::PCPU_METRIC_HISTOGRAM { &layout } else { ptr::null() },
        };
        let vals = if values.is_empty() { ptr::null() } else { value_ptrs.as_ptr() };
        // SAFETY: every pointer lives for the calls (the library copies).
        unsafe {
            let fam = sys::pcpu_registry_family(self.reg.as_raw(), &desc);
            if fam.is_null() {
                return None;
            }
            let p: *mut std::ffi::c_void = match type_ {
                sys::PCPU_METRIC_COUNTER => sys::pcpu_family_counter(fam, vals).cast(),
                sys::PCPU_METRIC_GAUGE => sys::pcpu_family_gauge(fam, vals).cast(),
                _ => sys::pcpu_family_histogram(fam, vals).cast(),
            };
            NonNull::new(p)
        }
    }
}

/// A series handle with the registry it lives in: the `Arc` keeps the
/// registry, and so the series (never removed), alive as long as the
/// `metrics` handle.
struct Handle<T> {
    _reg: Arc<Registry>,
    h: T,
}

impl CounterFn for Handle<SeriesCounter<'static>> {
    fn increment(&self, value: u64) {
        self.h.add(value as i64);
    }

    /// Sets the counter by adding the difference from its value: not atomic
    /// with concurrent increments (what lands between the read and the add
    /// is kept, then overwritten by the difference).
    fn absolute(&self, value: u64) {
        let now = self.h.get();
        self.h.add(value.wrapping_sub(now) as i64);
    }
}

fn nanos(v: f64) -> i64 {
    (v * 1e9).round() as i64
}

impl GaugeFn for Handle<Ptr<sys::pcpu_gauge>> {
    fn increment(&self, value: f64) {
        // SAFETY: a live series (the registry is held).
        unsafe { sys::pcpu_gauge_add(self.h.as_ptr(), nanos(value)) }
    }
    fn decrement(&self, value: f64) {
        // SAFETY: as above.
        unsafe { sys::pcpu_gauge_sub(self.h.as_ptr(), nanos(value)) }
    }
    fn set(&self, value: f64) {
        // SAFETY: as above.
        unsafe { sys::pcpu_gauge_set(self.h.as_ptr(), nanos(value)) };
    }
}

impl HistogramFn for Handle<Ptr<sys::pcpu_histogram>> {
    fn record(&self, value: f64) {
        // SAFETY: as above.
        unsafe { sys::pcpu_histogram_record(self.h.as_ptr(), nanos(value)) }
    }
    fn record_many(&self, value: f64, count: usize) {
        // SAFETY: as above.
        unsafe { sys::pcpu_histogram_record_n(self.h.as_ptr(), nanos(value), count as u64) }
    }
}

/// A C series pointer, shareable: the C series' operations are
/// thread-safe, and the Handle's Arc keeps the series alive.
struct Ptr<T>(NonNull<T>);
// SAFETY: as said above.
unsafe impl<T> Send for Ptr<T> {}
unsafe impl<T> Sync for Ptr<T> {}
impl<T> Ptr<T> {
    fn as_ptr(&self) -> *mut T {
        self.0.as_ptr()
    }
}

impl ::metrics::Recorder for Recorder {
    fn describe_counter(&self, key: KeyName, _unit: Option<Unit>, description: SharedString) {
        self.describe(key, description)
    }

    fn describe_gauge(&self, key: KeyName, _unit: Option<Unit>, description: SharedString) {
        self.describe(key, description)
    }

    fn describe_histogram(&self, key: KeyName, _unit: Option<Unit>, description: SharedString) {
        self.describe(key, description)
    }

    fn register_counter(&self, key: &Key, _metadata: &Metadata<'_>) -> Counter {
        let Some(p) = self.series(key, sys::PCPU_METRIC_COUNTER) else {
            return Counter::noop();
        };
        let Ok(off) = crate::inline::Offsets::get() else {
            return Counter::noop();
        };
        let h = SeriesCounter { raw: p.cast(), off, _reg: PhantomData };
        Counter::from_arc(Arc::new(Handle { _reg: self.reg.clone(), h }))
    }

    fn register_gauge(&self, key: &Key, _metadata: &Metadata<'_>) -> Gauge {
        match self.series(key, sys::PCPU_METRIC_GAUGE) {
            Some(p) => Gauge::from_arc(Arc::new(Handle { _reg: self.reg.clone(), h: Ptr(p.cast::<sys::pcpu_gauge>()) })),
            None => Gauge::noop(),
        }
    }

    fn register_histogram(&self, key: &Key, _metadata: &Metadata<'_>) -> Histogram {
        match self.series(key, sys::PCPU_METRIC_HISTOGRAM) {
            Some(p) => {
                Histogram::from_arc(Arc::new(Handle { _reg: self.reg.clone(), h: Ptr(p.cast::<sys::pcpu_histogram>()) }))
            }
            None => Histogram::noop(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "reads text the C library allocated, which Miri cannot see")]
    fn threads_exact_through_metrics() {
        let rec = Recorder::new().unwrap();
        let c = ::metrics::with_local_recorder(&rec, || ::metrics::counter!("hits", "k" => "v"));
        std::thread::scope(|s| {
            for _ in 0..4 {
                let c = c.clone();
                s.spawn(move || {
                    for _ in 0..100_000 {
                        c.increment(1)
                    }
                });
            }
        });
        let text = rec.registry().write(crate::Format::Prometheus).unwrap();
        assert!(text.contains("hits_total{k=\"v\"} 400000"), "{text}");
        // Another label set for the same name is refused: a no-op handle.
        let other = ::metrics::with_local_recorder(&rec, || ::metrics::counter!("hits", "x" => "y"));
        other.increment(1);
        let h = ::metrics::with_local_recorder(&rec, || ::metrics::histogram!("lat"));
        h.record(0.5);
        h.record(1.5);
        let text = rec.registry().write(crate::Format::Prometheus).unwrap();
        assert!(text.contains("lat_count 2") && text.contains("lat_sum 2"), "{text}");
    }
}
