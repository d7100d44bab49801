//! Exactness of the inline add as the C stress tests check it: many
//! threads, threads moved between CPUs while they add, a signal handler
//! adding to the counter the interrupted code adds to, and fork(). Every
//! check is an exact count, never a time.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

const THREADS: u64 = 4;
// Miri (scripts/test.sh's Miri step) interprets every add: fewer of them.
const ADDS: u64 = if cfg!(miri) { 1_000 } else { 1_000_000 };
const ROUNDS: i64 = if cfg!(miri) { 400 } else { 100_000 };

#[test]
fn threads_exact() {
    let c = pcpu::Counter::new().unwrap();
    let a = pcpu::CounterArray::new(3).unwrap();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (c, a) = (&c, &a);
            s.spawn(move || {
                for i in 0..ADDS {
                    c.inc();
                    a.add((i % 3) as usize, 2);
                }
                c.add(-(t as i64));
            });
        }
    });
    let minus: u64 = (0..THREADS).sum();
    assert_eq!(c.get(), THREADS * ADDS - minus);
    let all = a.get_all();
    assert_eq!(all.iter().sum::<u64>(), 2 * THREADS * ADDS);
    assert_eq!(all[0], 2 * THREADS * ADDS.div_ceil(3));
}

#[test]
fn registry_series_threads_exact() {
    let reg = pcpu::Registry::new().unwrap();
    let fam = reg.counter_family("ops", "Operations.", &["kind"]).unwrap();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let fam = &fam;
            s.spawn(move || {
                let c = fam.with(&[if t % 2 == 0 { "even" } else { "odd" }]).unwrap();
                for _ in 0..ADDS / 4 {
                    c.inc();
                }
            });
        }
    });
    assert_eq!(fam.with(&["even"]).unwrap().get(), 2 * ADDS / 4);
    assert_eq!(fam.with(&["odd"]).unwrap().get(), 2 * ADDS / 4);
}

fn ncpu() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Pins the calling thread to `cpu`, or unpins it (`None`): every CPU the
/// process may use.
fn pin(cpu: Option<usize>, allowed: &libc::cpu_set_t) {
    // SAFETY: plain libc calls on a local set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        match cpu {
            Some(c) => libc::CPU_SET(c, &mut set),
            None => set = *allowed,
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

#[test]
fn migrations_exact() {
    // SAFETY: reads the process's allowed CPUs.
    let allowed = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set), 0);
        set
    };
    let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
        // SAFETY: a read of the set.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &allowed) })
        .collect();
    let c = pcpu::Counter::new().unwrap();
    let (rounds, per_round) = if cfg!(miri) { (30u64, 20u64) } else { (2000, 500) };
    std::thread::scope(|s| {
        for t in 0..THREADS as usize {
            let (c, cpus, allowed) = (&c, &cpus, &allowed);
            s.spawn(move || {
                for r in 0..rounds as usize {
                    // Every third round unpinned, so the scheduler moves it
                    // too; otherwise pinned to the next CPU in turn.
                    let cpu = if r % 3 == 2 { None } else { Some(cpus[(t + r) % cpus.len()]) };
                    pin(cpu, allowed);
                    for _ in 0..per_round {
                        c.inc();
                    }
                }
                pin(None, allowed);
            });
        }
    });
    assert_eq!(c.get(), THREADS * rounds * per_round);
    let _ = ncpu();
}

