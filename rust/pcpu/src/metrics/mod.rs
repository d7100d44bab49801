//! A `metrics` crate recorder backed by a pcpu [`Registry`] (feature
//! `metrics`): `metrics::counter!("x").increment(1)` becomes a per-CPU
//! add, and the registry writes the exposition (or is published for
//! `pcpustat` and pcpu's exporter).
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
//! # The macros' path
//!
//! `counter!(...)`, `gauge!(...)` and `histogram!(...)` call the recorder
//! on every use. A key the recorder has seen is found without a lock and
//! without an allocation (a lock-free table keyed by the key's hash), and
//! the handle given back is the calling thread's own copy, so that
//! threads using one key do not fight for its reference count. Only a
//! key's first registration takes the recorder's mutex. A handle kept
//! (`let c = counter!("x");`) costs one inline per-CPU add per increment.
//! `../bench/rust.md` compares both paths with metrics-exporter-prometheus.
//!
//! # Mapping
//!
//! A key's name is a metric, its labels' names a label set of it (a pcpu
//! family), its labels' values a series. Keys of one name with other
//! label names are other label sets of the same metric, under one HELP
//! and TYPE (`requests_total{path="/x"}` beside `requests_total`), as
//! metrics-exporter-prometheus shows them; the same label names in
//! another order are the same label set (the values are put in its
//! order). Counters are pcpu counters (exact, the inline add). Gauges and
//! histograms take any `f64` (families with fractions, pcpu/fraction.h):
//! exact for integers and for decimals to 10^-9 (0.1 added ten times is
//! 1), and the whole range beyond (`set(16e9)` shows `16000000000`,
//! `1e-12` and `1e300` show as they are). A description given before a
//! key's first registration becomes its family's help.
//!
//! Names are sanitised as metrics-exporter-prometheus sanitises them: each
//! character a Prometheus metric name (`[a-zA-Z_:][a-zA-Z0-9_:]*`) or
//! label name (`[a-zA-Z_][a-zA-Z0-9_]*`) may not hold where it stands
//! becomes `_` (`bad name-with.dots` is `bad_name_with_dots`). Where that
//! would still be refused by Prometheus, the recorder renames: an empty
//! name is `_`, a label name starting with `__` (reserved) gets the prefix
//! `key` (`__x` is `key__x`), a histogram's label `le` is `key_le`. A key
//! that names a label twice keeps the last value (at the first one's
//! place). Label values are kept as they are (the expositions escape
//! them).
//!
//! What is refused: a name registered as another kind (a gauge `x` after
//! a counter `x`), a series that equals one of another label set of its
//! name (an empty label value counts as an absent label), a label value
//! with a NUL byte, a name or value over the C library's limits (200 and 2048
//! bytes), a name whose samples another family writes (a gauge
//! `x_count` beside a histogram `x`). The facade lets a recorder refuse
//! only with a no-op handle; this one also counts each refused key in the
//! counter `pcpu_metrics_refused_keys_total` of its registry (made at the
//! first refusal) and in [`Recorder::refused`], and keeps the reason
//! ([`Recorder::last_refusal`]).
//!
//! # Histograms
//!
//! By default a histogram has native (exponential) buckets of schema 3:
//! eight per power of two, each at most 9.05% wide, over every value from
//! 10^-9 to 9.22e9 (larger ones count in +Inf; the sum takes any value). A scraper that takes the protobuf exposition gets
//! them as a Prometheus native histogram: pcpu's exporter (`pcpustat
//! serve`) negotiates it for a published registry, and a program that
//! serves its own `/metrics` answers with
//! `registry().write_bytes(Format::negotiate(accept))` (the protobuf
//! writer is there with the crate's feature `protobuf`, or an installed
//! library built with protobuf-c). The text formats write a small
//! classic set: one `le` per power of two from 2^-9 (0.00195, the first
//! at or above 0.001; smaller values count there) to 2^9 (512, the last
//! at or below 1000; larger values count in +Inf only): 19 buckets and
//! +Inf, the same for every unit a histogram records (seconds, bytes...:
//! give byte counts a `classic_max` of their own). Both are configurable,
//! for all histograms or per metric name, as metrics-exporter-prometheus's
//! builder does it:
//!
//! ```
//! use pcpu::metrics::{Buckets, Matcher, Recorder};
//! let rec = Recorder::builder()
//!     .histograms_for(Matcher::Suffix("_seconds".into()), Buckets::Classic(vec![0.005, 0.01, 0.1, 1.0]))
//!     .build()?;
//! let text = ::metrics::with_local_recorder(&rec, || {
//!     ::metrics::histogram!("request_seconds").record(0.05);
//!     rec.registry().write(pcpu::Format::Prometheus)
//! })?;
//! assert!(text.contains("request_seconds_bucket{le=\"0.1\"} 1"));
//! assert_eq!(text.matches("request_seconds_bucket").count(), 5);
//! # Ok::<(), pcpu::Error>(())
//! ```

