//! The `metrics` facade's own path, as most code uses it: a macro per
//! update (`counter!(...).increment(1)`), which calls the recorder's
//! `register_counter` every time, against metrics-exporter-prometheus's
//! recorder (built as its documentation shows: `PrometheusBuilder::new()
//! .build_recorder()`), in one run: rounds interleave the two (the order
//! alternates), each round runs T threads at once, every thread makes
//! ITERS calls; the time is the round's wall time / ITERS (ns per call
//! per thread). Prints the median and the minimum over the rounds, and
//! the exporter / pcpu ratios. bench/rust.md has the figures.
//!
//! Workloads (every thread draws keys from its own xorshift generator,
//! seeded by its number, the same for both recorders):
//! - `counter! static key`: `counter!("requests_total").increment(1)`, a
//!   literal name without labels (the macro makes the key a `static`, its
//!   hash computed at compile time), every thread on the same key;
//! - `counter! one static label`: `counter!("requests_total", "method" =>
//!   "GET").increment(1)`, a literal name and one literal label, every
//!   thread on the same series: the most common shape in code;
//! - `counter! mix`: 3 counter names, 0 to 2 labels, values chosen at
//!   random among a few (12 series of `http_requests_total{method,status}`,
//!   `bytes_sent_total`, 3 of `cache_lookups_total{cache,result}`);
//! - `all kinds mix`: the same with a `gauge!` and a `histogram!` call in
//!   every 4;
//! - `kept handle`: `c.increment(1)` on a `metrics::Counter` made once
//!   (the macro's result kept), one counter shared by the threads.
//!
//! After the last round each recorder's counters must sum to the calls
//! made ("exact").
//!
//! Usage: cargo run --release -p pcpu-bench --bin macros [ROUNDS] [ITERS]
//! (defaults 11 and 200,000).

use std::sync::Barrier;
use std::time::{Duration, Instant};

use metrics::{counter, gauge, histogram, with_local_recorder, Recorder};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

const METHODS: [&str; 4] = ["GET", "POST", "PUT", "DELETE"];
const STATUS: [&str; 3] = ["200", "404", "500"];
const CACHES: [&str; 3] = ["users", "sessions", "pages"];

#[derive(Clone, Copy, PartialEq)]
enum Work {
    Static,
    Label,
    Counters,
    AllKinds,
    Kept,
}

impl Work {
    fn name(self) -> &'static str {
        match self {
            Work::Static => "counter! static key",
            Work::Label => "counter! one static label",
            Work::Counters => "counter! mix",
            Work::AllKinds => "all kinds mix",
            Work::Kept => "kept handle",
        }
    }
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

/// One thread's calls; returns how many counter increments it made (each
/// by 1).
#[inline(never)]
fn calls(work: Work, iters: u64, seed: u64, kept: &metrics::Counter) -> u64 {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut counted = 0;
    for _ in 0..iters {
        let r = xorshift(&mut s);
        if work == Work::Kept {
            kept.increment(1);
            counted += 1;
            continue;
        }
        if work == Work::Static {
            counter!("requests_total").increment(1);
            counted += 1;
            continue;
        }
        if work == Work::Label {
            counter!("requests_total", "method" => "GET").increment(1);
            counted += 1;
            continue;
        }
        let pick = (r & 7) as usize;
        let (a, b) = ((r >> 8) as usize, (r >> 16) as usize);
        if work == Work::AllKinds && pick >= 6 {
            if pick == 6 {
                gauge!("queue_depth", "queue" => CACHES[a % 3]).increment(1.0);
            } else {
                histogram!("request_seconds", "method" => METHODS[a % 4]).record((b % 1000) as f64 * 1e-4);
            }
            continue;
        }
        match pick {
            0..=3 => {
                counter!("http_requests_total", "method" => METHODS[a % 4], "status" => STATUS[b % 3]).increment(1)
            }
            4 => counter!("bytes_sent_total").increment(1),
            _ => counter!("cache_lookups_total", "cache" => CACHES[a % 3], "result" => "hit").increment(1),
        }
        counted += 1;
    }
    counted
}

/// One round: `threads` threads at once, each making `iters` calls with
/// `rec` as its recorder; the wall time from their release to the last
/// one's end, and the counter increments made.
fn round<R: Recorder + Sync>(
    rec: &R,
    kept: &metrics::Counter,
    work: Work,
    threads: usize,
    iters: u64,
) -> (Duration, u64) {
    let barrier = Barrier::new(threads + 1);
    let (start, joins) = std::thread::scope(|s| {
        let joins: Vec<_> = (0..threads)
            .map(|t| {
                let barrier = &barrier;
                s.spawn(move || {
                    with_local_recorder(rec, || {
                        barrier.wait();
                        calls(work, iters, t as u64 + 1, kept)
                    })
                })
            })
            .collect();
        let start = Instant::now();
        barrier.wait();
        (start, joins.into_iter().map(|j| j.join().unwrap()).sum::<u64>())
    });
    (start.elapsed(), joins)
}

