//! Raw FFI bindings to pcpu, exact per-CPU counters for Linux user space
//! built on restartable sequences (rseq).
//!
//! These are the C library's stable tier (the functions a C program gets
//! with `PCPU_NO_INLINE`): counters, counter arrays, gauges, histograms,
//! owned slots, the registry with families and labels, snapshots and their
//! exposition, and segment publishing (so `pcpustat` reads the process).
//! Each item mirrors the C declaration of the same name in
//! `include/pcpu/*.h`, which documents its errors (a NULL or -1 return with
//! `errno`), thread safety and cost; they are not repeated here. Use the
//! safe crate `pcpu` rather than these.
//!
//! Also exported for the `pcpu` crate's inline add (not API: they follow
//! the inline layout, checked with [`pcpu_inline_layout`]): [`pcpu__g`],
//! [`pcpu__counter_add_slow`] and [`PCPU_SLOT_STRIDE_SHIFT`].
//!
//! By default the build compiles the C library from its sources (it needs
//! libc alone); feature `system` links the installed one (pkg-config).
//!
//! ```
//! unsafe {
//!     let c = pcpu_sys::pcpu_counter_alloc();
//!     assert!(!c.is_null());
//!     pcpu_sys::pcpu_counter_add(c, 5);
//!     assert_eq!(pcpu_sys::pcpu_counter_fetch(c), 5);
//!     assert_eq!(pcpu_sys::pcpu_counter_free(c), 0);
//! }
//! ```
#![no_std]
#![allow(non_camel_case_types, non_snake_case, non_upper_case_globals)]

use core::ffi::{c_char, c_double, c_int, c_uint, c_void};

/// `uid_t`/`gid_t` on Linux.
pub type gid_t = u32;

/// Opaque C types, used only behind pointers.
macro_rules! opaque {
    ($($(#[$m:meta])* $name:ident;)*) => {$(
        $(#[$m])*
        #[repr(C)]
        pub struct $name {
            _private: [u8; 0],
            _not_send_sync: core::marker::PhantomData<(*mut u8, core::marker::PhantomPinned)>,
        }
    )*};
}

opaque! {
    /// `pcpu_zone_t`: a per-CPU allocation zone (pcpu/zone.h).
    pcpu_zone;
    /// `pcpu_registry_t`: a registry of metric families (pcpu/stats.h).
    pcpu_registry;
    /// `pcpu_family_t`: a metric family (pcpu/stats.h).
    pcpu_family;
    /// `pcpu_segment_t`: a published segment (pcpu/segment.h).
    pcpu_segment;
    /// `pcpu_snapshot_family`: a family of a snapshot (pcpu/expose.h).
    pcpu_snapshot_family;
    /// `pcpu_histogram_t`: a histogram (pcpu/histogram.h).
    pcpu_histogram;
}

/// One slot's copy of a counter (`struct pcpu_counter`): 8 bytes.
#[repr(C)]
#[derive(Debug)]
pub struct pcpu_counter {
    /// Private to pcpu: the slot's rseq word.
    pub pcpu__word: i64,
}
/// A counter: the address of slot 0's copy; NULL is never valid.
pub type pcpu_counter_t = *mut pcpu_counter;

/// One slot's copy of a gauge (`struct pcpu_gauge`).
#[repr(C)]
#[derive(Debug)]
pub struct pcpu_gauge {
    /// Private to pcpu.
    pub pcpu__word: i64,
}
/// A gauge: the address of slot 0's copy; NULL is never valid.
pub type pcpu_gauge_t = *mut pcpu_gauge;

/// A claim of an owned slot (`pcpu_worker_t`, pcpu/worker.h): the zero
/// claim means none.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct pcpu_worker_t {
    /// Private to pcpu: the owned slot's offset from slot 0.
    pub pcpu__off: usize,
}

/// An owned slot's view of a counter array (`pcpu_owned_array_t`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pcpu_owned_array_t {
    /// Private to pcpu: element 0's word in the owned slot.
    pub pcpu__words: *mut i64,
}

