//! The recorder as `metrics` users drive it: through the macros, with the
//! exposition checked. Tests that read the exposition are ignored under
//! Miri (it cannot see memory the C library allocated).

use super::*;
use ::metrics::{counter, gauge, histogram, with_local_recorder};

fn text(rec: &Recorder) -> String {
    rec.registry().write(crate::Format::Prometheus).unwrap()
}

#[test]
#[cfg_attr(miri, ignore = "reads text the C library allocated, which Miri cannot see")]
fn threads_exact_through_metrics() {
    let rec = Recorder::new().unwrap();
    let c = with_local_recorder(&rec, || counter!("hits", "k" => "v"));
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
    let h = with_local_recorder(&rec, || histogram!("lat"));
    h.record(0.5);
    h.record(1.5);
    let t = text(&rec);
    assert!(t.contains("hits_total{k=\"v\"} 400000"), "{t}");
    assert!(t.contains("lat_count 2") && t.contains("lat_sum 2"), "{t}");
}

/// The macros' own path: every increment registers the key again, from
/// several threads, on keys with static and run-time labels. Each key is
/// made once, and every increment counts.
#[test]
#[cfg_attr(miri, ignore = "reads text the C library allocated, which Miri cannot see")]
fn macro_path_threads_exact() {
    let rec = Recorder::new().unwrap();
    const METHODS: [&str; 3] = ["GET", "PUT", "POST"];
    let n = 20_000u64;
    std::thread::scope(|s| {
        for t in 0..4usize {
            let rec = &rec;
            s.spawn(move || {
                with_local_recorder(rec, || {
                    for i in 0..n {
                        counter!("plain").increment(1);
                        counter!("static_labels", "a" => "b").increment(2);
                        let m = METHODS[(i as usize + t) % 3];
                        counter!("requests", "method" => m, "code" => "200").increment(1);
                        gauge!("level").increment(1.0);
                    }
                })
            });
        }
    });
    assert_eq!(rec.counters.len(), 2 + 3);
    assert_eq!(rec.gauges.len(), 1);
    let t = text(&rec);
    assert!(t.contains(&format!("plain_total {}\n", 4 * n)), "{t}");
    assert!(t.contains(&format!("static_labels_total{{a=\"b\"}} {}\n", 8 * n)), "{t}");
    let per_method: u64 = METHODS
        .iter()
        .map(|m| {
            let line = format!("requests_total{{method=\"{m}\",code=\"200\"}} ");
            let v = t.lines().find_map(|l| l.strip_prefix(&line)).unwrap_or_else(|| panic!("{line}: {t}"));
            v.parse::<u64>().unwrap()
        })
        .sum();
    assert_eq!(per_method, 4 * n);
    assert!(t.contains(&format!("level {}\n", 4 * n)), "{t}");
    assert_eq!(rec.refused(), 0);
}

/// Names and label names that Prometheus refuses are sanitised as
/// metrics-exporter-prometheus does, not dropped (issue 50).
#[test]
#[cfg_attr(miri, ignore = "reads text the C library allocated, which Miri cannot see")]
fn names_sanitised_not_dropped() {
    let rec = Recorder::new().unwrap();
    with_local_recorder(&rec, || {
        counter!("requests", "path" => "/x").increment(5);
        counter!("bad name-with.dots").increment(1);
        counter!("http.requests", "content-type" => "json", "__meta" => "m").increment(2);
        histogram!("size.bytes", "le" => "x").record(3.0);
        gauge!("9lives").set(9.0);
        counter!("ünïcode").increment(1);
    });
    let t = text(&rec);
    for want in [
        "requests_total{path=\"/x\"} 5\n",
        "bad_name_with_dots_total 1\n",
        "http_requests_total{content_type=\"json\",key__meta=\"m\"} 2\n",
        "size_bytes_count{key_le=\"x\"} 1\n",
        "_lives 9\n",
        "_n_code_total 1\n",
    ] {
        assert!(t.contains(want), "missing {want:?} in\n{t}");
    }
    assert_eq!(rec.refused(), 0, "{:?}", rec.last_refusal());
}

/// The same label names in another order are the same family (and the
/// same series for the same values); a label named twice keeps its last
/// value.
#[test]
#[cfg_attr(miri, ignore = "reads text the C library allocated, which Miri cannot see")]
fn label_order_is_the_family_order() {
    let rec = Recorder::new().unwrap();
    with_local_recorder(&rec, || {
        counter!("rpc", "method" => "get", "code" => "200").increment(1);
        counter!("rpc", "code" => "200", "method" => "get").increment(10);
        counter!("rpc", "code" => "500", "method" => "put").increment(100);
        counter!("dup", "a" => "1", "a" => "2").increment(1);
    });
    let t = text(&rec);
    assert!(t.contains("rpc_total{method=\"get\",code=\"200\"} 11\n"), "{t}");
    assert!(t.contains("rpc_total{method=\"put\",code=\"500\"} 100\n"), "{t}");
    assert!(t.contains("dup_total{a=\"2\"} 1\n"), "{t}");
    assert_eq!(rec.refused(), 0);
}