/// The sum of every counter sample of a Prometheus text exposition.
fn counter_sum(text: &str) -> u64 {
    text.lines()
        .filter(|l| !l.starts_with('#') && l.split(['{', ' ']).next().is_some_and(|n| n.ends_with("_total")))
        .filter(|l| !l.starts_with("pcpu_"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

struct Peer {
    name: &'static str,
    run: Box<dyn Fn(Work, usize, u64) -> (Duration, u64)>,
    text: Box<dyn Fn() -> String>,
    made: u64,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds: usize = args.get(1).map_or(11, |a| a.parse().expect("ROUNDS"));
    let iters: u64 = args.get(2).map_or(200_000, |a| a.parse().expect("ITERS"));
    let ncpu = pcpu_bench::ncpu();
    let mut threads = vec![1, 2, ncpu];
    threads.sort();
    threads.dedup();

    // The recorders live for the whole run ('static: leaked), as a
    // program's global recorder does.
    let pcpu: &'static pcpu::metrics::Recorder = Box::leak(Box::new(pcpu::metrics::Recorder::new().expect("pcpu")));
    let prom: &'static metrics_exporter_prometheus::PrometheusRecorder =
        Box::leak(Box::new(PrometheusBuilder::new().build_recorder()));
    let prom_handle: PrometheusHandle = prom.handle();
    let pcpu_kept = with_local_recorder(pcpu, || counter!("kept_total"));
    let prom_kept = with_local_recorder(prom, || counter!("kept_total"));
    let mut peers = [
        Peer {
            name: "pcpu::metrics::Recorder",
            run: Box::new(move |w, t, i| round(pcpu, &pcpu_kept, w, t, i)),
            text: Box::new(move || pcpu.registry().write(pcpu::Format::Prometheus).unwrap()),
            made: 0,
        },
        Peer {
            name: "metrics-exporter-prometheus 0.18",
            run: Box::new(move |w, t, i| round(prom, &prom_kept, w, t, i)),
            text: Box::new(move || prom_handle.render()),
            made: 0,
        },
    ];

    println!(
        "ncpu {ncpu}, {rounds} interleaved rounds of {iters} calls per thread, ns per call per thread (median / min)\n"
    );
    print!("| workload | recorder |");
    for t in &threads {
        print!(" T={t} |");
    }
    println!();
    print!("|---|---|");
    for _ in &threads {
        print!("---:|");
    }
    println!();
    for work in [Work::Static, Work::Label, Work::Counters, Work::AllKinds, Work::Kept] {
        // [peer][thread count] -> per-round ns
        let mut samples = vec![vec![Vec::new(); threads.len()]; peers.len()];
        for (ti, &t) in threads.iter().enumerate() {
            // A first, untimed round registers every key.
            for p in peers.iter_mut() {
                p.made += (p.run)(work, t, iters / 10 + 1).1;
            }
            for r in 0..rounds {
                for k in 0..peers.len() {
                    let i = if r % 2 == 0 { k } else { peers.len() - 1 - k };
                    let (d, n) = (peers[i].run)(work, t, iters);
                    peers[i].made += n;
                    samples[i][ti].push(d.as_nanos() as f64 / iters as f64);
                }
            }
        }
        let mut stats = vec![vec![(0.0, 0.0); threads.len()]; peers.len()];
        for (i, p) in peers.iter().enumerate() {
            print!("| {} | {} |", work.name(), p.name);
            for ti in 0..threads.len() {
                let min = samples[i][ti].iter().cloned().fold(f64::INFINITY, f64::min);
                let med = median(&mut samples[i][ti]);
                stats[i][ti] = (med, min);
                print!(" {med:.1} / {min:.1} |");
            }
            println!();
        }
        print!("| {} | ratio exporter / pcpu |", work.name());
        for ti in 0..threads.len() {
            print!(" {:.2}x / {:.2}x |", stats[1][ti].0 / stats[0][ti].0, stats[1][ti].1 / stats[0][ti].1);
        }
        println!();
    }
    println!();
    for p in &peers {
        let sum = counter_sum(&(p.text)());
        println!(
            "{}: counters sum to {sum}, {} increments made: {}",
            p.name,
            p.made,
            if sum == p.made { "exact" } else { "NOT EXACT" }
        );
    }
}
