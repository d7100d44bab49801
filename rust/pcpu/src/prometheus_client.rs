//! pcpu's counters, gauges and histograms in a `prometheus-client`
//! registry (feature `prometheus-client`). Its own `Counter` cannot be
//! backed by per-CPU shards (its `Atomic` trait returns the previous value
//! from `inc`), so pcpu's types implement its `EncodeMetric` instead:
//! register them (in a [`Shared`] to keep a handle, as the registry takes
//! what it is given), and `prometheus_client::encoding::text::encode`
//! writes their values.
//!
//! Versions: prometheus-client 0.23 to 0.26 (the requirement is
//! `>=0.23, <0.27`). Cargo picks the newest release a requirement allows
//! and does not go down to match another crate's, so a program that
//! depends on the newest (what `cargo add prometheus-client` gives) shares
//! it with pcpu at once; one that stays on an older release of the range
//! makes pcpu use it too with `cargo update -p prometheus-client@0.26.0
//! --precise 0.23.1` (its own version for 0.23.1). Two versions in one
//! program are two different traits: `Shared<pcpu::Counter>` would then
//! not be an `EncodeMetric` of the program's registry (error E0277).
//!
//! ```
//! use prometheus_client::{encoding::text::encode, registry::Registry};
//! use pcpu::prometheus_client::Shared;
//! let c = Shared::new(pcpu::Counter::new()?);
//! let g = pcpu::Gauge::new()?;
//! let mut reg = Registry::default();
//! reg.register("requests", "Requests served", c.clone());
//! reg.register("in_flight", "Requests in flight", g);
//! c.add(3);
//! let mut text = String::new();
//! encode(&mut text, &reg).unwrap();
//! assert!(text.contains("requests_total 3"));
//! assert!(text.contains("in_flight 0"));
//! # Ok::<(), pcpu::Error>(())
//! ```

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};

use std::sync::Arc;

use crate::{Counter, Gauge, Histogram};

/// A pcpu counter or gauge shared between a prometheus-client registry and
/// the code that updates it (the registry owns what it registers). Derefs
/// to the handle. Cost of a clone: an `Arc` clone.
///
/// ```
/// let c = pcpu::prometheus_client::Shared::new(pcpu::Counter::new()?);
/// c.inc();
/// assert_eq!(c.get(), 1);
/// # Ok::<(), pcpu::Error>(())
/// ```
#[derive(Debug)]
pub struct Shared<T>(pub Arc<T>);

impl<T> Shared<T> {
    /// Wraps `v`. Cost: an allocation.
    ///
    /// ```
    /// let g = pcpu::prometheus_client::Shared::new(pcpu::Gauge::new()?);
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn new(v: T) -> Shared<T> {
        Shared(Arc::new(v))
    }
}

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared(self.0.clone())
    }
}

impl<T> std::ops::Deref for Shared<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: EncodeMetric> EncodeMetric for Shared<T> {
    fn encode(&self, encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }

    fn metric_type(&self) -> MetricType {
        self.0.metric_type()
    }
}

impl<T: TypedMetric> TypedMetric for Shared<T> {
    const TYPE: MetricType = T::TYPE;
}

impl TypedMetric for Counter {
    const TYPE: MetricType = MetricType::Counter;
}

/// The counter's sum ([`Counter::get`]), as a Prometheus counter.
impl EncodeMetric for Counter {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_counter::<NoLabelSet, u64, u64>(&self.get(), None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Counter
    }
}

impl TypedMetric for Gauge {
    const TYPE: MetricType = MetricType::Gauge;
}

/// The gauge's value ([`Gauge::get`]), as a Prometheus gauge.
impl EncodeMetric for Gauge {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_gauge(&self.get())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Gauge
    }
}

/// A pcpu histogram (owned, shared or in an `Arc`) whose values are
/// exposed × 10^`scale_exp10`: record nanoseconds, expose seconds with
/// `Scaled::new(h, -9)`. Cost of making one: none.
///
/// ```
/// use prometheus_client::{encoding::text::encode, registry::Registry};
/// use pcpu::prometheus_client::{Scaled, Shared};
/// let h = Shared::new(pcpu::Histogram::new(&pcpu::HistogramLayout::explicit(&[1_000_000, 10_000_000]))?);
/// let mut reg = Registry::default();
/// reg.register("rpc_seconds", "RPC time", Scaled::new(h.clone(), -9));
/// h.record(2_500_000); // 2.5 ms in nanoseconds
/// let mut text = String::new();
/// encode(&mut text, &reg).unwrap();
/// assert!(text.contains("rpc_seconds_bucket{le=\"0.01\"} 1"));
/// assert!(text.contains("rpc_seconds_sum 0.0025"));
/// # Ok::<(), pcpu::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Scaled<T> {
    metric: T,
    scale_exp10: i32,
}

impl<T> Scaled<T> {
    /// `metric`, exposed × 10^`scale_exp10` (-22..22).
    pub fn new(metric: T, scale_exp10: i32) -> Scaled<T> {
        Scaled { metric, scale_exp10 }
    }
}

impl<T> std::ops::Deref for Scaled<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.metric
    }
}

