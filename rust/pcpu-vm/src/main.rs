//! The emulated machines' test of the Rust inline add (scripts/vm/run.sh
//! --rust): built statically for the machine's target and booted as /init,
//! it runs `pcpu::Counter::add` -- the crate's rseq critical section in
//! inline assembly, never executed on aarch64 otherwise -- under
//! preemption, migrations and signals, and checks the total is exact.
//!
//! As /init (pid 1) it mounts /proc, /sys and /dev, prints `VM_INIT`, runs
//! each mode of `--modes M1,M2,...` in a child of its own (this program
//! again), prints `VM_MODE_END spec=M round=R status=0x..` after each, and
//! powers the machine off (the kernel must never see init exit). A mode:
//! - glibc: glibc's rseq registration;
//! - own: pcpu's own (GLIBC_TUNABLES=glibc.pthread.rseq=0);
//! - fallback: no rseq (PCPU_RSEQ=0): every add's compare fails and the C
//!   slow path adds atomically.
//!
//! The child sets the mode's environment and executes itself once more, so
//! that glibc and pcpu read it at start-up. Then threads (2 per online CPU,
//! at least 4) add 1 to one counter in a loop, each moving itself between
//! CPUs (sched_setaffinity: pinned to the next CPU in turn, every third
//! round unpinned), each interrupted by its own timer signal (every
//! `--timer-us`, default 50 us), whose handler adds 1000 to the same
//! counter: a handler landing inside the interrupted add's section is what
//! a broken section loses. It runs until `--adds N` loop adds are made AND
//! (rseq modes) `--aborts A` attempts have gone to the slow path -- never
//! for a fixed time; `--max-seconds` (default 300) only bounds a run that
//! cannot get there. Then the total must equal the adds made, exactly.
//!
//! The slow path is counted by the link's `--wrap` (build.rs): an attempt
//! the kernel aborted or whose index compare failed, plus each thread's
//! first add in mode own (which registers it). It also shows that the
//! inline section ran at all: the stable tier's add never calls it from
//! Rust, and `pcpu::inline_add()` must say true.
//!
//! One line per run, in scripts/vm/run.sh's format:
//!   VM_RESULT arch=... variant=... kernel=... mode=... workload=rust-inline
//!             index=... cpus=P/Q threads=T adds=N aborts=A handler_adds=H
//!             hotplug=0 seconds=S result=exact|FAILED spec=M
//! preceded by `vm_stress: FAIL: counter: ...` lines for what failed.
//! `--rounds R` runs a mode again while it ends exact, R runs at most (the
//! broken build's chances to lose an update).

use std::ffi::CString;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// What the timer signal's handler adds: a lost handler add shows as a
/// total 1000 short, a lost loop add as 1 short.
const HANDLER_ADD: i64 = 1000;

static COUNTER: OnceLock<pcpu::Counter> = OnceLock::new();
/// Handler runs that added (each HANDLER_ADD).
static HANDLED: AtomicU64 = AtomicU64::new(0);
/// Calls of the C slow path from the inline add.
static SLOW: AtomicU64 = AtomicU64::new(0);
static FAILURES: AtomicU64 = AtomicU64::new(0);
static IS_INIT: AtomicBool = AtomicBool::new(false);

extern "C" {
    fn __real_pcpu__counter_add_slow(c: pcpu_sys::pcpu_counter_t, v: i64);
}

/// The inline add's slow path, through the link's `--wrap`: counted, then
/// the library's. Async-signal-safe (an atomic add), as the handler's adds
/// reach it too.
///
/// # Safety
/// As `pcpu__counter_add_slow`: `c` is a live counter.
#[no_mangle]
pub unsafe extern "C" fn __wrap_pcpu__counter_add_slow(c: pcpu_sys::pcpu_counter_t, v: i64) {
    SLOW.fetch_add(1, Ordering::Relaxed);
    __real_pcpu__counter_add_slow(c, v);
}

extern "C" fn on_timer(_: libc::c_int) {
    if let Some(c) = COUNTER.get() {
        c.add(HANDLER_ADD);
        HANDLED.fetch_add(1, Ordering::Relaxed);
    }
}

fn fail(msg: &str) {
    println!("vm_stress: FAIL: {msg}");
    FAILURES.fetch_add(1, Ordering::Relaxed);
}

