//! A host-defined [`ChatModel`]: an in-house model gateway that is not OpenAI-compatible.
//!
//! The gateway takes `POST /v1/generate` with an `X-Gateway-Key` header and a body
//! `{"model", "messages": [{"role", "content"}], "max_tokens", "temperature"}`, and answers
//! `{"output": "...", "tokens": {"in": N, "out": M}}`. Any host can do the same for its own
//! gateway: implement `model_id` and `complete`, and map its failures onto [`LlmError`] so the
//! library's retry and budget logic treat them right (429 -> `RateLimited`, 5xx ->
//! `Transient`, other 4xx -> `Permanent`).
//!
//! The transport is a few lines of HTTP/1.1 over a tokio socket so this crate depends on
//! `rca-core` only; a real host would use its own HTTP client.

#![deny(missing_docs)]

use std::time::Duration;

use async_trait::async_trait;
use rca_core::LlmError;
use rca_core::llm::{ChatModel, Choice, CompletionRequest, CompletionResponse, Message, Usage};
use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The in-house gateway's address and credentials.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// `host:port` of the gateway (plain HTTP inside the host's network).
    pub address: String,
    /// The model the gateway should route to.
    pub model: String,
    /// The key sent in `X-Gateway-Key`.
    pub api_key: String,
    /// How long one call may take.
    pub timeout: Duration,
}

/// A [`ChatModel`] over the in-house gateway.
#[derive(Debug, Clone)]
pub struct GatewayModel {
    config: GatewayConfig,
}

#[derive(Deserialize)]
struct GatewayAnswer {
    output: String,
    #[serde(default)]
    tokens: Option<GatewayTokens>,
}

#[derive(Deserialize)]
struct GatewayTokens {
    #[serde(rename = "in")]
    prompt: u64,
    #[serde(rename = "out")]
    completion: u64,
}

impl GatewayModel {
    /// A model behind the gateway `config` describes.
    pub fn new(config: GatewayConfig) -> Self {
        GatewayModel { config }
    }

    /// Sends one request and returns the status and body.
    async fn post(&self, body: &str) -> Result<(u16, String), LlmError> {
        let transient = |e: std::io::Error| LlmError::Transient {
            message: format!("gateway {}: {e}", self.config.address),
        };
        let mut stream = tokio::net::TcpStream::connect(&self.config.address)
            .await
            .map_err(transient)?;
        let request = format!(
            "POST /v1/generate HTTP/1.1\r\nHost: {}\r\nX-Gateway-Key: {}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.config.address,
            self.config.api_key,
            body.len()
        );
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(transient)?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await.map_err(transient)?;
        let text = String::from_utf8_lossy(&raw).to_string();
        let (head, body) = text
            .split_once("\r\n\r\n")
            .ok_or_else(|| LlmError::Malformed {
                message: "the gateway's answer has no HTTP header".into(),
                raw: text.clone(),
            })?;
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse::<u16>().ok())
            .ok_or_else(|| LlmError::Malformed {
                message: "the gateway's answer has no status code".into(),
                raw: head.to_string(),
            })?;
        Ok((status, body.to_string()))
    }
}

#[async_trait]
impl ChatModel for GatewayModel {
    fn model_id(&self) -> &str {
        &self.config.model
    }

    async fn complete(&self, request: CompletionRequest) -> Result<CompletionResponse, LlmError> {
        let messages: Vec<serde_json::Value> = request
            .messages
            .iter()
            .map(|m| {
                serde_json::json!({
                    "role": serde_json::to_value(m.role).unwrap_or(serde_json::Value::Null),
                    "content": m.content,
                })
            })
            .collect();
        let body = serde_json::json!({
            "model": self.config.model,
            "messages": messages,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
        })
        .to_string();
        let (status, text) = tokio::time::timeout(self.config.timeout, self.post(&body))
            .await
            .map_err(|_| LlmError::Transient {
                message: format!("gateway timed out after {:?}", self.config.timeout),
            })??;
        match status {
            200..=299 => {}
            429 => return Err(LlmError::RateLimited { retry_after: None }),
            500..=599 => {
                return Err(LlmError::Transient {
                    message: format!("gateway answered {status}: {text}"),
                });
            }
            _ => {
                return Err(LlmError::Permanent {
                    message: format!("gateway answered {status}: {text}"),
                });
            }
        }
        let answer: GatewayAnswer =
            serde_json::from_str(&text).map_err(|e| LlmError::Malformed {
                message: e.to_string(),
                raw: text.clone(),
            })?;
        let usage = match answer.tokens {
            Some(t) => Usage {
                prompt_tokens: t.prompt,
                completion_tokens: t.completion,
                estimated: false,
            },
            None => Usage {
                prompt_tokens: u64::from(request.estimated_prompt_tokens()),
                completion_tokens: u64::from(rca_core::llm::estimate_tokens(&answer.output)),
                estimated: true,
            },
        };
        Ok(CompletionResponse {
            served: None,
            model: self.config.model.clone(),
            choices: vec![Choice {
                index: 0,
                message: Message::assistant(answer.output),
                finish_reason: None,
            }],
            usage,
        })
    }
}

