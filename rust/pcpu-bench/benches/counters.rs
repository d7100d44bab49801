//! Criterion benchmarks of one counter add, multi-threaded (iter_custom:
//! every thread makes `iters` adds, the time is the wall time of the whole
//! run, so the figure is the time per add per thread): pcpu's inline add
//! against the C inline add, the FFI call, AtomicU64::fetch_add, `metrics`,
//! prometheus-client, `prometheus` (IntCounter, LocalIntCounter) and
//! fast-telemetry, at T = 1, 2, ncpu and 2 x ncpu threads, on one counter
//! and on 10^3 counters. `cargo bench -p pcpu-bench`; src/bin/report.rs
//! prints the table of bench/rust.md.
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::time::Duration;

fn counters(c: &mut Criterion) {
    let ncpu = pcpu_bench::ncpu();
    let mut threads = vec![1, 2, ncpu, 2 * ncpu];
    threads.sort();
    threads.dedup();
    for n in [1usize, 1000] {
        let mut g = c.benchmark_group(format!("add_{n}_counters"));
        g.warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(1)).sample_size(10);
        for imp in pcpu_bench::all(n) {
            for &t in &threads {
                g.bench_with_input(BenchmarkId::new(imp.name(), format!("T{t}")), &t, |b, &t| {
                    b.iter_custom(|iters| pcpu_bench::run(imp.as_ref(), t, iters))
                });
            }
        }
        g.finish();
    }
}

criterion_group!(benches, counters);
criterion_main!(benches);