/// The end: as init, power off (exiting would panic the kernel).
fn finish(rc: i32) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    if IS_INIT.load(Ordering::Relaxed) {
        // SAFETY: plain system calls; pid 1 stops the machine.
        unsafe {
            libc::sync();
            libc::reboot(libc::RB_POWER_OFF);
            loop {
                libc::pause();
            }
        }
    }
    std::process::exit(rc)
}

fn mount(src: &str, target: &str, fstype: &str) {
    let (s, t, f) = (CString::new(src).unwrap(), CString::new(target).unwrap(), CString::new(fstype).unwrap());
    // SAFETY: NUL-terminated strings that outlive the calls.
    unsafe {
        libc::mkdir(t.as_ptr(), 0o755);
        if libc::mount(s.as_ptr(), t.as_ptr(), f.as_ptr(), 0, std::ptr::null()) != 0 {
            println!("vm_stress: mount {target}: {}", std::io::Error::last_os_error());
        }
    }
}

/// CPUs in a /sys list such as "0-3,6".
fn count_cpus(file: &str) -> usize {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    text.trim()
        .split(',')
        .filter(|r| !r.is_empty())
        .map(|r| match r.split_once('-') {
            Some((a, b)) => b.parse::<usize>().unwrap_or(0) + 1 - a.parse::<usize>().unwrap_or(0),
            None => 1,
        })
        .sum()
}

struct Opts {
    spec: String,
    mode: String,
    adds: u64,
    aborts: u64,
    max_seconds: f64,
    timer_us: i64,
}

fn usage() -> ! {
    println!(
        "usage: vm_stress [--modes glibc,own,fallback [--rounds R]] [--mode M] [--adds N] \
         [--aborts A] [--max-seconds S] [--timer-us U]"
    );
    finish(2)
}

/// `--modes`: each mode in a child, one after the other, `rounds` runs at
/// most while it ends exact; the other arguments passed on.
fn run_modes(me: &str, list: &str, rounds: u64, rest: &[String]) -> ! {
    for m in list.split(',').filter(|m| !m.is_empty()) {
        for r in 1..=rounds {
            use std::io::Write;
            let _ = std::io::stdout().flush();
            let st = Command::new(me).args(["--spec", m, "--mode", m]).args(rest).status();
            let (code, ok) = match &st {
                Ok(s) => {
                    use std::os::unix::process::ExitStatusExt;
                    (s.into_raw(), s.success())
                }
                Err(e) => {
                    println!("vm_stress: starting mode {m}: {e}");
                    (-1, false)
                }
            };
            println!("VM_MODE_END spec={m} round={r} status={code:#x}");
            if !ok {
                break;
            }
        }
    }
    finish(0)
}

fn main() {
    // SAFETY: getpid cannot fail.
    IS_INIT.store(unsafe { libc::getpid() } == 1, Ordering::Relaxed);
    if IS_INIT.load(Ordering::Relaxed) {
        mount("proc", "/proc", "proc");
        mount("sysfs", "/sys", "sysfs");
        mount("devtmpfs", "/dev", "devtmpfs");
        // run.sh tells a boot that never reached init from a failed run.
        println!("VM_INIT");
    }
    let args: Vec<String> = std::env::args().collect();
    let mut o =
        Opts { spec: "-".into(), mode: "glibc".into(), adds: 4_000_000, aborts: 200, max_seconds: 300.0, timer_us: 50 };
    let (mut modes, mut rounds, mut rest) = (None, 1u64, Vec::new());
    let mut i = 1;
    while i < args.len() {
        let val = args.get(i + 1).cloned().unwrap_or_else(|| usage());
        let num = || val.parse::<u64>().unwrap_or_else(|_| usage());
        match args[i].as_str() {
            "--modes" => modes = Some(val.clone()),
            "--rounds" => rounds = num(),
            "--spec" => o.spec = val.clone(),
            "--mode" => o.mode = val.clone(),
            a => {
                match a {
                    "--adds" => o.adds = num(),
                    "--aborts" => o.aborts = num(),
                    "--max-seconds" => o.max_seconds = val.parse().unwrap_or_else(|_| usage()),
                    "--timer-us" => o.timer_us = num() as i64,
                    _ => usage(),
                }
                rest.extend([args[i].clone(), val.clone()]);
            }
        }
        i += 2;
    }
    if let Some(list) = modes {
        run_modes("/proc/self/exe", &list, rounds, &rest);
    }
    // The mode's environment, then this program again, once.
    if std::env::var_os("PCPU_VM_STARTED").is_none() {
        let mut cmd = Command::new("/proc/self/exe");
        cmd.args(&args[1..]).env("PCPU_VM_STARTED", "1");
        match o.mode.as_str() {
            "glibc" => {}
            "own" => {
                cmd.env("GLIBC_TUNABLES", "glibc.pthread.rseq=0");
            }
            "fallback" => {
                cmd.env("PCPU_RSEQ", "0");
            }
            m => {
                println!("vm_stress: unknown mode {m}");
                finish(2)
            }
        }
        let e = cmd.exec();
        println!("vm_stress: exec /proc/self/exe: {e}");
        finish(2)
    }
    stress(&o)
}