/// The histograms [`Scaled`] exposes: a [`Histogram`], or one shared.
pub trait AsHistogram: sealed::Sealed {
    /// The histogram.
    fn histogram(&self) -> &Histogram;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for crate::Histogram {}
    impl Sealed for super::Shared<crate::Histogram> {}
    impl Sealed for std::sync::Arc<crate::Histogram> {}
}

impl AsHistogram for Histogram {
    fn histogram(&self) -> &Histogram {
        self
    }
}

impl AsHistogram for Shared<Histogram> {
    fn histogram(&self) -> &Histogram {
        &self.0
    }
}

impl AsHistogram for Arc<Histogram> {
    fn histogram(&self) -> &Histogram {
        self
    }
}

/// The upper bound prometheus-client's encoders take for the +Inf bucket:
/// `f64::MAX` in 0.23 (its histograms end with it, and its text encoder
/// writes it as `+Inf`), `f64::INFINITY` in 0.26 (which writes `f64::MAX`
/// as a number). Asked of the encoder in use, once: a histogram of one
/// bucket bounded by `f64::MAX`, written by its text encoder.
fn inf_bound() -> f64 {
    static BOUND: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *BOUND.get_or_init(|| {
        #[derive(Debug)]
        struct Probe;
        impl EncodeMetric for Probe {
            fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
                encoder.encode_histogram::<NoLabelSet>(0.0, 0, &[(f64::MAX, 0)], None)
            }
            fn metric_type(&self) -> MetricType {
                MetricType::Histogram
            }
        }
        let mut reg = prometheus_client::registry::Registry::default();
        reg.register("probe", "probe", Probe);
        let mut text = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut text, &reg);
        if text.contains("le=\"+Inf\"") {
            f64::MAX
        } else {
            f64::INFINITY
        }
    })
}

/// `h`'s buckets as prometheus-client wants them: (upper bound × 10^scale,
/// count in the bucket), +Inf last; the sum scaled; the count.
fn encode_histogram(h: &Histogram, scale_exp10: i32, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
    let (counts, count, sum) = h.read();
    let scale = 10f64.powi(scale_exp10);
    let n = counts.len();
    let inf = inf_bound();
    let buckets: Vec<(f64, u64)> = counts
        .iter()
        .enumerate()
        .map(|(b, &c)| {
            let upper = if b + 1 == n { inf } else { h.bucket_range(b).map_or(inf, |(_, hi)| hi as f64 * scale) };
            (upper, c)
        })
        .collect();
    encoder.encode_histogram::<NoLabelSet>(sum as f64 * scale, count, &buckets, None)
}

impl TypedMetric for Histogram {
    const TYPE: MetricType = MetricType::Histogram;
}

/// Every bucket of the histogram's layout (give it an explicit layout: a
/// log-linear or exponential one has hundreds), its sum and count, in the
/// recorded unit (see [`Scaled`] for another).
impl EncodeMetric for Histogram {
    fn encode(&self, encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encode_histogram(self, 0, encoder)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

impl<T: AsHistogram> TypedMetric for Scaled<T> {
    const TYPE: MetricType = MetricType::Histogram;
}

/// As [`Histogram`]'s, with bounds and sum × 10^scale.
impl<T: AsHistogram> EncodeMetric for Scaled<T> {
    fn encode(&self, encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encode_histogram(self.metric.histogram(), self.scale_exp10, encoder)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::Registry;

    /// All three kinds through a prometheus-client registry, its own
    /// counter beside them: the text it writes holds pcpu's values.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "prometheus-client's encoder formats floats with code Miri runs slowly; the values are read through C"
    )]
    fn encode_all_kinds() {
        let c = Shared::new(Counter::new().unwrap());
        let g = Shared::new(Gauge::new().unwrap());
        let h = Shared::new(Histogram::new(&crate::HistogramLayout::explicit(&[10, 100])).unwrap());
        let mut reg = Registry::default();
        reg.register("jobs", "Jobs run", c.clone());
        reg.register("depth", "Queue depth", g.clone());
        reg.register("size", "Sizes", h.clone());
        reg.register("wait_seconds", "Waits", Scaled::new(h.clone(), -3));
        let own = prometheus_client::metrics::counter::Counter::<u64>::default();
        reg.register("own", "prometheus-client's own", own.clone());
        c.add(7);
        g.set(-3);
        own.inc();
        for v in [5, 50, 500, 50] {
            h.record(v);
        }
        let mut text = String::new();
        encode(&mut text, &reg).unwrap();
        for want in [
            "# TYPE jobs counter\njobs_total 7\n",
            "depth -3\n",
            "# TYPE size histogram\n",
            "size_sum 605.0\nsize_count 4\n",
            "size_bucket{le=\"10.0\"} 1\n",
            "size_bucket{le=\"100.0\"} 3\n",
            "size_bucket{le=\"+Inf\"} 4\n",
            "wait_seconds_sum 0.605\n",
            "wait_seconds_bucket{le=\"0.1\"} 3\n",
            "own_total 1\n",
        ] {
            assert!(text.contains(want), "missing {want:?} in\n{text}");
        }
    }
}
