//! From a `metrics` key to the names and values a pcpu family takes.
//!
//! The `metrics` facade accepts any UTF-8 name; Prometheus does not. As
//! metrics-exporter-prometheus does, the recorder replaces each character
//! that may not stand where it is with `_` (per character, not per byte),
//! so that `bad name-with.dots` is recorded as `bad_name_with_dots` rather
//! than lost:
//!
//! - metric names: `[a-zA-Z_:][a-zA-Z0-9_:]*`;
//! - label names: `[a-zA-Z_][a-zA-Z0-9_]*`.
//!
//! Where the exporter would still write what Prometheus rejects, the
//! recorder renames, and says so in its documentation: an empty name
//! becomes `_`; a label name starting with `__` (reserved for Prometheus'
//! own labels) gets the prefix `key` (`__x` is `key__x`); a histogram's
//! label `le` (the bucket label) is `key_le`. A key that names one label
//! twice keeps the last value at the first one's place (the exporter's
//! rule). Label values are kept as they are: the expositions escape them.

use std::borrow::Cow;

use metrics::Key;

fn metric_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn metric_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

fn label_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn label_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// `s` with each character that `ok(position, char)` refuses replaced by
/// `_`; borrowed when nothing changes (the usual case).
fn replace(s: &str, start: fn(char) -> bool, rest: fn(char) -> bool) -> Cow<'_, str> {
    let bad = |(i, c): (usize, char)| if i == 0 { !start(c) } else { !rest(c) };
    if s.is_empty() {
        return Cow::Borrowed("_");
    }
    if !s.chars().enumerate().any(bad) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(s.chars().enumerate().map(|(i, c)| if bad((i, c)) { '_' } else { c }).collect())
}

/// The Prometheus metric name for a `metrics` name.
pub(crate) fn metric_name(name: &str) -> Cow<'_, str> {
    replace(name, metric_start, metric_char)
}

/// The Prometheus label name for a `metrics` label key, in a family of
/// histograms or not.
pub(crate) fn label_name(key: &str, histogram: bool) -> Cow<'_, str> {
    let s = replace(key, label_start, label_char);
    if s.starts_with("__") || (histogram && s == "le") {
        return Cow::Owned(if s.starts_with("__") { format!("key{s}") } else { format!("key_{s}") });
    }
    s
}

/// The key's labels as (Prometheus name, value), in the key's order, a
/// repeated name keeping its first place and its last value.
pub(crate) fn labels(key: &Key, histogram: bool) -> Vec<(String, &str)> {
    let mut out: Vec<(String, &str)> = Vec::with_capacity(key.labels().len());
    for l in key.labels() {
        let name = label_name(l.key(), histogram);
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = l.value(),
            None => out.push((name.into_owned(), l.value())),
        }
    }
    out
}

/// A counter family's name without the `_total` the expositions add (pcpu
/// strips it at registration): `requests` and `requests_total` are one
/// family.
pub(crate) fn family_key(name: &str, counter: bool) -> &str {
    match name.strip_suffix("_total") {
        Some(base) if counter && !base.is_empty() => base,
        _ => name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exporter_cases() {
        // metrics-exporter-prometheus's own cases (its formatting.rs).
        for (input, want) in [
            ("*", "_"),
            ("\"", "_"),
            ("foo_bar", "foo_bar"),
            ("foo1_bar", "foo1_bar"),
            ("1foobar", "_foobar"),
            ("foo1:bar2", "foo1:bar2"),
            ("123", "_23"),
        ] {
            assert_eq!(metric_name(input), want, "{input}");
        }
        for (input, want) in [
            ("*", "_"),
            ("\"", "_"),
            (":", "_"),
            ("foo_bar", "foo_bar"),
            ("1foobar", "_foobar"),
            ("foo1:bar2", "foo1_bar2"),
            ("123", "_23"),
        ] {
            assert_eq!(label_name(input, false), want, "{input}");
        }
    }

    #[test]
    fn renames() {
        assert_eq!(metric_name("bad name-with.dots"), "bad_name_with_dots");
        assert_eq!(metric_name("héllo"), "h_llo"); // one `_` per character
        assert_eq!(metric_name(""), "_");
        assert_eq!(label_name("", false), "_");
        assert_eq!(label_name("__name__", false), "key__name__");
        assert_eq!(label_name("_x", false), "_x");
        assert_eq!(label_name("le", true), "key_le");
        assert_eq!(label_name("le", false), "le");
        assert_eq!(label_name("l-e", true), "l_e");
        assert!(matches!(metric_name("ok_name"), Cow::Borrowed(_)));
    }

    #[test]
    fn repeated_labels() {
        let l = |k: &'static str, v: &'static str| metrics::Label::new(k, v);
        let k = Key::from_parts("x", vec![l("a", "1"), l("b-c", "2"), l("a", "3"), l("b.c", "4")]);
        let l = labels(&k, false);
        assert_eq!(l, vec![("a".to_string(), "3"), ("b_c".to_string(), "4")]);
    }

    #[test]
    fn total_suffix() {
        assert_eq!(family_key("requests_total", true), "requests");
        assert_eq!(family_key("requests_total", false), "requests_total");
        assert_eq!(family_key("_total", true), "_total");
        assert_eq!(family_key("requests", true), "requests");
    }
}
