//! Histograms: their bucket layouts ([`HistogramLayout`]) and the owned
//! [`Histogram`]; a registry's histogram series share the operations
//! (`histogram_ops!`).

use std::fmt;
use std::ptr::{self, NonNull};

use pcpu_sys as sys;

use crate::{check_layout, errno_error, Result};

/// The buckets of a histogram.
///
/// ```
/// let explicit = pcpu::HistogramLayout::explicit(&[10, 100, 1000]);
/// let loglin = pcpu::HistogramLayout::log_linear(3, 1_000_000_000);
/// # let _ = (explicit, loglin);
/// ```
#[derive(Debug, Clone)]
pub struct HistogramLayout {
    bounds: Vec<i64>,
    raw: sys::pcpu_histogram_layout,
}

// SAFETY: the raw layout's pointer points into `bounds`, owned and never
// mutated.
unsafe impl Send for HistogramLayout {}
unsafe impl Sync for HistogramLayout {}

impl HistogramLayout {
    fn zeroed(scheme: sys::pcpu_histogram_scheme) -> sys::pcpu_histogram_layout {
        sys::pcpu_histogram_layout {
            scheme,
            bounds: std::ptr::null(),
            nbounds: 0,
            precision_bits: 0,
            max_value: 0,
            export_per_octave: 0,
            export_min: 0,
            schema: 0,
            scale_exp10: 0,
        }
    }

    /// Explicit inclusive upper bounds (strictly increasing), plus +Inf.
    /// Checked when a histogram is made. Cost: a copy of the bounds.
    ///
    /// ```
    /// let l = pcpu::HistogramLayout::explicit(&[1, 2, 3]);
    /// let h = pcpu::Histogram::new(&l)?;
    /// assert_eq!(h.buckets(), 4);
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn explicit(bounds: &[i64]) -> HistogramLayout {
        let bounds = bounds.to_vec();
        let mut raw = Self::zeroed(sys::PCPU_HISTOGRAM_EXPLICIT);
        raw.nbounds = bounds.len();
        HistogramLayout { bounds, raw }
    }

    /// Log-linear buckets of relative precision 2^-`precision_bits`, up to
    /// `max_value` (HdrHistogram's). Cost: none.
    ///
    /// ```
    /// let h = pcpu::Histogram::new(&pcpu::HistogramLayout::log_linear(2, 1 << 20))?;
    /// h.record(1000);
    /// assert_eq!(h.count(), 1);
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn log_linear(precision_bits: u32, max_value: i64) -> HistogramLayout {
        let mut raw = Self::zeroed(sys::PCPU_HISTOGRAM_LOG_LINEAR);
        raw.precision_bits = precision_bits;
        raw.max_value = max_value;
        HistogramLayout { bounds: Vec::new(), raw }
    }

    /// Exponential buckets, as Prometheus native histograms and
    /// OpenTelemetry exponential histograms have them: bucket `i` holds
    /// (base^(i-1), base^i], base = 2^(2^-`schema`) (schema -4..8; 3: eight
    /// buckets per power of two, each at most 9.05% wide), in the exposed
    /// unit: value × 10^`scale_exp10` (a registry family uses its own
    /// scale instead). They cover every positive `i64`; values too small to
    /// have a bucket of their own share the zero bucket, negative ones are
    /// recorded as 0. The protobuf exposition writes them as a native
    /// histogram; the text formats write classic `le` buckets, a fixed
    /// subset ([`HistogramLayout::export`]). Checked when a histogram is
    /// made (EINVAL for a schema out of range, or one that makes more than
    /// 4096 buckets). Cost: none.
    ///
    /// ```
    /// let h = pcpu::Histogram::new(&pcpu::HistogramLayout::exponential(3, 0))?;
    /// h.record(1000);
    /// assert_eq!(h.count(), 1);
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn exponential(schema: i32, scale_exp10: i32) -> HistogramLayout {
        let mut raw = Self::zeroed(sys::PCPU_HISTOGRAM_EXPONENTIAL);
        raw.schema = schema;
        raw.scale_exp10 = scale_exp10;
        HistogramLayout { bounds: Vec::new(), raw }
    }

