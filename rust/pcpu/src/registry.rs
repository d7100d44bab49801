//! The statistics layer: a registry of metric families with labels, its
//! snapshots and expositions, and publishing it as a segment that
//! `pcpustat` reads from outside the process.

use std::ffi::{c_char, c_uint, CStr, CString};
use std::fmt;
use std::marker::PhantomData;
use std::ptr::{self, NonNull};

use pcpu_sys as sys;

use crate::{check_layout, errno_error, last_error, Error, HistogramLayout, Result};

extern "C" {
    // The C library's buffers are malloc()ed; they are released with free().
    fn free(p: *mut std::ffi::c_void);
}

fn cstring(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::Nul)
}

pub(crate) fn stats_error() -> Error {
    // SAFETY: a thread-local message, NUL-terminated.
    last_error(unsafe { sys::pcpu_stats_error() })
}

/// Label values as the C arrays want them: the strings, and pointers to
/// them (valid while `self` is).
struct CStrings {
    _owned: Vec<CString>,
    ptrs: Vec<*const c_char>,
}

impl CStrings {
    fn new(values: &[&str]) -> Result<CStrings> {
        let owned = values.iter().map(|v| cstring(v)).collect::<Result<Vec<_>>>()?;
        let ptrs = owned.iter().map(|c| c.as_ptr()).collect();
        Ok(CStrings { _owned: owned, ptrs })
    }

    /// NULL for none, as the C API takes a family without labels.
    fn as_ptr(&self) -> *const *const c_char {
        if self.ptrs.is_empty() {
            ptr::null()
        } else {
            self.ptrs.as_ptr()
        }
    }
}

/// Exposition formats.
///
/// ```
/// assert_eq!(pcpu::Format::OpenMetrics.content_type().split(';').next(), Some("application/openmetrics-text"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Prometheus text format 0.0.4.
    Prometheus,
    /// OpenMetrics 1.0 text (ends in `# EOF`).
    OpenMetrics,
    /// JSON (schema in `pcpu_snapshot_write(3)`).
    Json,
    /// Prometheus protobuf exposition (length-delimited MetricFamily
    /// messages, binary: [`Registry::write_bytes`]), the format that
    /// carries native histograms. Only where the C library has its
    /// protobuf writer ([`Format::supported`]: the feature `protobuf`, or
    /// an installed library built with protobuf-c).
    Protobuf,
}

impl Format {
    fn raw(self) -> sys::pcpu_format {
        match self {
            Format::Prometheus => sys::PCPU_FORMAT_PROMETHEUS,
            Format::OpenMetrics => sys::PCPU_FORMAT_OPENMETRICS,
            Format::Json => sys::PCPU_FORMAT_JSON,
            Format::Protobuf => sys::PCPU_FORMAT_PROTOBUF,
        }
    }

    /// The HTTP Content-Type of the format. Thread-safe. Cost: a lookup.
    ///
    /// ```
    /// assert!(pcpu::Format::Prometheus.content_type().starts_with("text/plain"));
    /// ```
    pub fn content_type(self) -> &'static str {
        // SAFETY: a static string for every known format.
        unsafe { CStr::from_ptr(sys::pcpu_format_content_type(self.raw())) }.to_str().unwrap_or("")
    }

    /// Whether the C library writes the format (all but
    /// [`Format::Protobuf`] always do). Thread-safe. Cost: a call.
    ///
    /// ```
    /// assert!(pcpu::Format::OpenMetrics.supported());
    /// println!("protobuf: {}", pcpu::Format::Protobuf.supported());
    /// ```
    pub fn supported(self) -> bool {
        // SAFETY: a plain query.
        unsafe { sys::pcpu_format_supported(self.raw()) != 0 }
    }

    /// The format to answer an HTTP request with, from its `Accept` header
    /// (None: none sent), as Prometheus clients negotiate: protobuf where
    /// the scraper asks for it and [`Format::supported`] says so (native
    /// histograms), else OpenMetrics or the Prometheus text format; never
    /// JSON. Answer with [`Registry::write_bytes`] and
    /// [`Format::content_type`]. Thread-safe. Cost: linear in the header.
    ///
    /// ```
    /// use pcpu::Format;
    /// assert_eq!(Format::negotiate(None), Format::Prometheus);
    /// assert_eq!(Format::negotiate(Some("application/openmetrics-text;version=1.0.0")), Format::OpenMetrics);
    /// let proto = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited";
    /// let f = Format::negotiate(Some(proto));
    /// assert_eq!(f == Format::Protobuf, Format::Protobuf.supported());
    /// ```
    pub fn negotiate(accept: Option<&str>) -> Format {
        // A header with a NUL byte is malformed: as none sent.
        let c = accept.and_then(|a| CString::new(a).ok());
        // SAFETY: NULL or a NUL-terminated string, read for the call.
        match unsafe { sys::pcpu_format_negotiate(c.as_ref().map_or(ptr::null(), |c| c.as_ptr())) } {
            sys::PCPU_FORMAT_PROTOBUF => Format::Protobuf,
            sys::PCPU_FORMAT_OPENMETRICS => Format::OpenMetrics,
            sys::PCPU_FORMAT_JSON => Format::Json,
            _ => Format::Prometheus,
        }
    }
}

