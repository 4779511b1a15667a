//! What the test suites of the workspace read from the environment, in one place so that
//! every test gives `RCA_REQUIRE_ALL` the same meaning.
//!
//! A test that needs something outside its crate (shared data, a server, a model file, a
//! Python package, a system tool) may skip when that thing is missing, but only when
//! [`require_all`] is false; CI sets the variable, so there a missing dependency fails.

/// The environment variable that forbids skipping: set to anything but empty or `0`.
pub const REQUIRE_ALL_VAR: &str = "RCA_REQUIRE_ALL";

/// Whether tests must fail instead of skipping when something outside their crate is
/// missing: `RCA_REQUIRE_ALL` is set to a value other than empty or `0`.
pub fn require_all() -> bool {
    require_all_from(std::env::var_os(REQUIRE_ALL_VAR).as_deref())
}

/// [`require_all`] for a given value of the variable (`None`: unset).
pub fn require_all_from(value: Option<&std::ffi::OsStr>) -> bool {
    value.is_some_and(|v| !v.is_empty() && v != "0")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn set_means_anything_but_empty_or_zero() {
        assert!(!require_all_from(None));
        assert!(!require_all_from(Some(OsStr::new(""))));
        assert!(!require_all_from(Some(OsStr::new("0"))));
        assert!(require_all_from(Some(OsStr::new("1"))));
        assert!(require_all_from(Some(OsStr::new("yes"))));
    }
}
