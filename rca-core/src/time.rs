//! Time in the vocabulary of incidents: millisecond timestamps (UTC) and half-open ranges.
//!
//! rca-core carries no date library: [`Timestamp`] is milliseconds since the Unix epoch, and it
//! formats and parses the RFC 3339 subset that incident manifests and reports use.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An instant, in milliseconds since 1970-01-01T00:00:00Z.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(transparent)]
pub struct Timestamp(pub i64);

impl Timestamp {
    /// From seconds since the epoch.
    pub fn from_secs(secs: i64) -> Self {
        Timestamp(secs.saturating_mul(1000))
    }

    /// From nanoseconds since the epoch (truncated to milliseconds).
    pub fn from_nanos(nanos: i64) -> Self {
        Timestamp(nanos.div_euclid(1_000_000))
    }

    /// Milliseconds since the epoch.
    pub fn millis(self) -> i64 {
        self.0
    }

    /// Whole seconds since the epoch (rounded down).
    pub fn secs(self) -> i64 {
        self.0.div_euclid(1000)
    }

    /// This instant moved by `millis` (negative moves back); saturates at the ends.
    pub fn offset_millis(self, millis: i64) -> Self {
        Timestamp(self.0.saturating_add(millis))
    }

    /// Builds a timestamp from a UTC civil date and time; `None` when a field is out of range.
    pub fn from_civil(
        year: i64,
        month: u32,
        day: u32,
        hour: u32,
        minute: u32,
        second: u32,
        millis: u32,
    ) -> Option<Self> {
        if !(1..=12).contains(&month)
            || day == 0
            || day > days_in_month(year, month)
            || hour > 23
            || minute > 59
            || second > 60
            || millis > 999
        {
            return None;
        }
        let days = days_from_civil(year, month, day);
        let secs =
            days * 86_400 + i64::from(hour) * 3600 + i64::from(minute) * 60 + i64::from(second);
        Some(Timestamp(secs * 1000 + i64::from(millis)))
    }

    /// The UTC civil fields `(year, month, day, hour, minute, second, millis)`.
    pub fn to_civil(self) -> (i64, u32, u32, u32, u32, u32, u32) {
        let millis = self.0.rem_euclid(1000) as u32;
        let secs = self.0.div_euclid(1000);
        let days = secs.div_euclid(86_400);
        let sod = secs.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        (
            y,
            m,
            d,
            (sod / 3600) as u32,
            ((sod % 3600) / 60) as u32,
            (sod % 60) as u32,
            millis,
        )
    }

    /// Parses `YYYY-MM-DD[T ]HH:MM:SS[.fff][Z|±HH:MM]` (no offset means UTC).
    pub fn parse_rfc3339(text: &str) -> Option<Self> {
        let t = text.trim();
        let b = t.as_bytes();
        if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || (b[10] != b'T' && b[10] != b' ') {
            return None;
        }
        let num = |s: &str| s.parse::<u32>().ok();
        let year: i64 = t.get(0..4)?.parse().ok()?;
        let month = num(t.get(5..7)?)?;
        let day = num(t.get(8..10)?)?;
        if b[13] != b':' || b[16] != b':' {
            return None;
        }
        let hour = num(t.get(11..13)?)?;
        let minute = num(t.get(14..16)?)?;
        let second = num(t.get(17..19)?)?;
        let mut rest = t.get(19..)?;
        let mut millis = 0u32;
        if let Some(frac) = rest.strip_prefix('.') {
            let digits: String = frac.chars().take_while(|c| c.is_ascii_digit()).collect();
            if digits.is_empty() {
                return None;
            }
            let mut ms = digits.chars().take(3).collect::<String>();
            while ms.len() < 3 {
                ms.push('0');
            }
            millis = ms.parse().ok()?;
            rest = frac.get(digits.len()..)?;
        }
        let offset_secs: i64 = match rest {
            "" | "Z" | "z" => 0,
            _ => {
                let sign = match rest.as_bytes()[0] {
                    b'+' => 1,
                    b'-' => -1,
                    _ => return None,
                };
                let off = &rest[1..];
                let (h, m) = if off.len() == 5 && off.as_bytes()[2] == b':' {
                    (num(&off[0..2])?, num(&off[3..5])?)
                } else if off.len() == 4 {
                    (num(&off[0..2])?, num(&off[2..4])?)
                } else {
                    return None;
                };
                sign * (i64::from(h) * 3600 + i64::from(m) * 60)
            }
        };
        let ts = Timestamp::from_civil(year, month, day, hour, minute, second, millis)?;
        Some(ts.offset_millis(-offset_secs * 1000))
    }
}