/// `struct pcpu__globals`: the thread-pointer offsets of the calling
/// thread's rseq area fields, set once per process before any counter
/// exists (pcpu/rseq.h). Not API; part of the inline layout.
#[repr(C)]
#[derive(Debug)]
pub struct pcpu__globals {
    /// Offset of the index field (cpu_id or mm_cid) from the thread pointer.
    pub index_tpoff: i64,
    /// Offset of the rseq_cs field from the thread pointer.
    pub cs_tpoff: i64,
}

/// log2 of the distance between two slots of an object (pcpu/defs.h).
/// Part of the inline layout.
pub const PCPU_SLOT_STRIDE_SHIFT: u32 = 25;

/// `enum pcpu_index`.
pub type pcpu_index = c_uint;
/// The process's index (mm_cid where available).
pub const PCPU_INDEX_DEFAULT: pcpu_index = 0;
/// rseq cpu_id.
pub const PCPU_INDEX_CPU: pcpu_index = 1;
/// rseq mm_cid.
pub const PCPU_INDEX_MM_CID: pcpu_index = 2;

/// `enum pcpu_rseq_mode`.
pub type pcpu_rseq_mode = c_int;
/// rseq area registered by glibc.
pub const PCPU_RSEQ_GLIBC: pcpu_rseq_mode = 1;
/// rseq area registered by pcpu.
pub const PCPU_RSEQ_OWN: pcpu_rseq_mode = 2;
/// No rseq: exact atomic adds on per-slot words.
pub const PCPU_RSEQ_FALLBACK: pcpu_rseq_mode = 3;

/// `enum pcpu_metric_type`.
pub type pcpu_metric_type = c_uint;
/// Counter.
pub const PCPU_METRIC_COUNTER: pcpu_metric_type = 1;
/// Gauge.
pub const PCPU_METRIC_GAUGE: pcpu_metric_type = 2;
/// Histogram.
pub const PCPU_METRIC_HISTOGRAM: pcpu_metric_type = 3;

/// `pcpu_registry_family_ex()` flag: values with fractions (pcpu/fraction.h).
pub const PCPU_FAMILY_FRACTIONS: c_uint = 1 << 0;
/// `pcpu_registry_family_ex()` flag: another label set of an existing name.
pub const PCPU_FAMILY_LABELSET: c_uint = 1 << 1;
/// `pcpu_registry_family_ex()` flag: a histogram family's buckets made as used.
pub const PCPU_FAMILY_SPARSE: c_uint = 1 << 2;
/// `pcpu_histogram_create_ex()` flag: buckets made as used, in groups of
/// [`PCPU_HISTOGRAM_GROUP_BUCKETS`].
pub const PCPU_HISTOGRAM_SPARSE: c_uint = 1 << 0;
/// Buckets per group of a sparse histogram.
pub const PCPU_HISTOGRAM_GROUP_BUCKETS: usize = 8;

/// `enum pcpu_format`.
pub type pcpu_format = c_uint;
/// Prometheus text format 0.0.4.
pub const PCPU_FORMAT_PROMETHEUS: pcpu_format = 1;
/// OpenMetrics 1.0 text.
pub const PCPU_FORMAT_OPENMETRICS: pcpu_format = 2;
/// JSON.
pub const PCPU_FORMAT_JSON: pcpu_format = 3;
/// Prometheus protobuf (only where built with protobuf-c; not by default).
pub const PCPU_FORMAT_PROTOBUF: pcpu_format = 4;

/// `enum pcpu_histogram_scheme`.
pub type pcpu_histogram_scheme = c_uint;
/// Given upper bounds, plus +Inf.
pub const PCPU_HISTOGRAM_EXPLICIT: pcpu_histogram_scheme = 1;
/// Relative precision 2^-p.
pub const PCPU_HISTOGRAM_LOG_LINEAR: pcpu_histogram_scheme = 2;
/// Prometheus native / OpenTelemetry exponential buckets.
pub const PCPU_HISTOGRAM_EXPONENTIAL: pcpu_histogram_scheme = 3;