/// Pins the calling thread to `cpu`, or to every CPU of `all` (None).
fn pin(cpu: Option<usize>, all: &libc::cpu_set_t) {
    // SAFETY: libc calls on a local set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        match cpu {
            Some(c) => libc::CPU_SET(c, &mut set),
            None => set = *all,
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// The calling thread's timer: SIGUSR1 to this thread every `us`.
fn arm_timer(us: i64) -> Option<libc::timer_t> {
    if us <= 0 {
        return None;
    }
    // SAFETY: a sigevent aimed at this thread; the timer is deleted by
    // disarm_timer before the thread ends.
    unsafe {
        let mut sev: libc::sigevent = std::mem::zeroed();
        sev.sigev_notify = libc::SIGEV_THREAD_ID;
        sev.sigev_signo = libc::SIGUSR1;
        sev.sigev_notify_thread_id = libc::gettid();
        let mut t: libc::timer_t = std::mem::zeroed();
        if libc::timer_create(libc::CLOCK_MONOTONIC, &mut sev, &mut t) != 0 {
            fail(&format!("timer_create: {}", std::io::Error::last_os_error()));
            return None;
        }
        let every = libc::timespec { tv_sec: 0, tv_nsec: us * 1000 };
        let it = libc::itimerspec { it_interval: every, it_value: every };
        libc::timer_settime(t, 0, &it, std::ptr::null_mut());
        Some(t)
    }
}

fn disarm_timer(t: Option<libc::timer_t>) {
    if let Some(t) = t {
        // SAFETY: a timer arm_timer made, deleted once.
        unsafe { libc::timer_delete(t) };
    }
}

fn stress(o: &Opts) -> ! {
    let variant = if cfg!(pcpu_test_broken_section) {
        "broken-split"
    } else if cfg!(pcpu_test_split_blocks) {
        "split"
    } else {
        "plain"
    };
    let arch = std::env::consts::ARCH;
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let (present, possible) =
        (count_cpus("/sys/devices/system/cpu/present"), count_cpus("/sys/devices/system/cpu/possible"));
    if !pcpu::inline_add() {
        fail("counter: pcpu::inline_add() is false: the adds are the library's call, not the inline section");
    }
    let c = match pcpu::Counter::new() {
        Ok(c) => COUNTER.get_or_init(|| c),
        Err(e) => {
            fail(&format!("counter: Counter::new: {e}"));
            finish(1)
        }
    };
    let expect = match o.mode.as_str() {
        "glibc" => pcpu::RseqMode::Glibc,
        "own" => pcpu::RseqMode::Own,
        _ => pcpu::RseqMode::Fallback,
    };
    let rseq = expect != pcpu::RseqMode::Fallback;
    // No section runs without rseq: every add is the slow path's atomic,
    // which TCG emulates slowly (a quarter of the adds, as vm_stress.c).
    let (min_adds, min_aborts) = if rseq { (o.adds, o.aborts) } else { (o.adds / 4, 0) };
    // SAFETY: a handler that makes async-signal-safe calls only (an atomic
    // load, the inline add or the slow path's, atomic adds).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_timer as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut());
    }
    // SAFETY: reads the process's allowed CPUs into a local set.
    let all = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
        set
    };
    let cpus: Vec<usize> =
        // SAFETY: reads of the set.
        (0..libc::CPU_SETSIZE as usize).filter(|&k| unsafe { libc::CPU_ISSET(k, &all) }).collect();
    let nthreads = (2 * cpus.len()).max(4);
    let progress: Vec<AtomicU64> = (0..nthreads).map(|_| AtomicU64::new(0)).collect();
    // Each worker's thread id, for the main thread's migrations (0: none
    // yet, or the worker has stopped: never moved then).
    let tids: Vec<AtomicI32> = (0..nthreads).map(|_| AtomicI32::new(0)).collect();
    let stop = AtomicBool::new(false);
    let t0 = Instant::now();
    let mut timed_out = false;
    std::thread::scope(|s| {
        for t in 0..nthreads {
            let (progress, stop, cpus, all, tids) = (&progress, &stop, &cpus, &all, &tids);
            s.spawn(move || {
                // SAFETY: gettid cannot fail.
                tids[t].store(unsafe { libc::gettid() }, Ordering::Relaxed);
                let timer = arm_timer(o.timer_us);
                let mut mine = 0u64;
                let mut round = 0usize;
                c.inc(); // registers the thread (own mode) before the check
                mine += 1;
                let mode = pcpu::rseq_mode();
                if mode != expect {
                    fail(&format!("counter: thread {t}: rseq mode {mode:?}, expected {expect:?}"));
                }
                while !stop.load(Ordering::Relaxed) {
                    let cpu = if round % 3 == 2 { None } else { Some(cpus[(t + round) % cpus.len()]) };
                    pin(cpu, all);
                    for _ in 0..4096 {
                        c.inc();
                    }
                    mine += 4096;
                    progress[t].store(mine, Ordering::Relaxed);
                    round += 1;
                }
                tids[t].store(0, Ordering::Relaxed);
                disarm_timer(timer);
                pin(None, all);
                progress[t].store(mine, Ordering::Relaxed);
            });
        }
        // The main thread moves the workers too, every millisecond one of
        // them to another CPU (sched_setaffinity of its thread id): a
        // migration that lands wherever the worker is, mid-section too --
        // on x86-64 the only way a broken section's one-instruction commit
        // can lose an add (run on the new CPU against the old CPU's slot
        // while that CPU's thread adds to it).
        let mut tick = 0usize;
        loop {
            std::thread::sleep(Duration::from_millis(1));
            tick += 1;
            let w = tick % nthreads;
            let tid = tids[w].load(Ordering::Relaxed);
            if tid != 0 && cpus.len() > 1 {
                // SAFETY: a local set; the worker clears its id before it
                // ends, and an id racing with that end is still this
                // process's thread until the scope joins it.
                unsafe {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(cpus[(tick / nthreads + w) % cpus.len()], &mut set);
                    libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set);
                }
            }
            let adds: u64 = progress.iter().map(|p| p.load(Ordering::Relaxed)).sum();
            if adds >= min_adds && SLOW.load(Ordering::Relaxed) >= min_aborts {
                break;
            }
            if t0.elapsed().as_secs_f64() > o.max_seconds {
                timed_out = true;
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    let seconds = t0.elapsed().as_secs_f64();
    // Every timer is deleted and every thread joined: no add is left.
    let loop_adds: u64 = progress.iter().map(|p| p.load(Ordering::Relaxed)).sum();
    let handled = HANDLED.load(Ordering::Relaxed);
    let slow = SLOW.load(Ordering::Relaxed);
    let expected = loop_adds.wrapping_add(handled.wrapping_mul(HANDLER_ADD as u64));
    let total = c.get();
    if timed_out {
        fail(&format!(
            "counter: --max-seconds {} passed with {loop_adds} of {min_adds} adds, {slow} of {min_aborts} aborts",
            o.max_seconds
        ));
    }
    if total != expected {
        fail(&format!(
            "counter: total {total}, expected {expected} ({loop_adds} adds + {handled} x {HANDLER_ADD} in the handler): {} lost",
            expected.wrapping_sub(total) as i64
        ));
    }
    if !rseq && slow < loop_adds + handled {
        fail(&format!("counter: no rseq, yet only {slow} of {} adds took the slow path", loop_adds + handled));
    }
    if rseq && slow == 0 {
        fail("counter: no add ever left the inline section for the slow path");
    }
    // SAFETY: a query of the process's default zone.
    let index = match unsafe { pcpu_sys::pcpu_zone_index(std::ptr::null()) } {
        pcpu_sys::PCPU_INDEX_MM_CID => "mm_cid",
        _ => "cpu",
    };
    let failed = FAILURES.load(Ordering::Relaxed) != 0;
    println!(
        "VM_RESULT arch={arch} variant={variant} kernel={} mode={} workload=rust-inline index={index} \
         cpus={present}/{possible} threads={nthreads} adds={} aborts={slow} handler_adds={handled} \
         hotplug=0 seconds={seconds:.1} result={} spec={}",
        kernel.trim(),
        o.mode,
        loop_adds + handled,
        if failed { "FAILED" } else { "exact" },
        o.spec
    );
    finish(if failed { 1 } else { 0 })
}