use std::sync::{Arc, Mutex, MutexGuard};

use ::metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, SharedString, Unit};

use crate::{Error, HistogramLayout, Registry, Result};

mod families;
mod names;
mod series;
mod table;

use families::{Families, Kind};
use series::{CounterH, GaugeH, HistogramH, Series};
use table::Table;

/// Which metric names a histogram setting applies to (the sanitised
/// name, as metrics-exporter-prometheus's `Matcher`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Matcher {
    /// The whole name.
    Full(String),
    /// The name's beginning.
    Prefix(String),
    /// The name's end.
    Suffix(String),
}

impl Matcher {
    /// Whether `name` matches. Cost: a string compare.
    ///
    /// ```
    /// use pcpu::metrics::Matcher;
    /// assert!(Matcher::Suffix("_seconds".into()).matches("rpc_seconds"));
    /// assert!(!Matcher::Full("rpc".into()).matches("rpc_seconds"));
    /// ```
    pub fn matches(&self, name: &str) -> bool {
        match self {
            Matcher::Full(s) => name == s,
            Matcher::Prefix(s) => name.starts_with(s.as_str()),
            Matcher::Suffix(s) => name.ends_with(s.as_str()),
        }
    }

    fn sanitised(&self) -> Matcher {
        let s = |x: &String| names::metric_name(x).into_owned();
        match self {
            Matcher::Full(x) => Matcher::Full(s(x)),
            Matcher::Prefix(x) => Matcher::Prefix(s(x)),
            Matcher::Suffix(x) => Matcher::Suffix(s(x)),
        }
    }
}

/// How a histogram buckets its values (in the unit recorded: seconds,
/// bytes...).
#[derive(Debug, Clone, PartialEq)]
pub enum Buckets {
    /// Native (exponential) buckets: 2^`schema` per power of two (schema
    /// -4..8; 3: 8 buckets, each at most 9.05% wide), as a Prometheus
    /// native histogram in the protobuf exposition. The text formats write
    /// `classic_per_octave` `le` buckets per power of two (1, 2, 4 ... 64)
    /// from `classic_min` up (smaller values count in the first) to
    /// `classic_max` (larger ones count in +Inf only).
    Native {
        /// The native histogram schema.
        schema: i32,
        /// Classic `le` buckets per power of two in the text formats.
        classic_per_octave: u32,
        /// The smallest classic `le` (rounded to a bucket bound).
        classic_min: f64,
        /// The largest classic `le` (the last bucket bound at or below
        /// it); `f64::INFINITY`: up to 2^33 (8.6e9).
        classic_max: f64,
    },
    /// Classic buckets with these inclusive upper bounds, and +Inf, in
    /// every format. Each is rounded to 10^-9 (the recorded unit) and must
    /// lie within ±9.22e9; they must be strictly increasing once rounded.
    Classic(Vec<f64>),
}

