//! OpenTelemetry's observable counters read pcpu counters: the hot path
//! adds with pcpu's per-CPU add, and the OpenTelemetry SDK's reader calls
//! the callback at each collection, which reports the counter's sum (a
//! cumulative value, as an observable counter wants).
//!
//!     cargo run -p pcpu --example otel_observable --features otel-example
//!
//! With no SDK installed the global meter provider is a no-op and never
//! calls the callback; an application installs its SDK's MeterProvider
//! (opentelemetry_sdk, with an exporter) before this code runs, and
//! nothing here changes.
use std::sync::Arc;

use opentelemetry::{global, KeyValue};

fn main() -> Result<(), pcpu::Error> {
    let requests = Arc::new(pcpu::Counter::new()?);

    let meter = global::meter("pcpu-example");
    let observed = requests.clone();
    let _gauge = meter
        .u64_observable_counter("http.server.requests")
        .with_description("Requests served, counted per CPU by pcpu")
        .with_callback(move |obs| obs.observe(observed.get(), &[KeyValue::new("service", "example")]))
        .build();

    std::thread::scope(|s| {
        for _ in 0..4 {
            let requests = &requests;
            s.spawn(move || {
                for _ in 0..100_000 {
                    requests.inc();
                }
            });
        }
    });
    println!("requests counted: {} (what the next collection reports)", requests.get());
    Ok(())
}
