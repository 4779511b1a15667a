//! `embedded-service STORE_DIR GATEWAY_HOST:PORT MODEL DETECTED_AT_MILLIS`, with the gateway
//! key in `GATEWAY_KEY`: diagnoses the hour before the detection time and prints the report as
//! JSON.

use std::process::ExitCode;
use std::time::Duration;

use example_embedded_service::{GatewayConfig, HostLogStore, HostModel, diagnose};
use rca_core::{Incident, TimeRange, Timestamp};

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [store, address, model, detected] = args.as_slice() else {
        eprintln!(
            "usage: GATEWAY_KEY=... embedded-service STORE_DIR GATEWAY_HOST:PORT MODEL DETECTED_AT_MILLIS"
        );
        return ExitCode::from(2);
    };
    let Ok(detected) = detected.parse::<i64>() else {
        eprintln!("error: DETECTED_AT_MILLIS `{detected}` is not a number of milliseconds");
        return ExitCode::from(2);
    };
    let Ok(api_key) = std::env::var("GATEWAY_KEY") else {
        eprintln!("error: set GATEWAY_KEY to the gateway's key");
        return ExitCode::from(2);
    };
    let detected_at = Timestamp(detected);
    let incident = Incident {
        id: format!("incident-{detected}"),
        title: "alert from the host's monitoring".into(),
        description: String::new(),
        detected_at,
        window: TimeRange::new(detected_at.offset_millis(-3_600_000), detected_at),
        system: String::new(),
        topology: Vec::new(),
        onset: None,
    };
    let model = HostModel::new(GatewayConfig {
        address: address.clone(),
        model: model.clone(),
        api_key,
        timeout: Duration::from_secs(120),
    });
    match diagnose(model, HostLogStore::new(store), &incident).await {
        Ok(run) => {
            println!(
                "{}",
                serde_json::to_string_pretty(&run.report).unwrap_or_default()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