/// What cannot be recorded is refused loudly: a no-op handle, and a count
/// in the registry and in the recorder, with the reason.
#[test]
#[cfg_attr(miri, ignore = "reads text the C library allocated, which Miri cannot see")]
fn refusals_are_counted() {
    let rec = Recorder::new().unwrap();
    with_local_recorder(&rec, || {
        counter!("x").increment(1);
        gauge!("x").set(1.0); // another kind of the same name
        gauge!("x").set(2.0); // cached: counted once
        histogram!("h").record(1.0);
        gauge!("h_count").set(1.0); // a sample name of `h`
        counter!("v", "k" => "a\0b").increment(1); // NUL in a value
    });
    assert_eq!(rec.refused(), 3, "{:?}", rec.last_refusal());
    assert!(rec.last_refusal().unwrap().contains("NUL"), "{:?}", rec.last_refusal());
    let t = text(&rec);
    assert!(t.contains("pcpu_metrics_refused_keys_total 3\n"), "{t}");
    assert!(t.contains("x_total 1\n") && !t.contains("\nx 2"), "{t}");
}

/// Histograms: native buckets by default, whose text form is a small
/// classic set, one `le` per power of two; classic buckets by matcher.
#[test]
#[cfg_attr(miri, ignore = "reads text the C library allocated, which Miri cannot see")]
fn histogram_buckets() {
    let rec = Recorder::builder()
        .histograms_for(Matcher::Suffix("_seconds".into()), Buckets::Classic(vec![0.005, 0.01, 0.25, 1.0]))
        .histograms_for(
            Matcher::Full("coarse".into()),
            Buckets::Native { schema: 0, classic_per_octave: 1, classic_min: 1.0, classic_max: f64::INFINITY },
        )
        .build()
        .unwrap();
    with_local_recorder(&rec, || {
        histogram!("payload").record(1500.0);
        histogram!("payload").record(0.5);
        histogram!("rpc.seconds").record(0.2);
        histogram!("coarse").record(3.0);
    });
    let t = text(&rec);
    let buckets = |name: &str| t.lines().filter(|l| l.starts_with(&format!("{name}_bucket"))).count();
    // Default: le = 2^-9 (the first at or above 0.001) .. 2^9 (the last
    // at or below 1000), and +Inf: 1500 counts in +Inf only.
    assert_eq!(buckets("payload"), 20, "{t}");
    assert!(t.contains("payload_bucket{le=\"0.001953125\"} 0\n"), "{t}");
    assert!(t.contains("payload_bucket{le=\"0.5\"} 1\n"), "{t}");
    assert!(t.contains("payload_bucket{le=\"512.0\"} 1\n"), "{t}");
    assert!(!t.contains("payload_bucket{le=\"1024.0\"}"), "{t}");
    assert!(t.contains("payload_bucket{le=\"+Inf\"} 2\n"), "{t}");
    assert!(t.contains("payload_sum 1500.5\n"), "{t}");
    assert_eq!(buckets("rpc_seconds"), 5, "{t}");
    assert!(t.contains("rpc_seconds_bucket{le=\"0.25\"} 1\n"), "{t}");
    assert!(t.contains("rpc_seconds_bucket{le=\"0.01\"} 0\n"), "{t}");
    assert!(t.contains("coarse_bucket{le=\"4.0\"} 1\n"), "{t}");
    // Bad settings are refused when the recorder is built.
    for bad in [
        Buckets::Classic(vec![]),
        Buckets::Classic(vec![1.0, 1.0]),
        Buckets::Classic(vec![f64::NAN]),
        Buckets::Classic(vec![1e10]),
        Buckets::Native { schema: 9, classic_per_octave: 1, classic_min: 0.0, classic_max: f64::INFINITY },
        Buckets::Native { schema: 3, classic_per_octave: 3, classic_min: 0.0, classic_max: f64::INFINITY },
        Buckets::Native { schema: 3, classic_per_octave: 1, classic_min: 1.0, classic_max: 0.5 },
        Buckets::Native { schema: 3, classic_per_octave: 1, classic_min: 0.0, classic_max: f64::NAN },
    ] {
        assert!(Recorder::builder().histograms(bad.clone()).build().is_err(), "{bad:?}");
    }
}

/// Global labels are the registry's constant labels.
#[test]
#[cfg_attr(miri, ignore = "reads text the C library allocated, which Miri cannot see")]
fn global_labels() {
    let rec = Recorder::builder().global_label("service", "api").build().unwrap();
    with_local_recorder(&rec, || counter!("jobs", "queue" => "fast").increment(2));
    let t = text(&rec);
    assert!(t.contains("jobs_total{queue=\"fast\",service=\"api\"} 2\n"), "{t}");
}

