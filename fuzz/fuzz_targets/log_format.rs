//! Log-format patterns and the lines they parse: `LogFormat::parse` must refuse or accept any
//! pattern without panicking, and a parsed format must take any line.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rca_tools::logs::{LogFormat, read_lines};

fuzz_target!(|data: &[u8]| {
    // The first line is the pattern, the rest the log.
    let split = data.iter().position(|&b| b == b'\n').unwrap_or(data.len());
    let pattern = String::from_utf8_lossy(&data[..split]);
    let (lines, _) = read_lines(data.get(split + 1..).unwrap_or_default(), 4096);
    if let Ok(format) = LogFormat::parse(&pattern) {
        for line in &lines {
            let _ = format.parse_line(line);
        }
    }
});