/// `struct pcpu_histogram_layout` (pcpu/histogram.h).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pcpu_histogram_layout {
    /// What the buckets are.
    pub scheme: pcpu_histogram_scheme,
    /// Explicit: strictly increasing inclusive upper bounds.
    pub bounds: *const i64,
    /// Explicit: number of bounds.
    pub nbounds: usize,
    /// Log-linear: precision in bits.
    pub precision_bits: c_uint,
    /// Log-linear: largest value that must get a finite bucket.
    pub max_value: i64,
    /// `le` bounds exposed per power of two (0: default).
    pub export_per_octave: c_uint,
    /// Smallest bound exposed.
    pub export_min: i64,
    /// Exponential: the schema.
    pub schema: c_int,
    /// Exponential: the bounds' scale.
    pub scale_exp10: c_int,
}

/// `struct pcpu_family_desc` (pcpu/stats.h).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pcpu_family_desc {
    /// Family name.
    pub name: *const c_char,
    /// Help text or NULL.
    pub help: *const c_char,
    /// Unit or NULL.
    pub unit: *const c_char,
    /// Counter, gauge or histogram.
    pub type_: pcpu_metric_type,
    /// Number of label names.
    pub nlabels: c_uint,
    /// The label names.
    pub label_names: *const *const c_char,
    /// Exposed value = value * 10^scale_exp10.
    pub scale_exp10: c_int,
    /// Histograms: the bucket layout.
    pub histogram: *const pcpu_histogram_layout,
}

/// `struct pcpu_snapshot` (pcpu/expose.h).
#[repr(C)]
#[derive(Debug)]
pub struct pcpu_snapshot {
    /// Number of families.
    pub nfamilies: usize,
    /// The families.
    pub families: *const pcpu_snapshot_family,
}

/// `struct pcpu_segment_options` (pcpu/segment.h).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pcpu_segment_options {
    /// Directory of the segment file; NULL for the default.
    pub dir: *const c_char,
    /// PCPU_SEGMENT_* flags.
    pub flags: c_uint,
    /// With PCPU_SEGMENT_GROUP_READ: the group granted read access.
    pub group: gid_t,
    /// Most directory entries at once; 0: the default.
    pub max_entries: usize,
    /// Bytes of strings the directory can hold; 0: the default.
    pub max_string_bytes: usize,
}

/// `pcpu_callback_fn` (pcpu/stats.h).
pub type pcpu_callback_fn = Option<unsafe extern "C" fn(arg: *mut c_void, value: *mut i64) -> c_int>;