static SIG_COUNTER: OnceLock<pcpu::Counter> = OnceLock::new();
static SIG_HANDLED: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_signal(_: libc::c_int) {
    // Async-signal-safe: an atomic load, the inline add, an atomic add.
    if let Some(c) = SIG_COUNTER.get() {
        c.add(1000);
        SIG_HANDLED.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
#[cfg_attr(miri, ignore = "Miri runs no signal handlers")]
fn signals_exact() {
    let c = SIG_COUNTER.get_or_init(|| pcpu::Counter::new().unwrap());
    // SAFETY: installs a handler that only makes async-signal-safe calls.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGUSR2, &sa, std::ptr::null_mut()), 0);
    }
    let done = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let adders: Vec<_> = (0..2)
        .map(|_| {
            let (done, tx) = (done.clone(), tx.clone());
            std::thread::spawn(move || {
                let c = SIG_COUNTER.get().unwrap();
                // SAFETY: the thread's own id, for pthread_kill().
                tx.send(unsafe { libc::pthread_self() } as u64).unwrap();
                let mut n = 0u64;
                while !done.load(Ordering::Relaxed) {
                    c.inc();
                    n += 1;
                }
                n
            })
        })
        .collect();
    let ids: Vec<u64> = (0..2).map(|_| rx.recv().unwrap()).collect();
    // Signals to the adders themselves: each lands between two
    // instructions of the loop, often inside the critical section, and the
    // handler adds to the same counter.
    for i in 0..50_000 {
        // SAFETY: the adders run until `done`, so the ids are live.
        unsafe { libc::pthread_kill(ids[i % 2] as libc::pthread_t, libc::SIGUSR2) };
        if i % 64 == 0 {
            std::thread::yield_now();
        }
    }
    // Let the last signals land (delivery is asynchronous) before stopping.
    let mut last = SIG_HANDLED.load(Ordering::Relaxed);
    loop {
        std::thread::sleep(std::time::Duration::from_millis(20));
        let now = SIG_HANDLED.load(Ordering::Relaxed);
        if now == last {
            break;
        }
        last = now;
    }
    done.store(true, Ordering::Relaxed);
    let added: u64 = adders.into_iter().map(|t| t.join().unwrap()).sum();
    let handled = SIG_HANDLED.load(Ordering::Relaxed);
    assert!(handled > 0, "no signal was handled");
    assert_eq!(c.get(), added + 1000 * handled);
}

#[test]
#[cfg_attr(miri, ignore = "Miri cannot fork")]
fn fork_child_counts_its_own() {
    let c = pcpu::Counter::new().unwrap();
    c.add(100);
    // SAFETY: the child only adds, reads and _exits.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        for _ in 0..1000 {
            c.inc();
        }
        let ok = c.get() == 1100;
        // SAFETY: leaves the child without running the test harness.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    for _ in 0..10 {
        c.inc();
    }
    let mut status = 0;
    // SAFETY: waits for our child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "the child's counter was not 1100");
    assert_eq!(c.get(), 110, "the parent's counter saw the child's adds");
}

#[test]
fn owned_slots_exact() {
    let c = pcpu::Counter::new().unwrap();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let c = &c;
            s.spawn(move || {
                // Half the threads hold an owned slot, half use the rseq add.
                if t % 2 == 0 {
                    let w = pcpu::Worker::claim().unwrap();
                    for _ in 0..ADDS {
                        w.add(c, 1);
                    }
                } else {
                    for _ in 0..ADDS {
                        c.inc();
                    }
                }
            });
        }
    });
    assert_eq!(c.get(), THREADS * ADDS);
}

#[test]
fn gauge_and_histogram_threads_exact() {
    let g = pcpu::Gauge::new().unwrap();
    let h = pcpu::Histogram::new(&pcpu::HistogramLayout::explicit(&[10, 100])).unwrap();
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            let (g, h) = (&g, &h);
            s.spawn(move || {
                for i in 0..ROUNDS {
                    g.add(2);
                    g.sub(1);
                    h.record(i % 200);
                }
            });
        }
    });
    // Each thread records 0..200 ROUNDS / 200 times.
    let laps = THREADS * ROUNDS as u64 / 200;
    assert_eq!(g.get(), THREADS as i64 * ROUNDS);
    let (counts, count, sum) = h.read();
    assert_eq!(count, THREADS * ROUNDS as u64);
    assert_eq!(counts, vec![laps * 11, laps * 90, laps * 99]);
    assert_eq!(sum, laps as i64 * (0..200).sum::<i64>());
}