/// Takes a malloc()ed exposition from the C library.
///
/// # Safety
/// `out` and `len` come from a successful write call.
unsafe fn take_bytes(out: *mut c_char, len: usize) -> Vec<u8> {
    let bytes = std::slice::from_raw_parts(out as *const u8, len).to_vec();
    free(out.cast());
    bytes
}

/// The exposition as text: UTF-8 for the text formats (the library
/// writes names, labels and help it checked as UTF-8); EINVAL for the
/// binary one.
fn text(fmt: Format, write: impl FnOnce() -> Result<Vec<u8>>) -> Result<String> {
    if fmt == Format::Protobuf {
        return Err(Error::Sys {
            errno: 22,
            message: "pcpu: the protobuf exposition is binary: use write_bytes".into(),
        });
    }
    let bytes = write()?;
    Ok(String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

/// Writes a snapshot in `fmt`.
fn snapshot_bytes(s: *const sys::pcpu_snapshot, fmt: Format) -> Result<Vec<u8>> {
    let (mut out, mut len) = (ptr::null_mut(), 0usize);
    // SAFETY: a live snapshot; out parameters.
    if unsafe { sys::pcpu_snapshot_write(s, fmt.raw(), &mut out, &mut len) } != 0 {
        return Err(errno_error());
    }
    // SAFETY: a successful write.
    Ok(unsafe { take_bytes(out, len) })
}

/// A registry of metric families (counters, gauges, histograms), each with
/// label names and series per label values. Destroyed when dropped, with
/// every series: the handles it gave borrow it, so none outlives it.
///
/// ```
/// let reg = pcpu::Registry::new()?;
/// let requests = reg.counter_family("http_requests", "Requests served.", &["method", "code"])?;
/// requests.with(&["GET", "200"])?.inc();
/// let text = reg.write(pcpu::Format::Prometheus)?;
/// assert!(text.contains("http_requests_total{method=\"GET\",code=\"200\"} 1"));
/// # Ok::<(), pcpu::Error>(())
/// ```
pub struct Registry {
    raw: NonNull<sys::pcpu_registry>,
}

// SAFETY: the C registry is thread-safe (its own mutex).
unsafe impl Send for Registry {}
unsafe impl Sync for Registry {}

impl Registry {
    /// An empty registry with its own per-CPU zone.
    ///
    /// Errors: [`Error::Layout`]; [`Error::Sys`] with ENOMEM. Thread-safe.
    /// Cost: a zone creation (address space, nothing resident).
    ///
    /// ```
    /// let reg = pcpu::Registry::new()?;
    /// assert_eq!(reg.write(pcpu::Format::Prometheus)?, "");
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn new() -> Result<Registry> {
        check_layout()?;
        // SAFETY: no arguments.
        let p = unsafe { sys::pcpu_registry_create() };
        NonNull::new(p).map(|raw| Registry { raw }).ok_or_else(errno_error)
    }

    /// Labels added to every series of every family (e.g. `service`,
    /// `instance`); call it before the first family.
    ///
    /// Errors: [`Error::Sys`] with EBUSY (a family exists), EINVAL (bad
    /// names or values), ENOMEM; [`Error::Nul`]. Thread-safe. Cost: copies.
    ///
    /// ```
    /// let reg = pcpu::Registry::new()?;
    /// reg.const_labels(&[("service", "api")])?;
    /// reg.counter("hits", "Hits.")?.inc();
    /// assert!(reg.write(pcpu::Format::Prometheus)?.contains("hits_total{service=\"api\"} 1"));
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn const_labels(&self, labels: &[(&str, &str)]) -> Result<()> {
        let names: Vec<&str> = labels.iter().map(|l| l.0).collect();
        let values: Vec<&str> = labels.iter().map(|l| l.1).collect();
        let (n, v) = (CStrings::new(&names)?, CStrings::new(&values)?);
        // SAFETY: arrays of labels.len() strings.
        let rc =
            unsafe { sys::pcpu_registry_const_labels(self.raw.as_ptr(), labels.len() as u32, n.as_ptr(), v.as_ptr()) };
        if rc != 0 {
            return Err(stats_error());
        }
        Ok(())
    }

    fn family(
        &self,
        name: &str,
        help: &str,
        labels: &[&str],
        type_: sys::pcpu_metric_type,
        layout: Option<&HistogramLayout>,
        flags: c_uint,
    ) -> Result<NonNull<sys::pcpu_family>> {
        let (cname, chelp, cl) = (cstring(name)?, cstring(help)?, CStrings::new(labels)?);
        let raw_layout = layout.map(|l| l.as_raw());
        let desc = sys::pcpu_family_desc {
            name: cname.as_ptr(),
            help: chelp.as_ptr(),
            unit: ptr::null(),
            type_,
            nlabels: labels.len() as u32,
            label_names: cl.as_ptr(),
            scale_exp10: 0,
            histogram: raw_layout.as_ref().map_or(ptr::null(), |l| l as *const _),
        };
        // SAFETY: desc and what it points to live for the call (copied);
        // no constant labels (n = 0, names and values NULL).
        NonNull::new(unsafe {
            sys::pcpu_registry_family_ex(self.raw.as_ptr(), &desc, flags, 0, ptr::null(), ptr::null())
        })
        .ok_or_else(stats_error)
    }

    /// The counter family `name` (a trailing `_total` is stripped and
    /// written back by the expositions) with these label names, created if
    /// absent (the same description finds the same family).
    ///
    /// Errors: [`Error::Sys`] with EINVAL (bad name or labels, or a family
    /// of that name with another description), ENOMEM; [`Error::Nul`].
    /// Thread-safe. Cost: a mutex section and a hash lookup.
    ///
    /// ```
    /// let reg = pcpu::Registry::new()?;
    /// let f = reg.counter_family("jobs", "Jobs run.", &["queue"])?;
    /// f.with(&["fast"])?.add(2);
    /// assert_eq!(f.with(&["fast"])?.get(), 2);
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn counter_family(&self, name: &str, help: &str, labels: &[&str]) -> Result<CounterFamily<'_>> {
        let raw = self.family(name, help, labels, sys::PCPU_METRIC_COUNTER, None, 0)?;
        Ok(CounterFamily { raw, nlabels: labels.len(), _reg: PhantomData })
    }

    /// The gauge family `name`, as [`Registry::counter_family`].
    ///
    /// ```
    /// let reg = pcpu::Registry::new()?;
    /// let f = reg.gauge_family("queue_depth", "Items queued.", &["queue"])?;
    /// f.with(&["q1"])?.set(7);
    /// assert!(reg.write(pcpu::Format::Prometheus)?.contains("queue_depth{queue=\"q1\"} 7"));
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn gauge_family(&self, name: &str, help: &str, labels: &[&str]) -> Result<GaugeFamily<'_>> {
        let raw = self.family(name, help, labels, sys::PCPU_METRIC_GAUGE, None, 0)?;
        Ok(GaugeFamily { raw, nlabels: labels.len(), _reg: PhantomData })
    }

    /// The histogram family `name` with bucket layout `layout`, as
    /// [`Registry::counter_family`].
    ///
    /// ```
    /// let reg = pcpu::Registry::new()?;
    /// let l = pcpu::HistogramLayout::explicit(&[10, 100]);
    /// let f = reg.histogram_family("latency", "Latency.", &[], &l)?;
    /// f.with(&[])?.record(42);
    /// assert!(reg.write(pcpu::Format::Prometheus)?.contains("latency_bucket{le=\"100.0\"} 1"));
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn histogram_family(
        &self,
        name: &str,
        help: &str,
        labels: &[&str],
        layout: &HistogramLayout,
    ) -> Result<HistogramFamily<'_>> {
        let raw = self.family(name, help, labels, sys::PCPU_METRIC_HISTOGRAM, Some(layout), 0)?;
        Ok(HistogramFamily { raw, nlabels: labels.len(), _reg: PhantomData })
    }

    /// The histogram family `name` whose series' buckets take memory as
    /// they are used (`PCPU_FAMILY_SPARSE`, [`crate::Histogram::new_sparse`]):
    /// groups of 8 buckets, each made at its first record, in a private
    /// registry and a published one alike. A storage choice, not part of
    /// the description: the first registration of the name makes it.
    ///
    /// Errors: as [`Registry::histogram_family`]. Thread-safe. Cost: as
    /// [`Registry::histogram_family`]; a record into a group not made yet
    /// allocates it (a mutex section), every later one is a dense record's
    /// plus a load.
    ///
    /// ```
    /// let reg = pcpu::Registry::new()?;
    /// let l = pcpu::HistogramLayout::exponential(3, 0);
    /// let f = reg.sparse_histogram_family("rtt", "Round trips.", &["peer"], &l)?;
    /// f.with(&["a"])?.record(1500);
    /// assert!(reg.write(pcpu::Format::Prometheus)?.contains("rtt_count{peer=\"a\"} 1"));
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn sparse_histogram_family(
        &self,
        name: &str,
        help: &str,
        labels: &[&str],
        layout: &HistogramLayout,
    ) -> Result<HistogramFamily<'_>> {
        let raw = self.family(name, help, labels, sys::PCPU_METRIC_HISTOGRAM, Some(layout), sys::PCPU_FAMILY_SPARSE)?;
        Ok(HistogramFamily { raw, nlabels: labels.len(), _reg: PhantomData })
    }

    /// A counter without labels: the only series of family `name`.
    ///
    /// Errors and cost: as [`Registry::counter_family`] and
    /// [`CounterFamily::with`].
    ///
    /// ```
    /// let reg = pcpu::Registry::new()?;
    /// let c = reg.counter("rx_packets", "Packets received.")?;
    /// c.add(3);
    /// assert_eq!(c.get(), 3);
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn counter(&self, name: &str, help: &str) -> Result<SeriesCounter<'_>> {
        self.counter_family(name, help, &[])?.with(&[])
    }

    /// A gauge without labels, as [`Registry::counter`].
    ///
    /// ```
    /// let reg = pcpu::Registry::new()?;
    /// let g = reg.gauge("workers", "Busy workers.")?;
    /// g.inc();
    /// assert_eq!(g.get(), 1);
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn gauge(&self, name: &str, help: &str) -> Result<SeriesGauge<'_>> {
        self.gauge_family(name, help, &[])?.with(&[])
    }

    /// A consistent copy of every family's values, for writing later.
    ///
    /// Errors: [`Error::Sys`] with ENOMEM. Thread-safe. Cost: a read of
    /// every series.
    ///
    /// ```
    /// let reg = pcpu::Registry::new()?;
    /// let c = reg.counter("a", "A.")?;
    /// c.inc();
    /// let snap = reg.snapshot()?;
    /// c.inc();
    /// assert!(snap.write(pcpu::Format::Prometheus)?.contains("a_total 1"));
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn snapshot(&self) -> Result<Snapshot> {
        // SAFETY: a live registry.
        let p = unsafe { sys::pcpu_registry_snapshot(self.raw.as_ptr()) };
        NonNull::new(p).map(|raw| Snapshot { raw }).ok_or_else(errno_error)
    }

    /// Snapshot and write in one call: the exposition text in `fmt` (a
    /// text format; [`Registry::write_bytes`] writes any).
    ///
    /// Errors: [`Error::Sys`] with ENOMEM, EINVAL for [`Format::Protobuf`]
    /// (binary). Thread-safe. Cost: a snapshot and its formatting.
    ///
    /// ```
    /// let reg = pcpu::Registry::new()?;
    /// reg.counter("b", "B.")?.add(2);
    /// assert!(reg.write(pcpu::Format::OpenMetrics)?.ends_with("# EOF\n"));
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn write(&self, fmt: Format) -> Result<String> {
        text(fmt, || self.write_bytes(fmt))
    }

    /// Snapshot and write in one call, in any format, [`Format::Protobuf`]
    /// included: what an HTTP handler answers with.
    ///
    /// Errors: [`Error::Sys`] with ENOMEM, ENOTSUP (protobuf where
    /// [`Format::supported`] says no). Thread-safe. Cost: as
    /// [`Registry::write`].
    ///
    /// ```
    /// let reg = pcpu::Registry::new()?;
    /// reg.counter("b", "B.")?.add(2);
    /// let accept = Some("text/plain;version=0.0.4");
    /// let fmt = pcpu::Format::negotiate(accept);
    /// let body: Vec<u8> = reg.write_bytes(fmt)?;
    /// assert!(String::from_utf8(body).unwrap().contains("b_total 2"));
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn write_bytes(&self, fmt: Format) -> Result<Vec<u8>> {
        let (mut out, mut len) = (ptr::null_mut(), 0usize);
        // SAFETY: out parameters.
        if unsafe { sys::pcpu_registry_write(self.raw.as_ptr(), fmt.raw(), &mut out, &mut len) } != 0 {
            return Err(errno_error());
        }
        // SAFETY: a successful write.
        Ok(unsafe { take_bytes(out, len) })
    }

    /// Publishes the registry as the segment `name` (a file
    /// `pcpu.<pid>.<name>` in `$PCPU_SEGMENT_DIR`, else the per-user
    /// segment directory), so `pcpustat` reads it from outside the
    /// process. Call it before the first series; families and series made
    /// afterwards appear in the segment as they are made, and updates cost
    /// nothing more. The file is removed when the [`Segment`] is dropped.
    ///
    /// Errors: [`Error::Sys`] with EBUSY (the registry has series or is
    /// published), EINVAL (a bad name), EEXIST, EPERM, ENOSPC... (see
    /// `pcpu_segment_publish(3)`); [`Error::Nul`]. Thread-safe. Cost: a few
    /// system calls and mappings.
    ///
    /// ```no_run
    /// let reg = pcpu::Registry::new()?;
    /// let _seg = reg.publish("myapp")?; // then: pcpustat myapp
    /// reg.counter("requests", "Requests.")?.inc();
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn publish(&self, name: &str) -> Result<Segment<'_>> {
        self.publish_opts(name, None)
    }

    /// [`Registry::publish`] into directory `dir` (which must be safe: not
    /// writable by others unless sticky). Errors, thread safety and cost:
    /// as `publish`.
    ///
    /// ```
    /// let dir = std::env::temp_dir().join(format!("pcpu-doc-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir).unwrap();
    /// let reg = pcpu::Registry::new()?;
    /// let seg = reg.publish_in("doc", &dir)?;
    /// reg.counter("requests", "Requests.")?.inc();
    /// assert!(seg.path().starts_with(&dir));
    /// drop(seg);
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn publish_in(&self, name: &str, dir: &std::path::Path) -> Result<Segment<'_>> {
        use std::os::unix::ffi::OsStrExt;
        let cdir = CString::new(dir.as_os_str().as_bytes()).map_err(|_| Error::Nul)?;
        self.publish_opts(name, Some(&cdir))
    }

    fn publish_opts(&self, name: &str, dir: Option<&CStr>) -> Result<Segment<'_>> {
        let cname = cstring(name)?;
        let opts = sys::pcpu_segment_options {
            dir: dir.map_or(ptr::null(), |d| d.as_ptr()),
            flags: 0,
            group: 0,
            max_entries: 0,
            max_string_bytes: 0,
        };
        // SAFETY: the strings live for the call (copied).
        let p = unsafe { sys::pcpu_segment_publish(self.raw.as_ptr(), cname.as_ptr(), &opts) };
        match NonNull::new(p) {
            Some(raw) => Ok(Segment { raw, _reg: PhantomData }),
            // SAFETY: a thread-local message.
            None => Err(last_error(unsafe { sys::pcpu_segment_error() })),
        }
    }

    /// The C handle, for calls through `pcpu_sys`; valid while `self` is.
    ///
    /// ```
    /// let reg = pcpu::Registry::new()?;
    /// assert!(!reg.as_raw().is_null());
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn as_raw(&self) -> *mut sys::pcpu_registry {
        self.raw.as_ptr()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        // SAFETY: owned; every handle borrowed it and is gone.
        unsafe { sys::pcpu_registry_destroy(self.raw.as_ptr()) };
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry").finish_non_exhaustive()
    }
}

