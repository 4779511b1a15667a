//! What a model may answer: JSON repair and the YAML fallback must return a value or an
//! error for any text, and a repaired value must be valid JSON.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(repaired) = rca_llm::json::repair(&text) {
        let _ = repaired.was_repaired();
    }
    let _ = rca_llm::json::parse_yaml(&text);
    let _ = rca_llm::json::sanitize_for_prompt(&text);
});
