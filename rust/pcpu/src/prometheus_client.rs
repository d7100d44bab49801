//! pcpu's counters and gauges in a `prometheus-client` registry (feature
//! `prometheus-client`). Its own `Counter` cannot be backed by per-CPU
//! shards (its `Atomic` trait returns the previous value from `inc`), so
//! pcpu's types implement its `EncodeMetric` instead: register them (in a
//! [`Shared`] to keep a handle, as the registry takes what it is given),
//! and `prometheus_client::encoding::text::encode` writes their sums.
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

use crate::{Counter, Gauge};

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