impl Default for Buckets {
    /// `Native { schema: 3, classic_per_octave: 1, classic_min: 0.001,
    /// classic_max: 1000.0 }`: 19 classic buckets and +Inf.
    fn default() -> Buckets {
        Buckets::Native { schema: 3, classic_per_octave: 1, classic_min: 0.001, classic_max: 1000.0 }
    }
}

impl Buckets {
    /// The pcpu layout, in billionths; checked by making a histogram of it
    /// (not the default's: known good, and a recorder over a given
    /// registry is then made without a call that could fail).
    fn layout(&self) -> Result<HistogramLayout> {
        let invalid = |message: String| Error::Sys { errno: 22, message };
        let l = match self {
            Buckets::Native { schema, classic_per_octave, classic_min, classic_max } => {
                if !classic_min.is_finite() || *classic_min < 0.0 {
                    return Err(invalid(format!(
                        "pcpu::metrics: classic_min {classic_min} is not a finite value >= 0"
                    )));
                }
                if classic_max.is_nan() || *classic_max < *classic_min || *classic_max <= 0.0 {
                    return Err(invalid(format!(
                        "pcpu::metrics: classic_max {classic_max} is not above 0 and at or above classic_min"
                    )));
                }
                let max = if *classic_max < 9.2e9 { series::to_recorded(*classic_max) } else { 0 };
                HistogramLayout::exponential(*schema, series::SCALE)
                    .export(*classic_per_octave, series::to_recorded(*classic_min))
                    .export_max(max)
            }
            Buckets::Classic(bounds) => {
                let mut b = Vec::with_capacity(bounds.len());
                for &x in bounds {
                    let r = series::to_recorded(x);
                    if !x.is_finite() || (r as f64 - x * 1e9).abs() > 0.5 || b.last().is_some_and(|&l| r <= l) {
                        return Err(invalid(format!(
                            "pcpu::metrics: bucket bound {x}: bounds must be finite, within ±9.22e9 and \
                             strictly increasing once rounded to 10^-9"
                        )));
                    }
                    b.push(r);
                }
                HistogramLayout::explicit(&b)
            }
        };
        if *self != Buckets::default() {
            crate::Histogram::new(&l)?;
        }
        Ok(l)
    }
}

/// The histogram layouts of a recorder: per matcher, else the default.
pub(crate) struct Histograms {
    rules: Vec<(Matcher, HistogramLayout)>,
    default: HistogramLayout,
}

impl Histograms {
    /// The layout of the histogram family `name` (sanitised): the first
    /// matching rule's, else the default.
    fn layout(&self, name: &str) -> &HistogramLayout {
        self.rules.iter().find(|(m, _)| m.matches(name)).map_or(&self.default, |(_, l)| l)
    }
}

/// Builds a [`Recorder`]: its registry, labels every series carries, and
/// histogram buckets.
///
/// ```
/// use pcpu::metrics::{Buckets, Matcher, Recorder};
/// let rec = Recorder::builder()
///     .global_label("service", "api")
///     .histograms(Buckets::Classic(vec![0.001, 0.01, 0.1, 1.0, 10.0]))
///     .histograms_for(Matcher::Prefix("payload_".into()), Buckets::default())
///     .build()?;
/// # Ok::<(), pcpu::Error>(())
/// ```
#[derive(Debug, Default)]
pub struct RecorderBuilder {
    registry: Option<Arc<Registry>>,
    global_labels: Vec<(String, String)>,
    default: Buckets,
    rules: Vec<(Matcher, Buckets)>,
}

impl RecorderBuilder {
    /// Record into `reg` (e.g. a registry published with
    /// [`Registry::publish`], so `pcpustat` reads what `metrics` records)
    /// instead of a new one. Cost: none.
    pub fn registry(mut self, reg: Arc<Registry>) -> RecorderBuilder {
        self.registry = Some(reg);
        self
    }

    /// A label every series carries (metrics-exporter-prometheus's global
    /// labels; the registry's constant labels, [`Registry::const_labels`]).
    /// A key may not use the name. Cost: none.
    pub fn global_label(mut self, name: &str, value: &str) -> RecorderBuilder {
        self.global_labels.push((name.to_string(), value.to_string()));
        self
    }