    /// Which buckets of a log-linear or exponential layout the text
    /// expositions write as classic `le` buckets: `per_octave` bounds per
    /// power of two (1, 2, 4 ... 64; 0: the library's default, 4), from
    /// the first bound at or above `min` (in recorded units; smaller ones
    /// are folded into it; 0: from the first bucket). Every bucket stays
    /// in reads, quantiles and native (protobuf) buckets. Explicit layouts
    /// write every bound and ignore this. Checked when a histogram is made.
    /// Cost: none.
    ///
    /// ```
    /// let l = pcpu::HistogramLayout::exponential(3, 0).export(1, 1000);
    /// let reg = pcpu::Registry::new()?;
    /// reg.histogram_family("size", "Sizes.", &[], &l)?.with(&[])?.record(5000);
    /// let text = reg.write(pcpu::Format::Prometheus)?;
    /// assert!(text.contains("size_bucket{le=\"8192.0\"} 1"));
    /// assert!(!text.contains("le=\"512.0\""));
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn export(mut self, per_octave: u32, min: i64) -> HistogramLayout {
        self.raw.export_per_octave = per_octave;
        self.raw.export_min = min;
        self
    }

    /// An exponential layout's largest classic `le` bound (in recorded
    /// units; 0: none): buckets above it are left out of the text
    /// expositions (their values count in +Inf; reads, quantiles and
    /// native buckets keep them). Ignored by other layouts (a log-linear
    /// one ends at its `max_value`). Checked when a histogram is made
    /// (negative: an error). Cost: none.
    ///
    /// ```
    /// let l = pcpu::HistogramLayout::exponential(3, 0).export(1, 1000).export_max(100_000);
    /// let reg = pcpu::Registry::new()?;
    /// reg.histogram_family("size", "Sizes.", &[], &l)?.with(&[])?.record(5_000_000);
    /// let text = reg.write(pcpu::Format::Prometheus)?;
    /// assert!(text.contains("size_bucket{le=\"65536.0\"} 0"));
    /// assert!(!text.contains("le=\"131072.0\""));
    /// assert!(text.contains("size_bucket{le=\"+Inf\"} 1"));
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn export_max(mut self, max: i64) -> HistogramLayout {
        if self.raw.scheme == sys::PCPU_HISTOGRAM_EXPONENTIAL {
            self.raw.max_value = max;
        }
        self
    }

    /// The C description, pointing into `self`.
    pub(crate) fn as_raw(&self) -> sys::pcpu_histogram_layout {
        let mut raw = self.raw;
        if !self.bounds.is_empty() {
            raw.bounds = self.bounds.as_ptr();
        }
        raw
    }
}

