//! A Rust program's registry, published as a segment, read by `pcpustat`
//! (tools/, built by CMake as build/tools/pcpustat) from outside the
//! process: the values it prints are the ones the program counted.
//! `PCPU_PCPUSTAT` names the binary (scripts/test.sh sets it); the test is
//! skipped, saying so, only where it is unset and no build/tools/pcpustat
//! exists beside the crate.

use std::path::PathBuf;
use std::process::Command;

fn pcpustat() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PCPU_PCPUSTAT") {
        let p = PathBuf::from(p);
        assert!(p.is_file(), "PCPU_PCPUSTAT={} is not a file", p.display());
        return Some(p);
    }
    let built = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../build/tools/pcpustat");
    built.is_file().then_some(built)
}

#[test]
#[cfg_attr(miri, ignore = "reads text the C library allocated, which Miri cannot see")]
fn pcpustat_reads_a_rust_program() {
    let Some(tool) = pcpustat() else {
        println!("skipped: no pcpustat (set PCPU_PCPUSTAT)");
        return;
    };
    let dir = std::env::temp_dir().join(format!("pcpu-rust-pcpustat-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let reg = pcpu::Registry::new().unwrap();
    let seg = reg.publish_in("rusttest", &dir).unwrap();
    let requests = reg.counter_family("http_requests", "Requests served.", &["method"]).unwrap();
    let depth = reg.gauge("queue_depth", "Items queued.").unwrap();
    std::thread::scope(|s| {
        for m in ["GET", "POST"] {
            let c = requests.with(&[m]).unwrap();
            s.spawn(move || {
                for _ in 0..100_000 {
                    c.inc();
                }
            });
        }
    });
    requests.with(&["GET"]).unwrap().add(5);
    depth.set(-7);

    let out = Command::new(&tool).arg(seg.path()).output().expect("pcpustat runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "pcpustat failed: {text}{}", String::from_utf8_lossy(&out.stderr));
    println!("{text}");
    let value = |series: &str| -> Option<String> {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(series))
            .and_then(|l| l.split_whitespace().nth(1).map(str::to_string))
    };
    assert_eq!(value("http_requests_total{method=\"GET\"}").as_deref(), Some("100005"), "{text}");
    assert_eq!(value("http_requests_total{method=\"POST\"}").as_deref(), Some("100000"), "{text}");
    assert_eq!(value("queue_depth").as_deref(), Some("-7"), "{text}");
    drop(seg);
    drop(reg);
    std::fs::remove_dir_all(&dir).ok();
}
