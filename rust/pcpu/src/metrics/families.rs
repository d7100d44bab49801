//! The recorder's slow path: the first registration of a key finds or
//! makes its family and series, under the recorder's mutex. Everything
//! here runs once per key; the recorder caches the result (a series, or
//! a refusal) in its lock-free table.

use std::collections::HashMap;
use std::ffi::{c_char, c_void, CString};
use std::ptr::{self, NonNull};

use ::metrics::Key;
use pcpu_sys as sys;

use super::names;
use super::series::SCALE;
use super::Histograms;
use crate::{Error, Registry};

/// What a key is registered as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }

    fn raw(self) -> sys::pcpu_metric_type {
        match self {
            Kind::Counter => sys::PCPU_METRIC_COUNTER,
            Kind::Gauge => sys::PCPU_METRIC_GAUGE,
            Kind::Histogram => sys::PCPU_METRIC_HISTOGRAM,
        }
    }
}

/// Why a key has no series. Permanent refusals (a bad name, a conflict)
/// are cached, so the key costs a lookup from then on; transient ones
/// (ENOMEM, a full segment file system) are tried again at the key's next
/// registration.
#[derive(Debug)]
pub(crate) struct Refusal {
    pub(crate) message: String,
    pub(crate) permanent: bool,
}

impl Refusal {
    fn permanent(message: String) -> Refusal {
        Refusal { message, permanent: true }
    }

    /// A refusal of the C library, permanent for EINVAL and EEXIST.
    fn from_error(what: &str, e: Error) -> Refusal {
        let permanent = matches!(e, Error::Sys { errno: 22 | 17, .. } | Error::Nul | Error::Layout { .. });
        Refusal { message: format!("pcpu::metrics: {what}: {e}"), permanent }
    }
}

/// A pcpu family and its label names, in the order its series take them.
struct Fam {
    raw: NonNull<sys::pcpu_family>,
    labels: Vec<String>,
}

// SAFETY: the C family's operations are thread-safe (the registry's lock).
unsafe impl Send for Fam {}

/// The families of one (sanitised) metric name: one per list of label
/// names (label sets of one metric, see `Families::family`).
struct Named {
    kind: Kind,
    families: Vec<Fam>,
}

/// The slow path's state, under the recorder's mutex.
pub(crate) struct Families {
    /// Descriptions by family name (`describe_*` before the first
    /// registration becomes the family's help).
    help: HashMap<String, String>,
    named: HashMap<String, Named>,
    histograms: Histograms,
    refused: u64,
    last_refusal: Option<String>,
    /// `pcpu_metrics_refused_keys_total`, made at the first refusal.
    refused_counter: Option<NonNull<sys::pcpu_counter>>,
}

// SAFETY: as Fam; the refusal counter is a series of the registry.
unsafe impl Send for Families {}

/// The longest help the C library takes, in bytes.
const HELP_MAX: usize = 2048;

/// Whether two lists of distinct label names hold the same names.
fn same_names(a: &[String], b: &[&str]) -> bool {
    a.len() == b.len() && b.iter().all(|n| a.iter().any(|m| m == n))
}

impl Families {
    pub(crate) fn new(histograms: Histograms) -> Families {
        Families {
            help: HashMap::new(),
            named: HashMap::new(),
            histograms,
            refused: 0,
            last_refusal: None,
            refused_counter: None,
        }
    }

    /// Records `description` as the help of the family `name` will have.
    pub(crate) fn describe(&mut self, name: &str, counter: bool, description: &str) {
        let name = names::metric_name(name);
        let mut help: String = description.chars().filter(|&c| c != '\0').collect();
        if help.len() > HELP_MAX {
            let mut end = HELP_MAX;
            while !help.is_char_boundary(end) {
                end -= 1;
            }
            help.truncate(end);
        }
        self.help.insert(names::family_key(&name, counter).to_string(), help);
    }

    /// The C series of `key` as a `kind`: its family found or made, its
    /// labels' values in the family's order.
    pub(crate) fn series(&mut self, reg: &Registry, kind: Kind, key: &Key) -> Result<NonNull<c_void>, Refusal> {
        let name = names::metric_name(key.name());
        let labels = names::labels(key, kind == Kind::Histogram);
        let label_names: Vec<&str> = labels.iter().map(|(n, _)| n.as_str()).collect();
        let (fkey, i) = self.family(reg, kind, &name, &label_names)?;
        let fam = &self.named[&fkey].families[i];
        let mut values = Vec::with_capacity(fam.labels.len());
        for n in &fam.labels {
            // Every family label is among the key's: same_names() said so.
            let v = labels.iter().find(|(k, _)| k == n).map_or("", |(_, v)| v);
            values.push(CString::new(v).map_err(|_| {
                Refusal::permanent(format!("pcpu::metrics: {name}: the value of label `{n}` holds a NUL byte"))
            })?);
        }
        let ptrs: Vec<*const c_char> = values.iter().map(|v| v.as_ptr()).collect();
        let vals = if ptrs.is_empty() { ptr::null() } else { ptrs.as_ptr() };
        let f = fam.raw.as_ptr();
        // SAFETY: a family of `reg` and fam.labels.len() values, alive for
        // the call (the library copies them).
        let p: *mut c_void = unsafe {
            match kind {
                Kind::Counter => sys::pcpu_family_counter(f, vals).cast(),
                Kind::Gauge => sys::pcpu_family_gauge(f, vals).cast(),
                Kind::Histogram => sys::pcpu_family_histogram(f, vals).cast(),
            }
        };
        NonNull::new(p).ok_or_else(|| Refusal::from_error(&name, crate::registry::stats_error()))
    }

