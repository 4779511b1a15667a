//! Exponential backoff with jitter, shared by the HTTP client and the [`crate::Retry`] wrapper.

use std::time::Duration;

use rca_core::LlmError;
use serde::{Deserialize, Serialize};

/// How a failed call is retried: exponential backoff with jitter, `Retry-After` honoured up to a
/// cap. Only errors for which [`LlmError::is_retryable`] holds are retried.
///
/// Deserialisable, so a TOML or JSON config can hold it; every field has a default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 disables retrying).
    pub max_retries: u32,
    /// The delay before the first retry, in milliseconds.
    pub initial_backoff_ms: u64,
    /// The largest delay between two attempts (before jitter), in milliseconds.
    pub max_backoff_ms: u64,
    /// Growth factor of the delay per attempt.
    pub multiplier: f64,
    /// Fraction of each delay that is random, in `[0, 1]`: a delay `d` becomes a uniform draw
    /// from `[d * (1 - jitter), d]`.
    pub jitter: f64,
    /// The longest wait a server's `Retry-After` may impose, in milliseconds. When a server asks
    /// for longer, the call fails at once with [`LlmError::RateLimited`] (carrying the server's
    /// wait) instead of blocking the caller.
    pub max_retry_after_ms: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 4,
            initial_backoff_ms: 500,
            max_backoff_ms: 30_000,
            multiplier: 2.0,
            jitter: 0.5,
            max_retry_after_ms: 60_000,
        }
    }
}

/// What to do after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryDecision {
    /// Wait this long, then try again.
    RetryAfter(Duration),
    /// Give up and return the error.
    GiveUp,
}

impl RetryPolicy {
    /// A policy that never retries.
    pub fn none() -> Self {
        RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        }
    }

    /// The backoff before retry number `retry` (0-based), before jitter.
    pub fn base_delay(&self, retry: u32) -> Duration {
        let factor = self
            .multiplier
            .max(1.0)
            .powi(i32::try_from(retry).unwrap_or(i32::MAX));
        let ms = (self.initial_backoff_ms as f64 * factor).min(self.max_backoff_ms as f64);
        Duration::from_millis(if ms.is_finite() {
            ms as u64
        } else {
            self.max_backoff_ms
        })
    }

    /// The backoff before retry number `retry` with jitter applied (`unit` is a uniform draw
    /// from `[0, 1)`).
    pub fn jittered_delay(&self, retry: u32, unit: f64) -> Duration {
        let finite_unit = |x: f64| {
            if x.is_finite() {
                x.clamp(0.0, 1.0)
            } else {
                0.0
            }
        };
        let factor = 1.0 - finite_unit(self.jitter) * finite_unit(unit);
        // `factor` is in [0, 1] and the base delay is finite, so this cannot overflow.
        Duration::try_from_secs_f64(self.base_delay(retry).as_secs_f64() * factor)
            .unwrap_or(Duration::ZERO)
    }

    /// Decides whether to retry after `error`, given that `retries_done` retries already ran.
    pub fn decide(&self, error: &LlmError, retries_done: u32) -> RetryDecision {
        if !error.is_retryable() || retries_done >= self.max_retries {
            return RetryDecision::GiveUp;
        }
        let backoff = self.jittered_delay(retries_done, rand::random::<f64>());
        match error {
            LlmError::RateLimited {
                retry_after: Some(wait),
            } => {
                if *wait > Duration::from_millis(self.max_retry_after_ms) {
                    RetryDecision::GiveUp
                } else {
                    RetryDecision::RetryAfter(*wait)
                }
            }
            _ => RetryDecision::RetryAfter(backoff),
        }
    }
}

/// Runs `attempt` until it succeeds, fails with an error that is not retryable, or the policy
/// gives up; sleeps between attempts with [`tokio::time::sleep`] (instant under a paused test
/// clock). `on_retry` sees each error that is about to be retried and the delay chosen.
pub async fn retry_with<T, F, Fut>(
    policy: &RetryPolicy,
    mut attempt: F,
    mut on_retry: impl FnMut(&LlmError, Duration),
) -> Result<T, LlmError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, LlmError>>,
{
    let mut retries = 0u32;
    loop {
        match attempt().await {
            Ok(v) => return Ok(v),
            Err(e) => match policy.decide(&e, retries) {
                RetryDecision::GiveUp => return Err(e),
                RetryDecision::RetryAfter(delay) => {
                    on_retry(&e, delay);
                    tokio::time::sleep(delay).await;
                    retries += 1;
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_and_cap() {
        let p = RetryPolicy {
            initial_backoff_ms: 100,
            max_backoff_ms: 1000,
            multiplier: 2.0,
            jitter: 0.0,
            ..RetryPolicy::default()
        };
        let d: Vec<u64> = (0..6).map(|i| p.base_delay(i).as_millis() as u64).collect();
        assert_eq!(d, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(p.base_delay(u32::MAX), Duration::from_millis(1000));
    }

    #[test]
    fn jitter_stays_in_band() {
        let p = RetryPolicy {
            initial_backoff_ms: 1000,
            jitter: 0.5,
            ..RetryPolicy::default()
        };
        assert_eq!(p.jittered_delay(0, 0.0), Duration::from_millis(1000));
        assert_eq!(p.jittered_delay(0, 1.0), Duration::from_millis(500));
        for _ in 0..100 {
            let RetryDecision::RetryAfter(d) = p.decide(&LlmError::transient("x"), 0) else {
                panic!("transient errors are retried");
            };
            assert!(d >= Duration::from_millis(500) && d <= Duration::from_millis(1000));
        }
    }

    #[test]
    fn decides_by_error_kind_and_cap() {
        let p = RetryPolicy {
            max_retries: 2,
            max_retry_after_ms: 5_000,
            ..RetryPolicy::default()
        };
        let limited = |s| LlmError::RateLimited {
            retry_after: Some(Duration::from_secs(s)),
        };
        assert_eq!(
            p.decide(&limited(3), 0),
            RetryDecision::RetryAfter(Duration::from_secs(3))
        );
        assert_eq!(p.decide(&limited(6), 0), RetryDecision::GiveUp);
        assert_eq!(p.decide(&limited(1), 2), RetryDecision::GiveUp);
        assert_eq!(
            p.decide(
                &LlmError::ContextLength {
                    message: "x".into()
                },
                0
            ),
            RetryDecision::GiveUp
        );
        assert_eq!(
            p.decide(&LlmError::permanent("x"), 0),
            RetryDecision::GiveUp
        );
        assert!(matches!(
            p.decide(&LlmError::transient("x"), 1),
            RetryDecision::RetryAfter(_)
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn retry_with_counts_attempts() {
        let p = RetryPolicy {
            max_retries: 3,
            ..RetryPolicy::default()
        };
        let mut calls = 0;
        let mut retried = Vec::new();
        let out: Result<u32, LlmError> = retry_with(
            &p,
            || {
                calls += 1;
                let c = calls;
                async move {
                    if c < 3 {
                        Err(LlmError::transient("flaky"))
                    } else {
                        Ok(c)
                    }
                }
            },
            |e, _| retried.push(e.to_string()),
        )
        .await;
        assert_eq!(out.unwrap(), 3);
        assert_eq!(retried.len(), 2);
    }
}
