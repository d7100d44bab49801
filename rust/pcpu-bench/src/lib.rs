//! The counters the benchmarks compare, behind one trait, and the
//! multi-threaded run both the Criterion bench (benches/counters.rs) and
//! the report (src/bin/report.rs, bench/rust.md's figures) time.
//!
//! Every implementation holds `n` counters (1 or 1000) and each thread adds
//! 1 to them in turn; afterwards the total must be exactly the number of
//! adds made (`total()`), which the report checks.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// A set of `n` counters some library implements.
pub trait Counters: Sync {
    /// The library's name in tables.
    fn name(&self) -> &'static str;
    /// One thread's share of a run: `iters` adds of 1, cycling over the
    /// counters; anything a thread needs first (a local handle) is made
    /// here, and what it must publish at the end (a flush) done here.
    fn work(&self, iters: u64);
    /// The sum of all counters.
    fn total(&self) -> u64;
}

/// Runs `work(iters)` on `threads` threads at once, started together, and
/// returns the wall time from the start to the last thread's end.
///
/// The clock starts before the barrier releases the threads: taken after
/// it, the main thread (descheduled on a busy machine) could read it once
/// the threads were done. The wake-up latency it includes is microseconds,
/// against runs of milliseconds.
pub fn run(c: &dyn Counters, threads: usize, iters: u64) -> Duration {
    let barrier = Barrier::new(threads + 1);
    let start = std::thread::scope(|s| {
        for _ in 0..threads {
            let barrier = &barrier;
            s.spawn(move || {
                barrier.wait();
                c.work(iters);
            });
        }
        let start = Instant::now();
        barrier.wait();
        // The scope joins every thread before returning.
        start
    });
    start.elapsed()
}

/// The loop every implementation runs: `add(j)` for j cycling 0..n.
#[inline(always)]
fn cycle(n: usize, iters: u64, mut add: impl FnMut(usize)) {
    if n == 1 {
        // One counter: the plain loop, as C's bench/insn_loops.c has it.
        for _ in 0..iters {
            add(0);
        }
        return;
    }
    let mut j = 0;
    for _ in 0..iters {
        add(j);
        j += 1;
        if j == n {
            j = 0;
        }
    }
}

/// pcpu's Counter: the add inlined (Rust asm).
pub struct PcpuInline(pub Vec<pcpu::Counter>);
impl Counters for PcpuInline {
    fn name(&self) -> &'static str {
        "pcpu (inline asm)"
    }
    fn work(&self, iters: u64) {
        let cs = &self.0[..];
        if cs.len() == 1 {
            inc_loop(&cs[0], iters);
        } else {
            cycle(cs.len(), iters, |j| cs[j].inc());
        }
    }
    fn total(&self) -> u64 {
        self.0.iter().map(|c| c.get()).sum()
    }
}

/// One counter's loop as a function of the counter, as C's
/// bench/insn_loops.c has it: a `&Counter` parameter is immutable for the
/// call, so its fields are loaded once, before the loop (from a `Vec`'s
/// element they would be loaded again after each add's asm, which may
/// write memory: 3 loads more per add).
#[inline(never)]
pub fn inc_loop(c: &pcpu::Counter, iters: u64) {
    for _ in 0..iters {
        c.inc();
    }
}

/// pcpu's counters through the C library's exported add (a call per add,
/// never inlined: the stable tier).
pub struct PcpuFfi(pub Vec<pcpu::Counter>);
impl Counters for PcpuFfi {
    fn name(&self) -> &'static str {
        "pcpu (FFI call)"
    }
    fn work(&self, iters: u64) {
        let cs: Vec<_> = self.0.iter().map(|c| c.as_raw()).collect();
        // SAFETY: live counters.
        cycle(cs.len(), iters, |j| unsafe { pcpu_sys::pcpu_counter_inc(cs[j]) });
    }
    fn total(&self) -> u64 {
        self.0.iter().map(|c| c.get()).sum()
    }
}

extern "C" {
    /// bench/insn_loops.c's loop of the C inline add (built by build.rs).
    fn pcpu_inc_loop(c: pcpu_sys::pcpu_counter_t, n: std::ffi::c_long);
}

/// The C inline add in C's own loop (bench/insn_loops.c), one counter only:
/// the baseline of the Rust inline add.
pub struct PcpuC(pub pcpu::Counter);
impl Counters for PcpuC {
    fn name(&self) -> &'static str {
        "pcpu (C inline, C loop)"
    }
    fn work(&self, iters: u64) {
        // SAFETY: a live counter.
        unsafe { pcpu_inc_loop(self.0.as_raw(), iters as std::ffi::c_long) }
    }
    fn total(&self) -> u64 {
        self.0.get()
    }
}