extern "C" {
    // ---- pcpu/rseq.h, pcpu/runtime_version.h --------------------------
    /// The process-wide rseq offsets (not API; inline layout).
    pub static pcpu__g: pcpu__globals;
    /// Out-of-line rest of an add whose inline attempt did not commit.
    pub fn pcpu__counter_add_slow(c: pcpu_counter_t, v: i64);
    pub fn pcpu_rseq_mode() -> pcpu_rseq_mode;
    pub fn pcpu_thread_init() -> c_int;
    pub fn pcpu_prepare_unload();
    pub fn pcpu_rseq_mode_name(mode: pcpu_rseq_mode) -> *const c_char;
    pub fn pcpu_rseq_error() -> c_int;
    pub fn pcpu_rseq_has_mm_cid() -> c_int;
    pub fn pcpu_nslots() -> c_uint;
    pub fn pcpu_environment_error() -> *const c_char;
    pub fn pcpu_version() -> c_uint;
    pub fn pcpu_version_string() -> *const c_char;
    /// The inline hot path's layout number the library was built for.
    pub fn pcpu_inline_layout() -> c_uint;

    // ---- pcpu/zone.h ---------------------------------------------------
    pub fn pcpu_zone_create(index: pcpu_index) -> *mut pcpu_zone;
    pub fn pcpu_zone_destroy(zone: *mut pcpu_zone);
    pub fn pcpu_zone_index(zone: *const pcpu_zone) -> pcpu_index;
    pub fn pcpu_slot_ptr(obj: *const c_void, slot: c_uint) -> *mut c_void;
    pub fn pcpu_current_slot() -> c_uint;

    // ---- pcpu/counter.h (stable tier) ----------------------------------
    pub fn pcpu_counter_alloc() -> pcpu_counter_t;
    pub fn pcpu_counter_alloc_array(n: usize) -> pcpu_counter_t;
    pub fn pcpu_counter_alloc_in(zone: *mut pcpu_zone, n: usize) -> pcpu_counter_t;
    pub fn pcpu_counter_free(c: pcpu_counter_t) -> c_int;
    pub fn pcpu_counter_add(c: pcpu_counter_t, v: i64);
    pub fn pcpu_counter_add_atomic(c: pcpu_counter_t, v: i64);
    pub fn pcpu_counter_inc(c: pcpu_counter_t);
    pub fn pcpu_counter_add_many(cs: *const pcpu_counter_t, vs: *const i64, n: usize);
    pub fn pcpu_counter_at(array: pcpu_counter_t, i: usize) -> pcpu_counter_t;
    pub fn pcpu_counter_fetch(c: pcpu_counter_t) -> u64;
    pub fn pcpu_counter_fetch_slot(c: pcpu_counter_t, slot: c_uint) -> u64;
    pub fn pcpu_counter_fetch_array(c: pcpu_counter_t, n: usize, out: *mut u64) -> c_int;
    pub fn pcpu_counter_fetch_and_zero(c: pcpu_counter_t) -> u64;
    pub fn pcpu_counter_zero(c: pcpu_counter_t);
    pub fn pcpu_counter_add_owned(w: pcpu_worker_t, c: pcpu_counter_t, v: i64);
    pub fn pcpu_counter_add_many_owned(w: pcpu_worker_t, cs: *const pcpu_counter_t, vs: *const i64, n: usize);
    pub fn pcpu_counter_owned_array(w: pcpu_worker_t, array: pcpu_counter_t, a: *mut pcpu_owned_array_t) -> c_int;
    pub fn pcpu_owned_array_add(a: pcpu_owned_array_t, i: usize, v: i64);

    // ---- pcpu/worker.h -------------------------------------------------
    pub fn pcpu_worker_claim(w: *mut pcpu_worker_t) -> c_int;
    pub fn pcpu_worker_release() -> c_int;
    pub fn pcpu_worker_max() -> c_uint;
    pub fn pcpu_worker_slot(w: pcpu_worker_t) -> c_int;
    pub fn pcpu_worker_self() -> pcpu_worker_t;

    // ---- pcpu/gauge.h --------------------------------------------------
    pub fn pcpu_gauge_alloc() -> pcpu_gauge_t;
    pub fn pcpu_gauge_alloc_in(zone: *mut pcpu_zone) -> pcpu_gauge_t;
    pub fn pcpu_gauge_free(g: pcpu_gauge_t) -> c_int;
    pub fn pcpu_gauge_add(g: pcpu_gauge_t, v: i64);
    pub fn pcpu_gauge_sub(g: pcpu_gauge_t, v: i64);
    pub fn pcpu_gauge_inc(g: pcpu_gauge_t);
    pub fn pcpu_gauge_dec(g: pcpu_gauge_t);
    pub fn pcpu_gauge_set(g: pcpu_gauge_t, v: i64) -> c_int;
    pub fn pcpu_gauge_read(g: pcpu_gauge_t) -> i64;

    // ---- pcpu/fraction.h -----------------------------------------------
    pub fn pcpu_counter_add_double(c: pcpu_counter_t, v: f64);
    pub fn pcpu_gauge_add_double(g: pcpu_gauge_t, v: f64);
    pub fn pcpu_gauge_set_double(g: pcpu_gauge_t, v: f64) -> c_int;
    pub fn pcpu_gauge_read_double(g: pcpu_gauge_t) -> f64;

    // ---- pcpu/histogram.h ----------------------------------------------
    pub fn pcpu_histogram_create(layout: *const pcpu_histogram_layout) -> *mut pcpu_histogram;
    pub fn pcpu_histogram_create_in(zone: *mut pcpu_zone, layout: *const pcpu_histogram_layout) -> *mut pcpu_histogram;
    pub fn pcpu_histogram_create_ex(
        zone: *mut pcpu_zone,
        layout: *const pcpu_histogram_layout,
        flags: c_uint,
    ) -> *mut pcpu_histogram;
    pub fn pcpu_histogram_lost(h: *const pcpu_histogram) -> u64;
    pub fn pcpu_histogram_destroy(h: *mut pcpu_histogram);
    pub fn pcpu_histogram_record(h: *const pcpu_histogram, v: i64);
    pub fn pcpu_histogram_record_n(h: *const pcpu_histogram, v: i64, n: u64);
    pub fn pcpu_histogram_observe(h: *const pcpu_histogram, v: f64);
    pub fn pcpu_histogram_record_owned(w: pcpu_worker_t, h: *const pcpu_histogram, v: i64);
    pub fn pcpu_histogram_bucket_of(h: *const pcpu_histogram, v: i64) -> usize;
    pub fn pcpu_histogram_nbuckets(h: *const pcpu_histogram) -> usize;
    pub fn pcpu_histogram_bucket_range(h: *const pcpu_histogram, b: usize, lower: *mut i64, upper: *mut i64) -> c_int;
    pub fn pcpu_histogram_read(
        h: *const pcpu_histogram,
        counts: *mut u64,
        nbuckets: usize,
        count: *mut u64,
        sum: *mut i64,
    ) -> c_int;
    pub fn pcpu_histogram_quantile(
        h: *const pcpu_histogram,
        counts: *const u64,
        nbuckets: usize,
        q: c_double,
    ) -> c_double;

    // ---- pcpu/stats.h --------------------------------------------------
    pub fn pcpu_registry_create() -> *mut pcpu_registry;
    pub fn pcpu_registry_destroy(reg: *mut pcpu_registry);
    pub fn pcpu_registry_default() -> *mut pcpu_registry;
    pub fn pcpu_registry_zone(reg: *mut pcpu_registry) -> *mut pcpu_zone;
    pub fn pcpu_registry_generation(reg: *mut pcpu_registry) -> u64;
    pub fn pcpu_registry_family(reg: *mut pcpu_registry, desc: *const pcpu_family_desc) -> *mut pcpu_family;
    pub fn pcpu_registry_family_ex(
        reg: *mut pcpu_registry,
        desc: *const pcpu_family_desc,
        flags: c_uint,
        n: c_uint,
        names: *const *const c_char,
        values: *const *const c_char,
    ) -> *mut pcpu_family;
    pub fn pcpu_registry_find(reg: *mut pcpu_registry, name: *const c_char) -> *mut pcpu_family;
    pub fn pcpu_registry_remove_family(reg: *mut pcpu_registry, fam: *mut pcpu_family) -> c_int;
    pub fn pcpu_family_name(fam: *const pcpu_family) -> *const c_char;
    pub fn pcpu_family_label_names(fam: *const pcpu_family, n: *mut c_uint) -> *const *const c_char;
    pub fn pcpu_family_type(fam: *const pcpu_family) -> pcpu_metric_type;
    pub fn pcpu_family_size(fam: *mut pcpu_family) -> usize;
    pub fn pcpu_family_counter(fam: *mut pcpu_family, label_values: *const *const c_char) -> pcpu_counter_t;
    pub fn pcpu_family_gauge(fam: *mut pcpu_family, label_values: *const *const c_char) -> pcpu_gauge_t;
    pub fn pcpu_family_histogram(fam: *mut pcpu_family, label_values: *const *const c_char) -> *mut pcpu_histogram;
    pub fn pcpu_family_lookup(fam: *mut pcpu_family, label_values: *const *const c_char) -> *mut c_void;
    pub fn pcpu_family_remove(fam: *mut pcpu_family, label_values: *const *const c_char) -> c_int;
    pub fn pcpu_registry_counter(reg: *mut pcpu_registry, name: *const c_char, help: *const c_char) -> pcpu_counter_t;
    pub fn pcpu_registry_gauge(reg: *mut pcpu_registry, name: *const c_char, help: *const c_char) -> pcpu_gauge_t;
    pub fn pcpu_registry_const_labels(
        reg: *mut pcpu_registry,
        n: c_uint,
        names: *const *const c_char,
        values: *const *const c_char,
    ) -> c_int;
    pub fn pcpu_registry_snapshot(reg: *mut pcpu_registry) -> *mut pcpu_snapshot;
    pub fn pcpu_snapshot_free(s: *mut pcpu_snapshot);
    pub fn pcpu_registry_write(
        reg: *mut pcpu_registry,
        fmt: pcpu_format,
        out: *mut *mut c_char,
        len: *mut usize,
    ) -> c_int;
    pub fn pcpu_family_callback(
        fam: *mut pcpu_family,
        label_values: *const *const c_char,
        fn_: pcpu_callback_fn,
        arg: *mut c_void,
    ) -> c_int;
    pub fn pcpu_registry_collect(reg: *mut pcpu_registry) -> c_int;
    pub fn pcpu_registry_process_collector(reg: *mut pcpu_registry) -> c_int;

    // ---- pcpu/expose.h -------------------------------------------------
    pub fn pcpu_snapshot_write(
        s: *const pcpu_snapshot,
        fmt: pcpu_format,
        out: *mut *mut c_char,
        len: *mut usize,
    ) -> c_int;
    pub fn pcpu_format_content_type(fmt: pcpu_format) -> *const c_char;
    pub fn pcpu_format_supported(fmt: pcpu_format) -> c_int;
    pub fn pcpu_format_negotiate(accept: *const c_char) -> pcpu_format;
    pub fn pcpu_metric_type_name(type_: pcpu_metric_type) -> *const c_char;
    pub fn pcpu_stats_check_metric_name(name: *const c_char) -> c_int;
    pub fn pcpu_stats_check_label_name(name: *const c_char) -> c_int;
    pub fn pcpu_stats_check_label_value(value: *const c_char) -> c_int;
    /// The calling thread's last statistics error message.
    pub fn pcpu_stats_error() -> *const c_char;

    // ---- pcpu/segment.h ------------------------------------------------
    pub fn pcpu_segment_publish(
        reg: *mut pcpu_registry,
        name: *const c_char,
        opts: *const pcpu_segment_options,
    ) -> *mut pcpu_segment;
    pub fn pcpu_segment_unpublish(seg: *mut pcpu_segment) -> c_int;
    pub fn pcpu_segment_path(seg: *const pcpu_segment) -> *const c_char;
    pub fn pcpu_segment_dropped(seg: *const pcpu_segment) -> u64;
    pub fn pcpu_segment_nospace(seg: *const pcpu_segment) -> u64;
    /// The calling thread's last segment error message.
    pub fn pcpu_segment_error() -> *const c_char;
}

