//! Per-client request rates: a token bucket per client address.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Instant;

/// Past this many tracked clients, the buckets that have refilled are forgotten (they hold
/// nothing a new bucket would not), so memory stays bounded under many addresses.
const MAX_TRACKED: usize = 65_536;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

/// Token buckets per client address: `rate` requests per second sustained, `burst` at once.
#[derive(Debug)]
pub struct RateLimiter {
    rate: f64,
    burst: f64,
    buckets: Mutex<HashMap<IpAddr, Bucket>>,
}

impl RateLimiter {
    /// A limiter of `rate` per second and `burst`.
    pub fn new(rate: f64, burst: u32) -> Self {
        RateLimiter {
            rate: rate.max(f64::MIN_POSITIVE),
            burst: f64::from(burst.max(1)),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one request from `client`'s bucket at `now`; `Err` with the seconds until one is
    /// available.
    pub fn take(&self, client: IpAddr, now: Instant) -> Result<(), u64> {
        let mut buckets = match self.buckets.lock() {
            Ok(b) => b,
            Err(poisoned) => poisoned.into_inner(),
        };
        if buckets.len() >= MAX_TRACKED && !buckets.contains_key(&client) {
            let (rate, burst) = (self.rate, self.burst);
            buckets.retain(|_, b| {
                b.tokens + now.saturating_duration_since(b.last).as_secs_f64() * rate < burst
            });
        }
        let bucket = buckets.entry(client).or_insert(Bucket {
            tokens: self.burst,
            last: now,
        });
        let refill = now.saturating_duration_since(bucket.last).as_secs_f64() * self.rate;
        bucket.tokens = (bucket.tokens + refill).min(self.burst);
        bucket.last = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(((1.0 - bucket.tokens) / self.rate).ceil().max(1.0) as u64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_client_gets_its_burst_then_its_rate_and_others_are_unaffected() {
        let limiter = RateLimiter::new(10.0, 3);
        let a: IpAddr = [127, 0, 0, 1].into();
        let b: IpAddr = [127, 0, 0, 2].into();
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(limiter.take(a, t0), Ok(()));
        }
        assert_eq!(limiter.take(a, t0), Err(1));
        assert_eq!(limiter.take(b, t0), Ok(()));
        // A tenth of a second refills one request at 10 per second.
        assert_eq!(limiter.take(a, t0 + Duration::from_millis(100)), Ok(()));
        assert!(limiter.take(a, t0 + Duration::from_millis(100)).is_err());
    }
}