macro_rules! family {
    ($(#[$m:meta])* $name:ident, $series:ident, $lookup:ident, $what:literal) => {
        $(#[$m])*
        #[derive(Clone, Copy)]
        pub struct $name<'r> {
            raw: NonNull<sys::pcpu_family>,
            nlabels: usize,
            _reg: PhantomData<&'r Registry>,
        }

        // SAFETY: families are used under the registry's mutex.
        unsafe impl Send for $name<'_> {}
        unsafe impl Sync for $name<'_> {}

        impl<'r> $name<'r> {
            #[doc = concat!("The ", $what, " of the series with these label values (one per label")]
            /// name, in order), created at zero if absent. Keep the handle
            /// rather than looking it up per update.
            ///
            /// Errors: [`Error::Sys`] with EINVAL (wrong number of values,
            /// a value not UTF-8 or too long), ENOSPC (a published
            /// segment's file system is full), ENOMEM; [`Error::Nul`].
            /// Thread-safe; not async-signal-safe. Cost: a mutex section
            /// and a hash lookup of the values.
            pub fn with(&self, values: &[&str]) -> Result<$series<'r>> {
                if values.len() != self.nlabels {
                    return Err(Error::Sys {
                        errno: 22,
                        message: format!("{} label values for {} label names", values.len(), self.nlabels),
                    });
                }
                let v = CStrings::new(values)?;
                // SAFETY: nlabels strings.
                let p = unsafe { sys::$lookup(self.raw.as_ptr(), v.as_ptr()) };
                $series::make(NonNull::new(p).ok_or_else(stats_error)?)
            }
        }

        impl fmt::Debug for $name<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                // SAFETY: a live family; its name is NUL-terminated.
                let name = unsafe { CStr::from_ptr(sys::pcpu_family_name(self.raw.as_ptr())) };
                f.debug_struct(stringify!($name)).field("name", &name).finish()
            }
        }
    };
}