/// Values as exact as the recorded unit (10^-9) makes them.
#[test]
#[cfg_attr(miri, ignore = "reads text the C library allocated, which Miri cannot see")]
fn gauge_values_exact_to_nanos() {
    let rec = Recorder::new().unwrap();
    with_local_recorder(&rec, || {
        let g = gauge!("ratio");
        for _ in 0..10 {
            g.increment(0.1);
        }
        gauge!("temp").set(-21.25);
        histogram!("h").record(0.1);
        histogram!("h").record(0.2);
    });
    let t = text(&rec);
    assert!(t.contains("ratio 1\n"), "{t}");
    assert!(t.contains("temp -21.25\n"), "{t}");
    assert!(t.contains("h_sum 0.3\n"), "{t}");
}

/// A key whose label names differ from the first registration of its
/// name is another series of the same metric (metrics-exporter-prometheus
/// shows `requests{path="/x"} 5` beside `requests 1`).
#[test]
#[cfg_attr(miri, ignore = "reads text the C library allocated, which Miri cannot see")]
fn label_variants_are_series_of_one_metric() {
    let rec = Recorder::new().unwrap();
    with_local_recorder(&rec, || {
        counter!("requests").increment(1);
        counter!("requests", "path" => "/x").increment(5);
        counter!("requests", "path" => "/y", "method" => "GET").increment(7);
        gauge!("queue", "q" => "a").set(1.0);
        gauge!("queue").set(2.0);
        histogram!("lat", "op" => "r").record(1.0);
        histogram!("lat").record(2.0);
    });
    assert_eq!(rec.refused(), 0, "{:?}", rec.last_refusal());
    let t = text(&rec);
    for want in [
        "requests_total 1\n",
        "requests_total{path=\"/x\"} 5\n",
        "requests_total{path=\"/y\",method=\"GET\"} 7\n",
        "queue{q=\"a\"} 1\n",
        "queue 2\n",
        "lat_count{op=\"r\"} 1\n",
        "lat_count 1\n",
    ] {
        assert!(t.contains(want), "missing {want:?} in\n{t}");
    }
    // One family: one TYPE line per name.
    assert_eq!(t.matches("# TYPE requests_total counter").count(), 1, "{t}");
}

/// Gauges and histogram sums cover what an f64 covers.
#[test]
#[cfg_attr(miri, ignore = "reads text the C library allocated, which Miri cannot see")]
fn values_cover_f64() {
    let rec = Recorder::new().unwrap();
    with_local_recorder(&rec, || {
        gauge!("mem_bytes").set(16e9);
        gauge!("tiny").set(1e-12);
        gauge!("huge").set(1e300);
        histogram!("sizes").record(16e9);
        histogram!("sizes").record(16e9);
        // Exact where integers and decimal fractions are: 0.1 ten times
        // is 1, and a decrement takes it back to 0.
        for _ in 0..10 {
            gauge!("tenths").increment(0.1);
        }
        gauge!("back").increment(16e9);
        gauge!("back").decrement(16e9);
    });
    let t = text(&rec);
    for want in ["mem_bytes 16000000000\n", "tiny 1e-12\n", "huge 1e+300\n", "tenths 1\n", "back 0\n"] {
        assert!(t.contains(want), "missing {want:?} in\n{t}");
    }
    let sum = t.lines().find_map(|l| l.strip_prefix("sizes_sum ")).unwrap_or_else(|| panic!("{t}"));
    assert_eq!(sum.parse::<f64>().unwrap(), 32e9, "{t}");
}

/// What `metrics::set_global_recorder` requires.
#[test]
fn recorder_is_send_sync() {
    fn ok<T: ::metrics::Recorder + Send + Sync + 'static>() {}
    ok::<Recorder>();
}

/// The recorder's structures without the exposition: Miri runs this one.
#[test]
fn refused_and_made_once() {
    let rec = Recorder::new().unwrap();
    with_local_recorder(&rec, || {
        for _ in 0..3 {
            counter!("a", "k" => "v").increment(1);
            gauge!("a").set(1.0);
        }
    });
    assert_eq!(rec.counters.len(), 1);
    assert_eq!(rec.gauges.len(), 1);
    assert_eq!(rec.refused(), 1);
}

/// Protobuf wire format, as far as the test needs it: the fields of one
/// message, (number, varint or bytes).
#[cfg(feature = "protobuf")]
mod wire {
    pub enum Value<'a> {
        Varint(u64),
        Bytes(&'a [u8]),
        Fixed64,
    }