    /// The family of a `kind` named `name` whose series take the labels
    /// `label_names` (distinct), found or made: the one place that maps a
    /// name and a list of label names to a pcpu family. Returns its name
    /// key and index in `named`.
    ///
    /// The same names in another order are the same family (the caller
    /// puts the values in the family's order). Another list of names for
    /// a name already registered is another label set of the name
    /// (`PCPU_FAMILY_LABELSET`): its series are series of the same
    /// metric, under one HELP and TYPE, as metrics-exporter-prometheus
    /// shows them.
    fn family(
        &mut self,
        reg: &Registry,
        kind: Kind,
        name: &str,
        label_names: &[&str],
    ) -> Result<(String, usize), Refusal> {
        let fkey = names::family_key(name, kind == Kind::Counter).to_string();
        if let Some(n) = self.named.get(&fkey) {
            if n.kind != kind {
                return Err(Refusal::permanent(format!(
                    "pcpu::metrics: `{name}` is a {}: a {} of the same name is not recorded",
                    n.kind.name(),
                    kind.name()
                )));
            }
            if let Some(i) = n.families.iter().position(|f| same_names(&f.labels, label_names)) {
                return Ok((fkey, i));
            }
            // Another label set of the name: a family of its own beside
            // the others, whose series are series of the same metric.
            let fam = self.create(reg, kind, name, &fkey, label_names, true)?;
            let n = self.named.get_mut(&fkey).expect("found above");
            n.families.push(fam);
            let i = n.families.len() - 1;
            return Ok((fkey, i));
        }
        let fam = self.create(reg, kind, name, &fkey, label_names, false)?;
        self.named.insert(fkey.clone(), Named { kind, families: vec![fam] });
        Ok((fkey, 0))
    }

    /// Registers a new family in the C registry: values with fractions
    /// for gauges and histograms (any `f64`), another label set of an
    /// existing name if `labelset`.
    fn create(
        &self,
        reg: &Registry,
        kind: Kind,
        name: &str,
        fkey: &str,
        label_names: &[&str],
        labelset: bool,
    ) -> Result<Fam, Refusal> {
        // Sanitised names hold no NUL; help was cleaned by describe().
        let cname = CString::new(name).map_err(|_| Refusal::permanent(format!("pcpu::metrics: {name}: NUL")))?;
        let chelp = CString::new(self.help.get(fkey).map_or("", |h| h.as_str())).unwrap_or_default();
        let cnames: Vec<CString> = label_names.iter().map(|n| CString::new(*n).unwrap_or_default()).collect();
        let name_ptrs: Vec<*const c_char> = cnames.iter().map(|c| c.as_ptr()).collect();
        let layout = self.histograms.layout(name).as_raw();
        let desc = sys::pcpu_family_desc {
            name: cname.as_ptr(),
            help: chelp.as_ptr(),
            unit: ptr::null(),
            type_: kind.raw(),
            nlabels: name_ptrs.len() as u32,
            label_names: if name_ptrs.is_empty() { ptr::null() } else { name_ptrs.as_ptr() },
            // Histograms' buckets are in billionths; gauges with
            // fractions take scale 0 (their values are doubles).
            scale_exp10: if kind == Kind::Histogram { SCALE } else { 0 },
            histogram: if kind == Kind::Histogram { &layout } else { ptr::null() },
        };
        // SAFETY: desc and everything it points to live for the call (the
        // library copies them).
        let mut flags = if kind == Kind::Counter { 0 } else { sys::PCPU_FAMILY_FRACTIONS };
        if labelset {
            flags |= sys::PCPU_FAMILY_LABELSET;
        }
        let raw = unsafe { sys::pcpu_registry_family_ex(reg.as_raw(), &desc, flags, 0, ptr::null(), ptr::null()) };
        let raw = NonNull::new(raw).ok_or_else(|| Refusal::from_error(name, crate::registry::stats_error()))?;
        Ok(Fam { raw, labels: label_names.iter().map(|n| n.to_string()).collect() })
    }

    /// Counts a refusal: `refused()`, `last_refusal()`, and the counter
    /// `pcpu_metrics_refused_keys_total` in the registry (made at the
    /// first refusal, so a program that has none exposes nothing more).
    pub(crate) fn refuse(&mut self, reg: &Registry, r: &Refusal) {
        self.refused += 1;
        self.last_refusal = Some(r.message.clone());
        if self.refused_counter.is_none() {
            let name = c"pcpu_metrics_refused_keys";
            let help = c"Registrations of metrics keys the pcpu recorder could not record (pcpu::metrics::Recorder::last_refusal says why).";
            // SAFETY: NUL-terminated strings; a live registry.
            let c = unsafe { sys::pcpu_registry_counter(reg.as_raw(), name.as_ptr(), help.as_ptr()) };
            self.refused_counter = NonNull::new(c);
        }
        if let Some(c) = self.refused_counter {
            // SAFETY: a series of the registry, which outlives self.
            unsafe { sys::pcpu_counter_add(c.as_ptr(), 1) };
        }
    }

    pub(crate) fn refused(&self) -> u64 {
        self.refused
    }

    pub(crate) fn last_refusal(&self) -> Option<String> {
        self.last_refusal.clone()
    }
}