family!(
    /// A counter family of a [`Registry`]: series by label values.
    ///
    /// ```
    /// let reg = pcpu::Registry::new()?;
    /// let f = reg.counter_family("rpc", "RPCs.", &["method"])?;
    /// let get = f.with(&["get"])?;
    /// get.inc();
    /// assert!(f.with(&["get", "extra"]).is_err());
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    CounterFamily, SeriesCounter, pcpu_family_counter, "counter"
);
family!(
    /// A gauge family of a [`Registry`].
    ///
    /// ```
    /// let reg = pcpu::Registry::new()?;
    /// reg.gauge_family("temp", "Temperature.", &["room"])?.with(&["a"])?.set(21);
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    GaugeFamily, SeriesGauge, pcpu_family_gauge, "gauge"
);
family!(
    /// A histogram family of a [`Registry`].
    ///
    /// ```
    /// let reg = pcpu::Registry::new()?;
    /// let l = pcpu::HistogramLayout::log_linear(2, 1 << 30);
    /// reg.histogram_family("size", "Sizes.", &["kind"], &l)?.with(&["x"])?.record(100);
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    HistogramFamily, SeriesHistogram, pcpu_family_histogram, "histogram"
);

/// A counter series of a [`Registry`], borrowed from it: the same
/// operations as [`crate::Counter`] (the same inline add), no drop.
///
/// ```
/// let reg = pcpu::Registry::new()?;
/// let c = reg.counter("ops", "Operations.")?;
/// std::thread::scope(|s| {
///     for _ in 0..2 { s.spawn(|| for _ in 0..500 { c.inc() }); }
/// });
/// assert_eq!(c.get(), 1000);
/// # Ok::<(), pcpu::Error>(())
/// ```
#[derive(Clone, Copy)]
pub struct SeriesCounter<'r> {
    pub(crate) raw: NonNull<sys::pcpu_counter>,
    pub(crate) off: crate::inline::Offsets,
    pub(crate) _reg: PhantomData<&'r Registry>,
}