    /// The buckets of every histogram no [`RecorderBuilder::histograms_for`]
    /// rule matches ([`Buckets::default`] if not called). Cost: none.
    pub fn histograms(mut self, buckets: Buckets) -> RecorderBuilder {
        self.default = buckets;
        self
    }

    /// The buckets of the histograms whose (sanitised) name `matcher`
    /// matches; the first rule added that matches wins. Cost: none.
    pub fn histograms_for(mut self, matcher: Matcher, buckets: Buckets) -> RecorderBuilder {
        self.rules.push((matcher.sanitised(), buckets));
        self
    }

    /// The recorder.
    ///
    /// Errors: [`Error::Sys`] with EINVAL (bad buckets: bounds not
    /// strictly increasing, a schema out of -4..8...; bad global labels),
    /// EBUSY (global labels for a registry that has families already),
    /// ENOMEM; [`Error::Layout`]; [`Error::Nul`]. Thread-safe. Cost: a
    /// registry, and a histogram made and freed per bucket setting (the
    /// check).
    ///
    /// ```
    /// use pcpu::metrics::{Buckets, Recorder};
    /// assert!(Recorder::builder().histograms(Buckets::Classic(vec![2.0, 1.0])).build().is_err());
    /// ```
    pub fn build(self) -> Result<Recorder> {
        let histograms = Histograms {
            rules: self.rules.iter().map(|(m, b)| Ok((m.clone(), b.layout()?))).collect::<Result<_>>()?,
            default: self.default.layout()?,
        };
        let reg = match self.registry {
            Some(r) => r,
            None => Arc::new(Registry::new()?),
        };
        if !self.global_labels.is_empty() {
            let l: Vec<(&str, &str)> = self.global_labels.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
            reg.const_labels(&l)?;
        }
        Ok(Recorder {
            reg,
            counters: Table::new(),
            gauges: Table::new(),
            histograms: Table::new(),
            families: Mutex::new(Families::new(histograms)),
            stripes: series::stripes(),
        })
    }
}

/// A `metrics::Recorder` that records into a pcpu [`Registry`]. Install it
/// with `metrics::set_global_recorder` (or use it locally); read it through
/// [`Recorder::registry`].
pub struct Recorder {
    reg: Arc<Registry>,
    counters: Table<Key, Series<CounterH>>,
    gauges: Table<Key, Series<GaugeH>>,
    histograms: Table<Key, Series<HistogramH>>,
    families: Mutex<Families>,
    stripes: usize,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").finish_non_exhaustive()
    }
}

impl Recorder {
    /// A recorder over a new registry, with the default buckets.
    ///
    /// Errors: as [`Registry::new`]. Thread-safe. Cost: a registry.
    ///
    /// ```
    /// let rec = pcpu::metrics::Recorder::new()?;
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn new() -> Result<Recorder> {
        RecorderBuilder::default().build()
    }

    /// A builder, for the registry, global labels and buckets. Cost: none.
    ///
    /// ```
    /// let rec = pcpu::metrics::Recorder::builder().global_label("region", "eu").build()?;
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn builder() -> RecorderBuilder {
        RecorderBuilder::default()
    }

