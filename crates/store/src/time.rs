//! Time at the store's edge: RFC 3339 text in UTC with microseconds, and microseconds since the Unix epoch.
//!
//! The text form has a fixed width (`2026-11-25T10:00:00.000000Z`), so text order is time order and SQL can
//! compare it directly. Only this module touches `chrono`; the public API speaks `std::time::SystemTime`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chrono::{DateTime, SecondsFormat, Utc};

use crate::error::StoreError;

/// `time` as fixed-width RFC 3339 UTC text with microseconds.
pub fn format_rfc3339(time: SystemTime) -> String {
    DateTime::<Utc>::from(time).to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// Parses RFC 3339 text (any offset) into a `SystemTime`, for command-line filters such as `--since`.
pub fn parse_rfc3339(text: &str) -> Result<SystemTime, StoreError> {
    DateTime::parse_from_rfc3339(text.trim())
        .map(|time| SystemTime::from(time.with_timezone(&Utc)))
        .map_err(|_| StoreError::Time(text.to_owned()))
}

/// An age such as `30s`, `10m`, `2h`, `1d` or `1w` (digits, then one unit), for filters that mean "since that long
/// ago"; `None` for anything else.
pub fn parse_age(text: &str) -> Option<Duration> {
    let split = text.find(|character: char| !character.is_ascii_digit())?;
    let (number, unit) = text.split_at(split);
    let count: u64 = number.parse().ok()?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 604_800,
        _ => return None,
    };
    count.checked_mul(seconds).map(Duration::from_secs)
}

/// Microseconds since the Unix epoch (negative before it), saturating far outside the representable range.
pub(crate) fn to_micros(time: SystemTime) -> i64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_micros()).unwrap_or(i64::MAX),
        Err(before) => i64::try_from(before.duration().as_micros()).map(|micros| -micros).unwrap_or(i64::MIN),
    }
}

/// The inverse of [`to_micros`].
pub(crate) fn from_micros(micros: i64) -> SystemTime {
    let magnitude = Duration::from_micros(micros.unsigned_abs());
    if micros >= 0 { UNIX_EPOCH + magnitude } else { UNIX_EPOCH - magnitude }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_fixed_width_utc_and_round_trips() {
        let time = UNIX_EPOCH + Duration::from_micros(1_764_064_800_000_001);
        let text = format_rfc3339(time);
        assert_eq!(text, "2025-11-25T10:00:00.000001Z");
        assert_eq!(parse_rfc3339(&text).ok(), Some(time));
        assert_eq!(parse_rfc3339("2025-11-25T11:00:00.000001+01:00").ok(), Some(time));
        assert!(parse_rfc3339("yesterday").is_err());
    }

    #[test]
    fn ages() {
        assert_eq!(parse_age("30s"), Some(Duration::from_secs(30)));
        assert_eq!(parse_age("2h"), Some(Duration::from_secs(7200)));
        assert_eq!(parse_age("1w"), Some(Duration::from_secs(604_800)));
        for bad in ["", "10", "m", "10y", "-5m", "1.5h", "99999999999999999999w"] {
            assert_eq!(parse_age(bad), None, "{bad}");
        }
    }

    #[test]
    fn micros_round_trip() {
        for micros in [0, 1, -1, 1_764_064_800_000_001] {
            assert_eq!(to_micros(from_micros(micros)), micros);
        }
    }
}