// SAFETY: the C counter's operations are thread-safe.
unsafe impl Send for SeriesCounter<'_> {}
unsafe impl Sync for SeriesCounter<'_> {}

impl SeriesCounter<'_> {
    fn make(raw: NonNull<sys::pcpu_counter>) -> Result<Self> {
        Ok(SeriesCounter { raw, off: crate::inline::Offsets::get()?, _reg: PhantomData })
    }

    crate::counter_ops!();
}

impl fmt::Debug for SeriesCounter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SeriesCounter").field("value", &self.get()).finish()
    }
}

/// A gauge series of a [`Registry`], borrowed from it.
///
/// ```
/// let reg = pcpu::Registry::new()?;
/// let g = reg.gauge("conns", "Open connections.")?;
/// g.add(3);
/// g.sub(1);
/// assert_eq!(g.get(), 2);
/// # Ok::<(), pcpu::Error>(())
/// ```
#[derive(Clone, Copy)]
pub struct SeriesGauge<'r> {
    raw: NonNull<sys::pcpu_gauge>,
    _reg: PhantomData<&'r Registry>,
}

// SAFETY: the C gauge's operations are thread-safe.
unsafe impl Send for SeriesGauge<'_> {}
unsafe impl Sync for SeriesGauge<'_> {}

impl SeriesGauge<'_> {
    fn make(raw: NonNull<sys::pcpu_gauge>) -> Result<Self> {
        Ok(SeriesGauge { raw, _reg: PhantomData })
    }

    crate::gauge_ops!();
}