/// A shared `AtomicU64::fetch_add` (what `metrics` and prometheus-client
/// do underneath).
pub struct Atomic(pub Vec<AtomicU64>);
impl Counters for Atomic {
    fn name(&self) -> &'static str {
        "AtomicU64::fetch_add"
    }
    fn work(&self, iters: u64) {
        let cs = &self.0[..];
        cycle(cs.len(), iters, |j| {
            cs[j].fetch_add(1, Ordering::Relaxed);
        });
    }
    fn total(&self) -> u64 {
        self.0.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }
}

/// `metrics::Counter` handles over `Arc<AtomicU64>` (the storage of the
/// `metrics` exporters).
pub struct Metrics(pub Vec<(metrics::Counter, Arc<AtomicU64>)>);
impl Counters for Metrics {
    fn name(&self) -> &'static str {
        "metrics::Counter"
    }
    fn work(&self, iters: u64) {
        let cs = &self.0[..];
        cycle(cs.len(), iters, |j| cs[j].0.increment(1));
    }
    fn total(&self) -> u64 {
        self.0.iter().map(|c| c.1.load(Ordering::Relaxed)).sum()
    }
}

/// prometheus-client's `Counter<u64>`.
pub struct PromClient(pub Vec<prometheus_client::metrics::counter::Counter<u64>>);
impl Counters for PromClient {
    fn name(&self) -> &'static str {
        "prometheus-client Counter"
    }
    fn work(&self, iters: u64) {
        let cs = &self.0[..];
        cycle(cs.len(), iters, |j| {
            cs[j].inc();
        });
    }
    fn total(&self) -> u64 {
        self.0.iter().map(|c| c.get()).sum()
    }
}

/// The `prometheus` crate's `IntCounter`.
pub struct Prom(pub Vec<prometheus::IntCounter>);
impl Counters for Prom {
    fn name(&self) -> &'static str {
        "prometheus IntCounter"
    }
    fn work(&self, iters: u64) {
        let cs = &self.0[..];
        cycle(cs.len(), iters, |j| cs[j].inc());
    }
    fn total(&self) -> u64 {
        self.0.iter().map(|c| c.get()).sum()
    }
}

/// The `prometheus` crate's `LocalIntCounter`: a thread-local copy flushed
/// into the shared counter (here once, at the end of the thread's share;
/// exact only after that flush).
pub struct PromLocal(pub Vec<prometheus::IntCounter>);
impl Counters for PromLocal {
    fn name(&self) -> &'static str {
        "prometheus LocalIntCounter"
    }
    fn work(&self, iters: u64) {
        let local: Vec<prometheus::local::LocalIntCounter> = self.0.iter().map(|c| c.local()).collect();
        cycle(local.len(), iters, |j| local[j].inc());
        for l in &local {
            l.flush();
        }
    }
    fn total(&self) -> u64 {
        self.0.iter().map(|c| c.get()).sum()
    }
}

/// fast-telemetry 0.10's `Counter`: `CachePadded<AtomicIsize>` shards
/// picked by thread id, `ncpu` shards (rounded up to a power of two).
pub struct FastTelemetry(pub Vec<fast_telemetry::Counter>);
impl Counters for FastTelemetry {
    fn name(&self) -> &'static str {
        "fast-telemetry Counter"
    }
    fn work(&self, iters: u64) {
        let cs = &self.0[..];
        cycle(cs.len(), iters, |j| cs[j].inc());
    }
    fn total(&self) -> u64 {
        self.0.iter().map(|c| c.sum() as u64).sum()
    }
}

/// The number of CPUs the process may use.
pub fn ncpu() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Every implementation with `n` counters each (the C loop only for n = 1).
pub fn all(n: usize) -> Vec<Box<dyn Counters>> {
    let pcpu = || (0..n).map(|_| pcpu::Counter::new().expect("pcpu counter")).collect::<Vec<_>>();
    let mut v: Vec<Box<dyn Counters>> = vec![Box::new(PcpuInline(pcpu())), Box::new(PcpuFfi(pcpu()))];
    if n == 1 {
        v.push(Box::new(PcpuC(pcpu::Counter::new().expect("pcpu counter"))));
    }
    v.push(Box::new(Atomic((0..n).map(|_| AtomicU64::new(0)).collect())));
    v.push(Box::new(Metrics(
        (0..n)
            .map(|_| {
                let a = Arc::new(AtomicU64::new(0));
                (metrics::Counter::from_arc(a.clone()), a)
            })
            .collect(),
    )));
    v.push(Box::new(PromClient((0..n).map(|_| Default::default()).collect())));
    let prom = || {
        (0..n)
            .map(|i| prometheus::IntCounter::new(format!("c{i}"), "help").expect("prometheus counter"))
            .collect::<Vec<_>>()
    };
    v.push(Box::new(Prom(prom())));
    v.push(Box::new(PromLocal(prom())));
    v.push(Box::new(FastTelemetry((0..n).map(|_| fast_telemetry::Counter::new(ncpu())).collect())));
    v
}
