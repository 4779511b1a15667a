//! Server-sent events: splits a byte stream into the `data` payloads of its events.

/// Incremental SSE decoder. Feed it bytes as they arrive; it returns the `data` of each
/// complete event (multi-line data joined with `\n`). Comments, `event:`, `id:` and `retry:`
/// fields are ignored.
#[derive(Debug, Default)]
pub struct SseDecoder {
    line: Vec<u8>,
    data: Vec<String>,
    has_data: bool,
}

impl SseDecoder {
    /// A fresh decoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Consumes `bytes`; returns the events they complete.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut events = Vec::new();
        for &b in bytes {
            if b == b'\n' {
                let mut line = std::mem::take(&mut self.line);
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                if let Some(event) = self.line_done(&line) {
                    events.push(event);
                }
            } else {
                self.line.push(b);
            }
        }
        events
    }

    /// Ends the input: returns the last event when the stream stopped without a blank line.
    pub fn finish(&mut self) -> Option<String> {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            if let Some(e) = self.line_done(&line) {
                return Some(e);
            }
        }
        self.dispatch()
    }

    fn line_done(&mut self, line: &[u8]) -> Option<String> {
        if line.is_empty() {
            return self.dispatch();
        }
        let text = String::from_utf8_lossy(line);
        if let Some(rest) = text.strip_prefix("data")
            && (rest.is_empty() || rest.starts_with(':'))
        {
            let value = rest.strip_prefix(':').unwrap_or("");
            let value = value.strip_prefix(' ').unwrap_or(value);
            self.data.push(value.to_string());
            self.has_data = true;
        }
        None
    }

    fn dispatch(&mut self) -> Option<String> {
        if !self.has_data {
            return None;
        }
        self.has_data = false;
        Some(std::mem::take(&mut self.data).join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_events_across_chunk_boundaries() {
        let mut d = SseDecoder::new();
        let mut out = d.push(b": keep-alive\n\ndata: {\"a\"");
        assert!(out.is_empty());
        out.extend(d.push(b":1}\r\n\r\nevent: x\ndata: one\ndata:two\n\ndata: [DONE]"));
        assert_eq!(out, ["{\"a\":1}", "one\ntwo"]);
        assert_eq!(d.finish().as_deref(), Some("[DONE]"));
        assert_eq!(d.finish(), None);
    }
}