    fn varint(b: &[u8], i: &mut usize) -> u64 {
        let (mut v, mut shift) = (0u64, 0);
        loop {
            let x = b[*i];
            *i += 1;
            v |= u64::from(x & 0x7f) << shift;
            if x & 0x80 == 0 {
                return v;
            }
            shift += 7;
        }
    }

    pub fn fields(b: &[u8]) -> Vec<(u64, Value<'_>)> {
        let (mut i, mut out) = (0, Vec::new());
        while i < b.len() {
            let key = varint(b, &mut i);
            let v = match key & 7 {
                0 => Value::Varint(varint(b, &mut i)),
                1 => {
                    i += 8;
                    Value::Fixed64
                }
                2 => {
                    let n = varint(b, &mut i) as usize;
                    i += n;
                    Value::Bytes(&b[i - n..i])
                }
                t => panic!("wire type {t}"),
            };
            out.push((key >> 3, v));
        }
        out
    }

    /// The length-delimited messages of a stream.
    pub fn delimited(b: &[u8]) -> Vec<&[u8]> {
        let (mut i, mut out) = (0, Vec::new());
        while i < b.len() {
            let n = varint(b, &mut i) as usize;
            out.push(&b[i..i + n]);
            i += n;
        }
        out
    }

    pub fn bytes<'a>(f: &[(u64, Value<'a>)], n: u64) -> Vec<&'a [u8]> {
        f.iter().filter_map(|(k, v)| if let (true, Value::Bytes(b)) = (*k == n, v) { Some(*b) } else { None }).collect()
    }

    pub fn varints(f: &[(u64, Value<'_>)], n: u64) -> Vec<u64> {
        f.iter()
            .filter_map(|(k, v)| if let (true, Value::Varint(x)) = (*k == n, v) { Some(*x) } else { None })
            .collect()
    }
}

/// A default histogram is a Prometheus native histogram in the protobuf
/// exposition (schema 3, positive spans), where the library writes it
/// (the feature `protobuf`); classic buckets stay beside it.
#[test]
#[cfg(feature = "protobuf")]
#[cfg_attr(miri, ignore = "reads text the C library allocated, which Miri cannot see")]
fn native_histograms_in_protobuf() {
    let rec = Recorder::builder()
        .histograms_for(Matcher::Full("classic".into()), Buckets::Classic(vec![1.0, 2.0]))
        .build()
        .unwrap();
    with_local_recorder(&rec, || {
        histogram!("payload").record(1500.0);
        histogram!("payload").record(0.5);
        histogram!("classic").record(1.5);
    });
    assert!(crate::Format::Protobuf.supported());
    let accept = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited";
    assert_eq!(crate::Format::negotiate(Some(accept)), crate::Format::Protobuf);
    let body = rec.registry().write_bytes(crate::Format::Protobuf).unwrap();
    let mut seen = 0;
    for fam in wire::delimited(&body) {
        let f = wire::fields(fam);
        let name = String::from_utf8(wire::bytes(&f, 1)[0].to_vec()).unwrap();
        let metric = wire::fields(wire::bytes(&f, 4)[0]);
        let h = wire::fields(wire::bytes(&metric, 7)[0]);
        let count = if name == "classic" { 1 } else { 2 };
        assert_eq!(wire::varints(&h, 1), vec![count], "{name}: sample count");
        let schema = wire::varints(&h, 5);
        let spans = wire::bytes(&h, 12);
        match name.as_str() {
            // sint32 3, zigzag: 6.
            "payload" => assert!(schema == vec![6] && !spans.is_empty(), "payload: schema {schema:?}"),
            "classic" => assert!(schema.is_empty() && spans.is_empty(), "classic: schema {schema:?}"),
            other => panic!("family {other}"),
        }
        // Classic buckets in both.
        assert!(!wire::bytes(&h, 3).is_empty(), "{name}: classic buckets");
        seen += 1;
    }
    assert_eq!(seen, 2);
    // The text formats refuse to write it as a String (binary).
    assert!(rec.registry().write(crate::Format::Protobuf).is_err());
}

/// Protobuf is negotiated and written only where the C library has its
/// writer (the feature `protobuf`, or a library built with protobuf-c:
/// the plain build's, which Miri's runs load); elsewhere it is refused,
/// not written wrong.
#[test]
#[cfg_attr(miri, ignore = "reads the exposition the C library allocated, which Miri cannot see")]
fn protobuf_only_where_written() {
    let rec = Recorder::new().unwrap();
    let has = crate::Format::Protobuf.supported();
    if cfg!(feature = "protobuf") {
        assert!(has);
    }
    let accept = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited";
    let want = if has { crate::Format::Protobuf } else { crate::Format::Prometheus };
    assert_eq!(crate::Format::negotiate(Some(accept)), want);
    assert_eq!(rec.registry().write_bytes(crate::Format::Protobuf).is_ok(), has);
}