impl fmt::Debug for SeriesGauge<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SeriesGauge").field("value", &self.get()).finish()
    }
}

/// A histogram series of a [`Registry`], borrowed from it.
///
/// ```
/// let reg = pcpu::Registry::new()?;
/// let l = pcpu::HistogramLayout::explicit(&[1, 10]);
/// let h = reg.histogram_family("wait", "Waits.", &[], &l)?.with(&[])?;
/// h.record(5);
/// assert_eq!((h.count(), h.sum()), (1, 5));
/// # Ok::<(), pcpu::Error>(())
/// ```
#[derive(Clone, Copy)]
pub struct SeriesHistogram<'r> {
    raw: NonNull<sys::pcpu_histogram>,
    _reg: PhantomData<&'r Registry>,
}

// SAFETY: the C histogram's operations are thread-safe.
unsafe impl Send for SeriesHistogram<'_> {}
unsafe impl Sync for SeriesHistogram<'_> {}

impl SeriesHistogram<'_> {
    fn make(raw: NonNull<sys::pcpu_histogram>) -> Result<Self> {
        Ok(SeriesHistogram { raw, _reg: PhantomData })
    }

    crate::histogram_ops!();
}

impl fmt::Debug for SeriesHistogram<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SeriesHistogram").field("count", &self.count()).finish()
    }
}