/// A tiny gateway stand-in for tests and the embedded-service example: it checks the
/// `X-Gateway-Key` header and answers each request with the next canned output.
pub mod testing {
    use std::net::SocketAddr;
    use std::sync::{Arc, Mutex};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// What the stand-in saw.
    #[derive(Debug, Default, Clone)]
    pub struct Seen {
        /// Request bodies, in order.
        pub bodies: Vec<String>,
    }

    /// Serves canned `outputs` (one per request, the last repeated) on 127.0.0.1, accepting
    /// only `key`. Returns the address and a log of the requests.
    pub async fn serve_canned(
        key: &str,
        outputs: Vec<String>,
    ) -> std::io::Result<(SocketAddr, Arc<Mutex<Seen>>)> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let seen = Arc::new(Mutex::new(Seen::default()));
        let log = seen.clone();
        let key = key.to_string();
        tokio::spawn(async move {
            let mut turn = 0usize;
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                // Read the header, then Content-Length bytes of body.
                let (head, mut body) = loop {
                    let Ok(n) = socket.read(&mut chunk).await else {
                        break (String::new(), Vec::new());
                    };
                    if n == 0 {
                        break (String::new(), Vec::new());
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break (
                            String::from_utf8_lossy(&buf[..i]).to_string(),
                            buf[i + 4..].to_vec(),
                        );
                    }
                };
                let length = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse::<usize>().ok())?
                    })
                    .unwrap_or(0);
                while body.len() < length {
                    match socket.read(&mut chunk).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => body.extend_from_slice(&chunk[..n]),
                    }
                }
                let authorised = head.lines().any(|l| {
                    l.split_once(':').is_some_and(|(k, v)| {
                        k.eq_ignore_ascii_case("x-gateway-key") && v.trim() == key
                    })
                });
                let (status, answer) = if authorised {
                    let output = outputs
                        .get(turn)
                        .or(outputs.last())
                        .cloned()
                        .unwrap_or_default();
                    turn += 1;
                    if let Ok(mut s) = log.lock() {
                        s.bodies.push(String::from_utf8_lossy(&body).to_string());
                    }
                    (
                        "200 OK",
                        serde_json::json!({"output": output, "tokens": {"in": 12, "out": 3}})
                            .to_string(),
                    )
                } else {
                    ("401 Unauthorized", r#"{"error":"bad key"}"#.to_string())
                };
                let response = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                    answer.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
                let _ = socket.shutdown().await;
            }
        });
        Ok((addr, seen))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(addr: std::net::SocketAddr, key: &str) -> GatewayModel {
        GatewayModel::new(GatewayConfig {
            address: addr.to_string(),
            model: "gateway-test".into(),
            api_key: key.into(),
            timeout: Duration::from_secs(10),
        })
    }

    #[tokio::test]
    async fn talks_to_the_gateway_with_its_auth_header() {
        // Canned gateway outputs written for this test.
        let (addr, seen) = testing::serve_canned("k-123", vec!["first".into(), "second".into()])
            .await
            .unwrap();
        let m = model(addr, "k-123");
        let out = m
            .complete(CompletionRequest::new(vec![Message::user(
                "why is db slow?",
            )]))
            .await
            .unwrap();
        assert_eq!(out.text(), "first");
        assert_eq!(out.usage.prompt_tokens, 12);
        assert!(!out.usage.estimated);
        let out = m
            .complete(CompletionRequest::new(vec![Message::user("and now?")]))
            .await
            .unwrap();
        assert_eq!(out.text(), "second");
        let bodies = seen.lock().unwrap().bodies.clone();
        assert_eq!(bodies.len(), 2);
        let first: serde_json::Value = serde_json::from_str(&bodies[0]).unwrap();
        assert_eq!(first["model"], "gateway-test");
        assert_eq!(first["messages"][0]["content"], "why is db slow?");
    }

    #[tokio::test]
    async fn maps_gateway_failures_onto_llm_errors() {
        let (addr, _) = testing::serve_canned("right", vec!["x".into()])
            .await
            .unwrap();
        let err = model(addr, "wrong")
            .complete(CompletionRequest::new(vec![Message::user("hi")]))
            .await
            .unwrap_err();
        assert!(matches!(err, LlmError::Permanent { .. }), "{err}");
        assert!(!err.is_retryable());
        // Nothing listens on a port we just released: a transient error, retryable.
        let free = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let err = model(free, "k")
            .complete(CompletionRequest::new(vec![Message::user("hi")]))
            .await
            .unwrap_err();
        assert!(err.is_retryable(), "{err}");
    }
}
