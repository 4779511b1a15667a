//! The real binary under a short hostile mix (issue 45, item 6): posts without credentials or
//! with a wrong token, slow clients, the OTLP amplification body, an alert list larger than
//! the inbox, at once for 10 s; the service's peak memory stays under 1 GiB, the health route
//! answers every probe, nothing hostile is answered 2xx, and a real alert afterwards is
//! diagnosed.
#![cfg(feature = "otlp")]

use std::path::PathBuf;
use std::time::Duration;

use example_diagnosis_service::hostile::{HostilePlan, PEAK_MEMORY_LIMIT_MIB, run_hostile};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_survives_a_hostile_mix() {
    let incident = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../incidents/trainticket-cpu");
    let mut plan = HostilePlan::new(
        PathBuf::from(env!("CARGO_BIN_EXE_diagnosis-service")),
        incident,
    );
    plan.duration = Duration::from_secs(10);
    plan.unauthenticated_posts = 600;
    plan.wrong_token_posts = 600;
    plan.amplification_posts = 8;
    plan.oversized_posts = 2;
    plan.time_limit = Duration::from_secs(120);
    let f = run_hostile(&plan).await.unwrap();
    eprintln!("{}", f.to_markdown());

    let peak = f.peak_memory_mib;
    if cfg!(target_os = "linux") {
        let peak = peak.expect("VmHWM is read on Linux");
        assert!(peak < PEAK_MEMORY_LIMIT_MIB, "peak memory {peak:.0} MiB");
    }
    assert!(f.health.probes >= 50, "{:?}", f.health);
    assert_eq!(f.health.failures, 0, "{:?}", f.health);

    // Without credentials: 401, or 429 past the client's rate, or a refused connection;
    // never anything else, never 2xx.
    for (what, c) in [
        ("without credentials", &f.unauthenticated),
        ("with a wrong token", &f.wrong_token),
    ] {
        assert_eq!(c.sent, 600, "{what}: {c:?}");
        assert_eq!(c.others(&[401, 429]), 0, "{what}: {c:?}");
        assert!(c.status(401) > 0, "{what}: {c:?}");
        assert_eq!(
            c.status(401) + c.status(429) + c.connection_failures,
            c.sent,
            "{what}: {c:?}"
        );
    }
    // The amplification bodies: 413 (the memory estimate) or 503 (busy), never 2xx.
    let a = &f.amplification;
    assert_eq!(a.sent, 8, "{a:?}");
    assert_eq!(a.successes(), 0, "{a:?}");
    assert_eq!(a.others(&[413, 503]), 0, "{a:?}");
    assert_eq!(a.connection_failures, 0, "{a:?}");
    assert!(a.status(413) > 0, "{a:?}");
    // The oversized list: 413.
    let o = &f.oversized;
    assert_eq!((o.sent, o.status(413)), (2, 2), "{o:?}");
    // Most slow clients were refused at the per-client cap.
    let s = &f.slow;
    assert_eq!(s.clients, 1100);
    assert!(s.closed_at_once >= 900, "{s:?}");
    let listener = f.listener.expect("the listener's counters");
    assert!(listener.connections_refused >= 900, "{listener:?}");
    assert!(listener.unauthenticated > 0, "{listener:?}");
    let otlp = f.otlp.expect("the intake's counters");
    assert_eq!(otlp.requests_accepted, 0, "{otlp:?}");
    // The service still works.
    assert!(f.after.diagnosed, "{:?}", f.after);
    assert!(f.problems().is_empty(), "{:?}", f.problems());
}