/// The layout of the inline hot path these bindings describe
/// ([`pcpu__g`], [`PCPU_SLOT_STRIDE_SHIFT`], [`pcpu_counter`]'s word,
/// [`pcpu__counter_add_slow`]'s signature): the C library's `PCPU__LAYOUT`
/// (version node `PCPU_LAYOUT_<n>`). Code that writes the inline add
/// compares [`pcpu_inline_layout`]`()` with it before its first add.
pub const PCPU_INLINE_LAYOUT: u32 = 4;

/// The directory holding the generated `pcpu/version.h` of a bundled
/// build (None with feature `system`), for tests that compile C code
/// against the same headers as the library.
#[doc(hidden)]
pub const GENERATED_INCLUDE: Option<&str> = option_env!("PCPU_SYS_GENERATED_INCLUDE");

/// Whether the bundled C library was compiled with its rseq debugger
/// lists retained (`PCPU_RSEQ_RETAIN_LISTS`: the assembler knows the `R`
/// section flag), so that a Rust binary's --gc-sections keeps them; false
/// with feature `system` (the installed shared library keeps its own).
#[doc(hidden)]
pub const RETAIN_LISTS: bool = option_env!("PCPU_SYS_RETAIN_LISTS").is_some();

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    #[test]
    fn layout_matches_library() {
        assert_eq!(unsafe { pcpu_inline_layout() }, PCPU_INLINE_LAYOUT);
    }

    #[test]
    fn struct_sizes() {
        assert_eq!(core::mem::size_of::<pcpu_family_desc>(), 56);
        assert_eq!(core::mem::size_of::<pcpu_histogram_layout>(), 64);
        assert_eq!(core::mem::size_of::<pcpu_segment_options>(), 32);
        assert_eq!(core::mem::size_of::<pcpu__globals>(), 16);
    }
}
