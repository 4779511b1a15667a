//! The CLI's configuration file: `Config::parse` (the very source file `rca config check`
//! uses, included by path) must return a configuration or its problems for any text, never
//! panic, and a configuration it accepts must pass its own checks.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code, unreachable_pub)]
#[path = "../../rca-cli/src/config.rs"]
mod config;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(parsed) = config::Config::parse(&text) {
        let _ = parsed.check();
        let _ = parsed.redactor();
    }
});