macro_rules! histogram_ops {
    () => {
        /// Records one observation of `v`: its bucket's count and sum,
        /// exactly. Thread-safe; async-signal-safe. Cost: a call, a bucket
        /// search and an rseq add of the pair.
        ///
        /// ```
        /// let h = pcpu::Histogram::new(&pcpu::HistogramLayout::explicit(&[10]))?;
        /// h.record(3);
        /// assert_eq!(h.count(), 1);
        /// # Ok::<(), pcpu::Error>(())
        /// ```
        #[inline]
        pub fn record(&self, v: i64) {
            // SAFETY: a live histogram.
            unsafe { pcpu_sys::pcpu_histogram_record(self.raw.as_ptr(), v) }
        }

        /// Records `n` observations of `v`. Thread-safe; async-signal-safe.
        /// Cost: as `record`.
        ///
        /// ```
        /// let h = pcpu::Histogram::new(&pcpu::HistogramLayout::explicit(&[10]))?;
        /// h.record_n(20, 3);
        /// assert_eq!((h.count(), h.sum()), (3, 60));
        /// # Ok::<(), pcpu::Error>(())
        /// ```
        pub fn record_n(&self, v: i64, n: u64) {
            // SAFETY: a live histogram.
            unsafe { pcpu_sys::pcpu_histogram_record_n(self.raw.as_ptr(), v, n) }
        }

        /// Number of buckets, +Inf included. Thread-safe. Cost: a load.
        ///
        /// ```
        /// let h = pcpu::Histogram::new(&pcpu::HistogramLayout::explicit(&[1, 2]))?;
        /// assert_eq!(h.buckets(), 3);
        /// # Ok::<(), pcpu::Error>(())
        /// ```
        pub fn buckets(&self) -> usize {
            // SAFETY: a live histogram.
            unsafe { pcpu_sys::pcpu_histogram_nbuckets(self.raw.as_ptr()) }
        }

        /// The smallest and largest value bucket `b` holds (inclusive; the
        /// first explicit bucket starts at `i64::MIN`, the +Inf bucket ends
        /// at `i64::MAX`), or None if `b` is out of range. Thread-safe.
        /// Cost: a few arithmetic operations or loads.
        ///
        /// ```
        /// let h = pcpu::Histogram::new(&pcpu::HistogramLayout::explicit(&[10, 100]))?;
        /// assert_eq!(h.bucket_range(1), Some((11, 100)));
        /// assert_eq!(h.bucket_range(2), Some((101, i64::MAX)));
        /// assert_eq!(h.bucket_range(3), None);
        /// # Ok::<(), pcpu::Error>(())
        /// ```
        pub fn bucket_range(&self, b: usize) -> Option<(i64, i64)> {
            let (mut lo, mut hi) = (0i64, 0i64);
            // SAFETY: a live histogram; the library checks b.
            let rc = unsafe { pcpu_sys::pcpu_histogram_bucket_range(self.raw.as_ptr(), b, &mut lo, &mut hi) };
            (rc == 0).then_some((lo, hi))
        }

        /// Per-bucket counts, the total count and the sum of observations.
        /// Thread-safe. Cost: a read of each used slot's buckets.
        ///
        /// ```
        /// let h = pcpu::Histogram::new(&pcpu::HistogramLayout::explicit(&[10]))?;
        /// h.record(50);
        /// assert_eq!(h.read(), (vec![0, 1], 1, 50));
        /// # Ok::<(), pcpu::Error>(())
        /// ```
        pub fn read(&self) -> (Vec<u64>, u64, i64) {
            let n = self.buckets();
            let mut counts = vec![0u64; n];
            let (mut count, mut sum) = (0u64, 0i64);
            // SAFETY: counts holds n words.
            let rc = unsafe {
                pcpu_sys::pcpu_histogram_read(self.raw.as_ptr(), counts.as_mut_ptr(), n, &mut count, &mut sum)
            };
            debug_assert_eq!(rc, 0);
            (counts, count, sum)
        }

        /// The number of observations. Thread-safe. Cost: as `read`.
        ///
        /// ```
        /// let h = pcpu::Histogram::new(&pcpu::HistogramLayout::explicit(&[10]))?;
        /// assert_eq!(h.count(), 0);
        /// # Ok::<(), pcpu::Error>(())
        /// ```
        pub fn count(&self) -> u64 {
            self.read().1
        }

        /// The sum of observations. Thread-safe. Cost: as `read`.
        ///
        /// ```
        /// let h = pcpu::Histogram::new(&pcpu::HistogramLayout::explicit(&[10]))?;
        /// h.record(-4);
        /// assert_eq!(h.sum(), -4);
        /// # Ok::<(), pcpu::Error>(())
        /// ```
        pub fn sum(&self) -> i64 {
            self.read().2
        }

        /// Observations a sparse histogram could not store: a bucket
        /// group that could not be made (ENOMEM). 0 for a dense one, and
        /// while memory lasts. Thread-safe. Cost: a load.
        ///
        /// ```
        /// let h = pcpu::Histogram::new_sparse(&pcpu::HistogramLayout::explicit(&[10]))?;
        /// h.record(3);
        /// assert_eq!(h.lost(), 0);
        /// # Ok::<(), pcpu::Error>(())
        /// ```
        pub fn lost(&self) -> u64 {
            // SAFETY: a live histogram.
            unsafe { pcpu_sys::pcpu_histogram_lost(self.raw.as_ptr()) }
        }
    };
}
pub(crate) use histogram_ops;