impl fmt::Display for Timestamp {
    /// RFC 3339 in UTC with milliseconds, e.g. `2023-01-29T10:15:00.000Z`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (y, mo, d, h, mi, s, ms) = self.to_civil();
        write!(f, "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}Z")
    }
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(year) => 29,
        2 => 28,
        _ => 0,
    }
}

// Howard Hinnant's days-from-civil algorithm (proleptic Gregorian calendar).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// A half-open time range `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct TimeRange {
    /// First instant included.
    pub start: Timestamp,
    /// First instant excluded.
    pub end: Timestamp,
}

impl TimeRange {
    /// A range from `start` (included) to `end` (excluded).
    pub fn new(start: Timestamp, end: Timestamp) -> Self {
        TimeRange { start, end }
    }

    /// Whether `t` lies in the range.
    pub fn contains(&self, t: Timestamp) -> bool {
        self.start <= t && t < self.end
    }

    /// Length in milliseconds (0 for an empty or inverted range).
    pub fn duration_millis(&self) -> i64 {
        (self.end.0 - self.start.0).max(0)
    }

    /// The part of this range before `cutoff` (used to keep data after detection out).
    pub fn clamp_end(&self, cutoff: Timestamp) -> Self {
        TimeRange {
            start: self.start,
            end: self.end.min(cutoff),
        }
    }

    /// The overlap of two ranges (possibly empty).
    pub fn intersect(&self, other: &TimeRange) -> Self {
        TimeRange {
            start: self.start.max(other.start),
            end: self.end.min(other.end),
        }
    }

    /// Whether the range holds no instant.
    pub fn is_empty(&self) -> bool {
        self.end <= self.start
    }
}

impl fmt::Display for TimeRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}, {})", self.start, self.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_round_trip() {
        let t = Timestamp::from_civil(2023, 1, 29, 10, 15, 30, 250).unwrap();
        assert_eq!(t.to_string(), "2023-01-29T10:15:30.250Z");
        assert_eq!(
            Timestamp::parse_rfc3339("2023-01-29T10:15:30.250Z"),
            Some(t)
        );
        assert_eq!(
            Timestamp::parse_rfc3339("2023-01-29 18:15:30.25+08:00"),
            Some(t)
        );
        assert_eq!(Timestamp(0).to_string(), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            Timestamp::from_civil(2024, 2, 29, 0, 0, 0, 0).map(|t| t.secs()),
            Some(1_709_164_800)
        );
    }

    #[test]
    fn rejects_bad_dates() {
        assert!(Timestamp::parse_rfc3339("2023-02-30T00:00:00Z").is_none());
        assert!(Timestamp::parse_rfc3339("not a date").is_none());
        assert!(Timestamp::parse_rfc3339("2023-01-29T10:15:30+0x:00").is_none());
        assert!(Timestamp::parse_rfc3339("2023-01-29T10:15:30.Z").is_none());
    }

    #[test]
    fn range_ops() {
        let r = TimeRange::new(Timestamp(10), Timestamp(20));
        assert!(r.contains(Timestamp(10)) && !r.contains(Timestamp(20)));
        assert_eq!(r.clamp_end(Timestamp(15)).end, Timestamp(15));
        assert!(
            r.intersect(&TimeRange::new(Timestamp(30), Timestamp(40)))
                .is_empty()
        );
    }
}