/// A registry's values at one time ([`Registry::snapshot`]), independent
/// of the registry: write it in any format.
///
/// ```
/// let reg = pcpu::Registry::new()?;
/// reg.counter("x", "X.")?.add(4);
/// let s = reg.snapshot()?;
/// drop(reg);
/// assert!(s.write(pcpu::Format::Json)?.contains("\"value\":4"));
/// # Ok::<(), pcpu::Error>(())
/// ```
pub struct Snapshot {
    raw: NonNull<sys::pcpu_snapshot>,
}

// SAFETY: an immutable tree of memory the snapshot owns.
unsafe impl Send for Snapshot {}
unsafe impl Sync for Snapshot {}

impl Snapshot {
    /// The exposition of the snapshot in `fmt` (a text format;
    /// [`Snapshot::write_bytes`] writes any).
    ///
    /// Errors: [`Error::Sys`] with ENOMEM, EINVAL for [`Format::Protobuf`].
    /// Thread-safe. Cost: formatting.
    ///
    /// ```
    /// let reg = pcpu::Registry::new()?;
    /// assert_eq!(reg.snapshot()?.write(pcpu::Format::OpenMetrics)?, "# EOF\n");
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn write(&self, fmt: Format) -> Result<String> {
        text(fmt, || self.write_bytes(fmt))
    }

