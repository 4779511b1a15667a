//! Runs the RCAgent controller on the bundled incident against an OpenAI-compatible server.
//!
//! ```text
//! RCA_OPENAI_BASE_URL=http://localhost:8000/v1 RCA_OPENAI_MODEL=qwen2.5-7b-instruct \
//!   cargo run -p example-react-openai --features http
//! ```
//! `RCA_OPENAI_API_KEY` is sent as a bearer token when set. Set `RCA_RECORD=path.json` to
//! record the model's answers to a cassette that the replay test format reads.

use std::sync::Arc;

use rca_core::llm::ChatModel;
use rca_llm::{OpenAiClient, OpenAiConfig, RecordingModel};

fn env(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|_| format!("set {name} (see the example's documentation)"))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let mut config = OpenAiConfig::new(env("RCA_OPENAI_BASE_URL")?, env("RCA_OPENAI_MODEL")?);
    if let Ok(key) = std::env::var("RCA_OPENAI_API_KEY") {
        config = config.with_api_key(key);
    }
    let client = OpenAiClient::new(config)?;
    let model: Arc<dyn ChatModel> = match std::env::var("RCA_RECORD") {
        Ok(path) => Arc::new(RecordingModel::create(client, path)),
        Err(_) => Arc::new(client),
    };
    let run = example_react_openai::diagnose(model).await?;
    println!("{}", serde_json::to_string_pretty(&run)?);
    Ok(())
}
