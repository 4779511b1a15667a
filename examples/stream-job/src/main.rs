//! Runs the RCAgent controller, its tools and both experts on the bundled stream-job incident
//! against an OpenAI-compatible server.
//!
//! ```text
//! RCA_OPENAI_BASE_URL=http://localhost:8000/v1 RCA_OPENAI_MODEL=qwen2.5-7b-instruct \
//!   cargo run -p example-stream-job --features http
//! ```
//! `RCA_OPENAI_API_KEY` is sent as a bearer token when set. `RCA_EXPERTS=policy` runs the
//! experts as deterministic policies instead of asking the model.

use std::sync::Arc;

use rca_core::llm::ChatModel;
use rca_llm::{OpenAiClient, OpenAiConfig};

fn env(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|_| format!("set {name} (see the example's README)"))
}

#[tokio::main]
async fn main() -> Result<(), example_stream_job::Error> {
    let mut config = OpenAiConfig::new(env("RCA_OPENAI_BASE_URL")?, env("RCA_OPENAI_MODEL")?);
    if let Ok(key) = std::env::var("RCA_OPENAI_API_KEY") {
        config = config.with_api_key(key);
    }
    let model: Arc<dyn ChatModel> = Arc::new(OpenAiClient::new(config)?);
    let experts = match std::env::var("RCA_EXPERTS").as_deref() {
        Ok("policy") => None,
        _ => Some(Arc::clone(&model)),
    };
    let run = example_stream_job::diagnose(model, experts).await?;
    println!("{}", serde_json::to_string_pretty(&run)?);
    Ok(())
}