    /// The exposition of the snapshot in any format, [`Format::Protobuf`]
    /// included. Errors: as [`Registry::write_bytes`]. Thread-safe. Cost:
    /// formatting.
    ///
    /// ```
    /// let reg = pcpu::Registry::new()?;
    /// assert_eq!(reg.snapshot()?.write_bytes(pcpu::Format::OpenMetrics)?, b"# EOF\n");
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn write_bytes(&self, fmt: Format) -> Result<Vec<u8>> {
        snapshot_bytes(self.raw.as_ptr(), fmt)
    }

    /// Number of families. Cost: a load.
    ///
    /// ```
    /// let reg = pcpu::Registry::new()?;
    /// reg.counter("y", "Y.")?;
    /// assert_eq!(reg.snapshot()?.families(), 1);
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn families(&self) -> usize {
        // SAFETY: a live snapshot.
        unsafe { self.raw.as_ref().nfamilies }
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        // SAFETY: owned.
        unsafe { sys::pcpu_snapshot_free(self.raw.as_ptr()) };
    }
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot").field("families", &self.families()).finish()
    }
}

/// A registry published as a segment ([`Registry::publish`]); its file is
/// removed when this is dropped (the registry keeps counting).
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("pcpu-doc-seg-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// let reg = pcpu::Registry::new()?;
/// let seg = reg.publish_in("myapp", &dir)?;
/// let path = seg.path().to_owned();
/// assert!(path.exists());
/// drop(seg);
/// assert!(!path.exists());
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok::<(), pcpu::Error>(())
/// ```
pub struct Segment<'r> {
    raw: NonNull<sys::pcpu_segment>,
    _reg: PhantomData<&'r Registry>,
}

// SAFETY: the segment's calls take the registry's lock.
unsafe impl Send for Segment<'_> {}
unsafe impl Sync for Segment<'_> {}

impl Segment<'_> {
    /// The segment file's path. Thread-safe. Cost: a load and a copy.
    ///
    /// ```no_run
    /// # let reg = pcpu::Registry::new()?;
    /// println!("{}", reg.publish("x")?.path().display());
    /// # Ok::<(), pcpu::Error>(())
    /// ```
    pub fn path(&self) -> std::path::PathBuf {
        // SAFETY: valid as long as the segment.
        let p = unsafe { sys::pcpu_segment_path(self.raw.as_ptr()) };
        if p.is_null() {
            return std::path::PathBuf::new();
        }
        use std::os::unix::ffi::OsStrExt;
        // SAFETY: NUL-terminated.
        std::ffi::OsStr::from_bytes(unsafe { CStr::from_ptr(p) }.to_bytes()).into()
    }
}

impl Drop for Segment<'_> {
    fn drop(&mut self) {
        // SAFETY: the registry (which frees the segment) outlives self.
        unsafe { sys::pcpu_segment_unpublish(self.raw.as_ptr()) };
    }
}

impl fmt::Debug for Segment<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Segment").field("path", &self.path()).finish()
    }
}