/// A histogram of `i64` observations, owned.
///
/// ```
/// let h = pcpu::Histogram::new(&pcpu::HistogramLayout::explicit(&[10, 100]))?;
/// h.record(5);
/// h.record(50);
/// h.record(500);
/// let (counts, count, sum) = h.read();
/// assert_eq!((counts, count, sum), (vec![1, 1, 1], 3, 555));
/// # Ok::<(), pcpu::Error>(())
/// ```
pub struct Histogram {
    raw: NonNull<sys::pcpu_histogram>,
}

// SAFETY: the C histogram's operations are thread-safe.
unsafe impl Send for Histogram {}
unsafe impl Sync for Histogram {}

impl Histogram {
    /// A new, empty histogram of `layout`.
    ///
    /// Errors: [`Error::Layout`](crate::Error::Layout);
    /// [`Error::Sys`](crate::Error::Sys) with EINVAL (a bad layout) or
    /// ENOMEM. Thread-safe. Cost: a counter array allocation.
    ///
    /// ```
    /// assert!(pcpu::Histogram::new(&pcpu::HistogramLayout::explicit(&[3, 2])).is_err());
    /// ```
    pub fn new(layout: &HistogramLayout) -> Result<Histogram> {
        check_layout()?;
        let raw = layout.as_raw();
        // SAFETY: raw points into layout, alive for the call (copied).
        let p = unsafe { sys::pcpu_histogram_create(&raw) };
        NonNull::new(p).map(|raw| Histogram { raw }).ok_or_else(errno_error)
    }

    /// A new, empty histogram of `layout` whose buckets take memory as
    /// they are used (`PCPU_HISTOGRAM_SPARSE`): groups of 8 buckets, each
    /// made at its first record, so a histogram whose values fall in k
    /// buckets costs about k buckets per CPU that records, not the
    /// layout's width. A record loads its group's address first (1.09-1.14
    /// times a dense record, bench/stats.md), and the first record
    /// into a group allocates: not async-signal-safe. A group that cannot
    /// be made is counted by [`lost`](Histogram::lost), never put in
    /// another bucket.
    ///
    /// Errors: as [`new`](Histogram::new). Thread-safe. Cost: one pointer
    /// per group.
    ///
    /// ```
    /// let layout = pcpu::HistogramLayout::exponential(3, -9);
    /// let h = pcpu::Histogram::new_sparse(&layout)?;
    /// h.record(1_000_000);
    /// assert_eq!((h.count(), h.sum()), (1, 1_000_000));
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn new_sparse(layout: &HistogramLayout) -> Result<Histogram> {
        check_layout()?;
        let raw = layout.as_raw();
        // SAFETY: raw points into layout, alive for the call (copied); a
        // NULL zone is the statistics layer's default one.
        let p = unsafe { sys::pcpu_histogram_create_ex(ptr::null_mut(), &raw, sys::PCPU_HISTOGRAM_SPARSE) };
        NonNull::new(p).map(|raw| Histogram { raw }).ok_or_else(errno_error)
    }

    histogram_ops!();
}

impl Drop for Histogram {
    fn drop(&mut self) {
        // SAFETY: owned.
        unsafe { sys::pcpu_histogram_destroy(self.raw.as_ptr()) };
    }
}

impl fmt::Debug for Histogram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (counts, count, sum) = self.read();
        f.debug_struct("Histogram").field("counts", &counts).field("count", &count).field("sum", &sum).finish()
    }
}