    /// A recorder over `reg`, with the default buckets (e.g. one published
    /// with [`Registry::publish`], so `pcpustat` reads what `metrics`
    /// records). Cost: none.
    ///
    /// ```
    /// let reg = std::sync::Arc::new(pcpu::Registry::new()?);
    /// let rec = pcpu::metrics::Recorder::with_registry(reg.clone());
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn with_registry(reg: Arc<Registry>) -> Recorder {
        // Nothing can fail: the default buckets are not checked (known
        // good), there are no global labels, and the registry exists.
        RecorderBuilder::default().registry(reg).build().expect("a recorder of default settings over a registry")
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

    /// How many registrations the recorder could not record (each gave a
    /// no-op handle; a key refused for good counts once). Thread-safe.
    /// Cost: the recorder's mutex.
    ///
    /// ```
    /// let rec = pcpu::metrics::Recorder::new()?;
    /// ::metrics::with_local_recorder(&rec, || {
    ///     ::metrics::counter!("x").increment(1);
    ///     ::metrics::gauge!("x").set(1.0); // a gauge of a counter's name
    /// });
    /// assert_eq!(rec.refused(), 1);
    /// assert!(rec.last_refusal().unwrap().contains("`x` is a counter"));
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn refused(&self) -> u64 {
        self.families().refused()
    }

    /// Why the last refused registration was refused. Thread-safe. Cost:
    /// the recorder's mutex and a copy.
    pub fn last_refusal(&self) -> Option<String> {
        self.families().last_refusal()
    }

    fn families(&self) -> MutexGuard<'_, Families> {
        // The state stays consistent if a panic unwound through it.
        self.families.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The series of `key` from `table`, made by `wrap` from the C series
    /// at the key's first registration.
    #[inline]
    fn series<'a, H: Clone>(
        &'a self,
        table: &'a Table<Key, Series<H>>,
        kind: Kind,
        key: &Key,
        wrap: impl FnOnce(std::ptr::NonNull<std::ffi::c_void>) -> Result<H>,
    ) -> Option<&'a Series<H>> {
        table.get_or_try_insert_with(
            key.get_hash(),
            |k| k == key,
            || {
                let mut fams = self.families();
                let made = fams.series(&self.reg, kind, key).and_then(|p| {
                    wrap(p).map_err(|e| families::Refusal { message: format!("pcpu::metrics: {e}"), permanent: true })
                });
                match made {
                    Ok(h) => Some((key.clone(), Series::new(h, self.stripes))),
                    Err(r) => {
                        fams.refuse(&self.reg, &r);
                        r.permanent.then(|| (key.clone(), Series::refused()))
                    }
                }
            },
        )
    }
}

impl ::metrics::Recorder for Recorder {
    fn describe_counter(&self, key: KeyName, _unit: Option<Unit>, description: SharedString) {
        self.families().describe(key.as_str(), true, &description)
    }

    fn describe_gauge(&self, key: KeyName, _unit: Option<Unit>, description: SharedString) {
        self.families().describe(key.as_str(), false, &description)
    }

    fn describe_histogram(&self, key: KeyName, _unit: Option<Unit>, description: SharedString) {
        self.families().describe(key.as_str(), false, &description)
    }

    #[inline]
    fn register_counter(&self, key: &Key, _metadata: &Metadata<'_>) -> Counter {
        // SAFETY (wrap): p is a counter series of self.reg.
        let s =
            self.series(&self.counters, Kind::Counter, key, |p| unsafe { CounterH::new(p.cast(), self.reg.clone()) });
        match s.and_then(Series::handle) {
            Some(h) => Counter::from_arc(h),
            None => Counter::noop(),
        }
    }

    #[inline]
    fn register_gauge(&self, key: &Key, _metadata: &Metadata<'_>) -> Gauge {
        // SAFETY (wrap): p is a gauge series of self.reg.
        let s = self.series(&self.gauges, Kind::Gauge, key, |p| Ok(unsafe { GaugeH::new(p.cast(), self.reg.clone()) }));
        match s.and_then(Series::handle) {
            Some(h) => Gauge::from_arc(h),
            None => Gauge::noop(),
        }
    }

    #[inline]
    fn register_histogram(&self, key: &Key, _metadata: &Metadata<'_>) -> Histogram {
        // SAFETY (wrap): p is a histogram series of self.reg.
        let s = self.series(&self.histograms, Kind::Histogram, key, |p| {
            Ok(unsafe { HistogramH::new(p.cast(), self.reg.clone()) })
        });
        match s.and_then(Series::handle) {
            Some(h) => Histogram::from_arc(h),
            None => Histogram::noop(),
        }
    }
}

#[cfg(test)]
mod tests;
