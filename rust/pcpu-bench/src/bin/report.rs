//! Prints bench/rust.md's tables: for each implementation, T threads
//! (1, 2, ncpu, 2 x ncpu) and 1 or 10^3 counters, the median over RUNS runs
//! of the time per add per thread (every thread makes ITERS adds; wall time
//! / ITERS), whether the total was exact after every run, the ratios to
//! AtomicU64::fetch_add and to fast-telemetry, and the bytes each counter
//! takes (heap bytes measured by a counting allocator over 1000 counters;
//! pcpu's per-CPU words are mapped, not allocated: computed from nslots).
//!
//! Usage: cargo run --release -p pcpu-bench --bin report [RUNS] [ITERS]
//! (defaults 7 and 2,000,000).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;
static ALLOCATED: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator, counting bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCATED.fetch_add(l.size(), Ordering::Relaxed);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        ALLOCATED.fetch_sub(l.size(), Ordering::Relaxed);
        System.dealloc(p, l)
    }
}

#[global_allocator]
static A: Counting = Counting;

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runs: usize = args.get(1).map_or(7, |a| a.parse().expect("RUNS"));
    let iters: u64 = args.get(2).map_or(2_000_000, |a| a.parse().expect("ITERS"));
    let ncpu = pcpu_bench::ncpu();
    let mut threads = vec![1, 2, ncpu, 2 * ncpu];
    threads.sort();
    threads.dedup();
    println!(
        "ncpu {ncpu}, pcpu slots {} ({:?} mode), {runs} runs of {iters} adds per thread, median ns per add per thread\n",
        pcpu::nslots(),
        pcpu::rseq_mode()
    );

    // Heap bytes per counter, 1000 counters made at once.
    println!("| counter | heap bytes per counter (measured) | handle bytes |");
    println!("|---|---:|---:|");
    for (name, bytes, handle) in per_counter_bytes() {
        println!("| {name} | {bytes} | {handle} |");
    }
    println!();

    for n in [1usize, 1000] {
        println!("### {n} counter(s)\n");
        let names: Vec<&str> = pcpu_bench::all(n).iter().map(|c| c.name()).collect();
        print!("| implementation |");
        for t in &threads {
            print!(" T={t} |");
        }
        println!(" exact |");
        print!("|---|");
        for _ in &threads {
            print!("---:|");
        }
        println!("---|");
        let mut table: Vec<Vec<f64>> = vec![vec![0.0; threads.len()]; names.len()];
        let mut exact = vec![true; names.len()];
        for (ti, &t) in threads.iter().enumerate() {
            let mut samples: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
            // Runs interleave the implementations, so a slow moment of this
            // shared machine does not land on one of them only.
            for _ in 0..runs {
                for (i, imp) in pcpu_bench::all(n).iter().enumerate() {
                    let d = pcpu_bench::run(imp.as_ref(), t, iters);
                    samples[i].push(d.as_nanos() as f64 / iters as f64);
                    if imp.total() != t as u64 * iters {
                        exact[i] = false;
                    }
                }
            }
            for i in 0..names.len() {
                table[i][ti] = median(&mut samples[i]);
            }
        }
        for (i, name) in names.iter().enumerate() {
            print!("| {name} |");
            for v in &table[i] {
                print!(" {v:.2} |");
            }
            println!(" {} |", if exact[i] { "yes" } else { "NO" });
        }
        let find = |s: &str| names.iter().position(|n| n.starts_with(s)).unwrap();
        let (p, a, f) = (find("pcpu (inline"), find("AtomicU64"), find("fast-telemetry"));
        let ratio = |label: &str, num: usize, den: usize| {
            print!("| {label} |");
            for (x, y) in table[num].iter().zip(&table[den]) {
                print!(" {:.2}x |", x / y);
            }
            println!(" |");
        };
        ratio("ratio AtomicU64 / pcpu inline", a, p);
        ratio("ratio fast-telemetry / pcpu inline", f, p);
        if n == 1 {
            ratio("ratio pcpu inline / C inline", p, find("pcpu (C inline"));
        }
        println!();
    }
}

/// Heap bytes per counter of each implementation (1000 made, measured),
/// and the size of the handle a user holds.
fn per_counter_bytes() -> Vec<(String, String, usize)> {
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;
    let n = 1000;
    let measure = |make: &dyn Fn() -> Box<dyn std::any::Any>| -> f64 {
        let before = ALLOCATED.load(Ordering::Relaxed);
        let v: Vec<Box<dyn std::any::Any>> = (0..n).map(|_| make()).collect();
        let after = ALLOCATED.load(Ordering::Relaxed);
        // The Vec of boxes and the boxes themselves are the harness's.
        let harness = n * std::mem::size_of::<Box<dyn std::any::Any>>();
        drop(v);
        (after - before - harness) as f64 / n as f64
    };
    // Each measured value is boxed: the box's own bytes are the handle's.
    let boxed = |size: usize| size;
    let slots = pcpu::nslots() as usize;
    vec![
        (
            "pcpu Counter".into(),
            format!(
                "{:.0} heap + 8 x {slots} slots = {} B of per-CPU words (mapped; a slot's page is resident once a thread on it adds)",
                measure(&|| Box::new(pcpu::Counter::new().unwrap())) - boxed(std::mem::size_of::<pcpu::Counter>()) as f64,
                8 * slots
            ),
            std::mem::size_of::<pcpu::Counter>(),
        ),
        (
            "Arc<AtomicU64>".into(),
            format!("{:.0}", measure(&|| Box::new(Arc::new(AtomicU64::new(0)))) - boxed(8) as f64),
            std::mem::size_of::<Arc<AtomicU64>>(),
        ),
        (
            "metrics::Counter (Arc<AtomicU64>)".into(),
            format!(
                "{:.0}",
                measure(&|| Box::new(metrics::Counter::from_arc(Arc::new(AtomicU64::new(0)))))
                    - boxed(std::mem::size_of::<metrics::Counter>()) as f64
            ),
            std::mem::size_of::<metrics::Counter>(),
        ),
        (
            "prometheus-client Counter".into(),
            format!(
                "{:.0}",
                measure(&|| Box::new(prometheus_client::metrics::counter::Counter::<u64>::default()))
                    - boxed(std::mem::size_of::<prometheus_client::metrics::counter::Counter<u64>>()) as f64
            ),
            std::mem::size_of::<prometheus_client::metrics::counter::Counter<u64>>(),
        ),
        (
            "prometheus IntCounter".into(),
            format!(
                "{:.0}",
                measure(&|| Box::new(prometheus::IntCounter::new("c", "help").unwrap()))
                    - boxed(std::mem::size_of::<prometheus::IntCounter>()) as f64
            ),
            std::mem::size_of::<prometheus::IntCounter>(),
        ),
        (
            format!("fast-telemetry Counter ({} shards)", pcpu_bench::ncpu().next_power_of_two()),
            format!(
                "{:.0}",
                measure(&|| Box::new(fast_telemetry::Counter::new(pcpu_bench::ncpu())))
                    - boxed(std::mem::size_of::<fast_telemetry::Counter>()) as f64
            ),
            std::mem::size_of::<fast_telemetry::Counter>(),
        ),
    ]
}
