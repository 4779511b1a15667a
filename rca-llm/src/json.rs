//! Getting JSON out of model output (RCAgent 3.3.1).
//!
//! Two layers:
//! - [`repair`]: a local, model-free repair of JSON-like text. It strips code fences and prose
//!   around the value, drops trailing commas, turns single-quoted strings into JSON strings,
//!   escapes raw control characters and stray quotes inside strings, quotes bare keys, reads
//!   Python literals, and closes truncated output where nothing has to be invented (only a
//!   string value may be cut short; a cut key, number or literal is refused). Every change is
//!   reported as a [`RepairKind`].
//! - [`JsonRegen`]: when repair fails, the model is asked to restate its output as YAML and
//!   then to regenerate JSON of the same structure, for up to `max_rounds` rounds. The YAML is
//!   also parsed locally as a fallback when the regenerated JSON is still broken.

use std::fmt;

use rca_core::LlmError;
use rca_core::llm::{ChatModel, CompletionRequest, Message, Usage};
use serde::{Deserialize, Serialize};

/// One kind of change [`repair`] made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RepairKind {
    /// The value was inside a Markdown code fence.
    CodeFence,
    /// Text before the value was dropped.
    LeadingProse,
    /// Text after the value was dropped.
    TrailingProse,
    /// A comma before `}` or `]` was dropped.
    TrailingComma,
    /// A comma between two members or elements was inserted.
    MissingComma,
    /// A single-quoted string was rewritten as a JSON string.
    SingleQuotes,
    /// A bare (unquoted) object key was quoted.
    UnquotedKey,
    /// A raw newline, tab or other control character inside a string was escaped.
    ControlCharInString,
    /// A double quote inside a string that did not end the string was escaped.
    UnescapedQuote,
    /// A backslash that began no valid escape was escaped.
    InvalidEscape,
    /// `True`, `False` or `None` was read as `true`, `false` or `null`.
    PythonLiteral,
    /// Output cut short was closed (an open string value and the open containers).
    Truncated,
}

impl fmt::Display for RepairKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            RepairKind::CodeFence => "code fence",
            RepairKind::LeadingProse => "leading prose",
            RepairKind::TrailingProse => "trailing prose",
            RepairKind::TrailingComma => "trailing comma",
            RepairKind::MissingComma => "missing comma",
            RepairKind::SingleQuotes => "single quotes",
            RepairKind::UnquotedKey => "unquoted key",
            RepairKind::ControlCharInString => "control character in string",
            RepairKind::UnescapedQuote => "unescaped quote",
            RepairKind::InvalidEscape => "invalid escape",
            RepairKind::PythonLiteral => "python literal",
            RepairKind::Truncated => "truncated output",
        };
        f.write_str(s)
    }
}

/// A value recovered from model output, with what had to be changed to get it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Repaired {
    /// The parsed value (an object or an array).
    pub value: serde_json::Value,
    /// The repairs applied, each kind once, in the order first applied (empty: the text was
    /// valid JSON as it stood, apart from surrounding whitespace).
    pub repairs: Vec<RepairKind>,
}

impl Repaired {
    /// Whether any repair was needed.
    pub fn was_repaired(&self) -> bool {
        !self.repairs.is_empty()
    }
}

/// Why no JSON could be recovered, sorted by what the caller should do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum JsonError {
    /// The text holds JSON-like content that local repair could not fix: ask the model again
    /// (see [`JsonRegen`]).
    #[error("unrepairable JSON: {message}")]
    Unrepairable {
        /// Why the best candidate failed.
        message: String,
        /// The text as received.
        raw: String,
    },
    /// The text holds no object or array at all.
    #[error("no JSON object or array in the output")]
    NoJson {
        /// The text as received.
        raw: String,
    },
    /// Regeneration ran out of rounds.
    #[error("JSON still invalid after {rounds} regeneration round(s): {message}")]
    RegenExhausted {
        /// Rounds tried.
        rounds: u32,
        /// Why the last attempt failed.
        message: String,
    },
    /// The model failed while regenerating; handle it as any model error.
    #[error(transparent)]
    Model(#[from] LlmError),
}

/// How many `{` / `[` start positions [`repair`] tries before giving up.
const MAX_STARTS: usize = 8;

/// Recovers a JSON object or array from model output, reporting every repair.
///
/// ```
/// use rca_llm::json::{repair, RepairKind};
/// let out = repair("Sure! ```json\n{'a': 1,}\n```").unwrap();
/// assert_eq!(out.value, serde_json::json!({"a": 1}));
/// assert!(out.repairs.contains(&RepairKind::SingleQuotes));
/// ```
pub fn repair(text: &str) -> Result<Repaired, JsonError> {
    let trimmed = text.trim();
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(trimmed)
        && (value.is_object() || value.is_array())
    {
        return Ok(Repaired {
            value,
            repairs: Vec::new(),
        });
    }
    let mut last_error: Option<String> = None;
    if let Some(inner) = fenced(text) {
        match repair_unfenced(inner) {
            Ok(mut r) => {
                r.repairs.insert(0, RepairKind::CodeFence);
                dedup(&mut r.repairs);
                return Ok(r);
            }
            Err(e) => last_error = Some(e),
        }
    }
    match repair_unfenced(text) {
        Ok(r) => Ok(r),
        Err(e) if e.is_empty() && last_error.is_none() => Err(JsonError::NoJson {
            raw: text.to_string(),
        }),
        Err(e) => Err(JsonError::Unrepairable {
            message: last_error.filter(|_| e.is_empty()).unwrap_or(e),
            raw: text.to_string(),
        }),
    }
}

/// Tries each plausible start position; `Err("")` when there is none.
fn repair_unfenced(text: &str) -> Result<Repaired, String> {
    let chars: Vec<char> = text.chars().collect();
    let first_non_ws = chars.iter().position(|c| !c.is_whitespace());
    let mut starts: Vec<usize> = chars
        .iter()
        .enumerate()
        .filter(|(_, c)| **c == '{')
        .map(|(i, _)| i)
        .take(MAX_STARTS)
        .collect();
    // Arrays are tried after objects: prose often holds brackets, and our turns are objects.
    starts.extend(
        chars
            .iter()
            .enumerate()
            .filter(|(_, c)| **c == '[')
            .map(|(i, _)| i)
            .take(MAX_STARTS / 2),
    );
    let mut first_error = String::new();
    for start in starts {
        let mut scanner = Scanner::new(&chars[start..]);
        match scanner.run() {
            Ok(out) => match serde_json::from_str::<serde_json::Value>(&out) {
                Ok(value) => {
                    let mut repairs = Vec::new();
                    if Some(start) != first_non_ws {
                        repairs.push(RepairKind::LeadingProse);
                    }
                    repairs.extend(scanner.repairs);
                    dedup(&mut repairs);
                    return Ok(Repaired { value, repairs });
                }
                Err(e) => {
                    if first_error.is_empty() {
                        first_error = e.to_string();
                    }
                }
            },
            Err(e) => {
                if first_error.is_empty() {
                    first_error = e;
                }
            }
        }
    }
    Err(first_error)
}

fn dedup(repairs: &mut Vec<RepairKind>) {
    let mut seen = Vec::new();
    repairs.retain(|r| {
        if seen.contains(r) {
            false
        } else {
            seen.push(*r);
            true
        }
    });
}

/// The contents of the first Markdown code fence (an unclosed fence runs to the end).
fn fenced(text: &str) -> Option<&str> {
    let open = text.find("```")?;
    let after = &text[open + 3..];
    // Skip the info string (`json`, `yaml`, ...) up to the end of the line.
    let body_start = after.find('\n').map(|i| i + 1).unwrap_or(after.len());
    let body = &after[body_start..];
    Some(match body.find("```") {
        Some(close) => &body[..close],
        None => body,
    })
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Container {
    Object,
    Array,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// A value (after `:` or after `,` in an array).
    Value,
    /// A value or `]` (just after `[`).
    ValueOrEnd,
    /// A key or `}` (just after `{`).
    KeyOrEnd,
    /// A key (after `,` in an object).
    Key,
    /// `:` after a key.
    Colon,
    /// `,` or the closing bracket.
    CommaOrEnd,
}

/// A lenient single-pass rewriter from JSON-like text to JSON text.
struct Scanner<'a> {
    chars: &'a [char],
    pos: usize,
    out: String,
    stack: Vec<Container>,
    expect: Expect,
    repairs: Vec<RepairKind>,
}

impl<'a> Scanner<'a> {
    fn new(chars: &'a [char]) -> Self {
        Scanner {
            chars,
            pos: 0,
            out: String::with_capacity(chars.len() + 8),
            stack: Vec::new(),
            expect: Expect::Value,
            repairs: Vec::new(),
        }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    /// The first non-whitespace character at or after `from`, with its index.
    fn next_significant(&self, from: usize) -> Option<(usize, char)> {
        self.chars
            .iter()
            .enumerate()
            .skip(from)
            .find(|(_, c)| !c.is_whitespace())
            .map(|(i, c)| (i, *c))
    }

    fn note(&mut self, kind: RepairKind) {
        self.repairs.push(kind);
    }

    fn run(&mut self) -> Result<String, String> {
        loop {
            let Some((i, c)) = self.next_significant(self.pos) else {
                return self.close_truncated();
            };
            self.pos = i;
            match self.expect {
                Expect::Value | Expect::ValueOrEnd => self.value(c)?,
                Expect::KeyOrEnd | Expect::Key => self.key(c)?,
                Expect::Colon => {
                    if c == ':' {
                        self.out.push(':');
                        self.pos += 1;
                        self.expect = Expect::Value;
                    } else {
                        return Err(format!("expected `:` after a key, found `{c}`"));
                    }
                }
                Expect::CommaOrEnd => self.comma_or_end(c)?,
            }
            if self.stack.is_empty() {
                // The top-level value is complete.
                if self.next_significant(self.pos).is_some() {
                    self.note(RepairKind::TrailingProse);
                }
                return Ok(std::mem::take(&mut self.out));
            }
        }
    }

    fn after_value(&mut self) {
        self.expect = Expect::CommaOrEnd;
    }

    fn value(&mut self, c: char) -> Result<(), String> {
        match c {
            '{' => {
                self.out.push('{');
                self.stack.push(Container::Object);
                self.pos += 1;
                self.expect = Expect::KeyOrEnd;
            }
            '[' => {
                self.out.push('[');
                self.stack.push(Container::Array);
                self.pos += 1;
                self.expect = Expect::ValueOrEnd;
            }
            ']' if self.stack.last() == Some(&Container::Array) => {
                if self.expect == Expect::Value {
                    self.drop_trailing_comma();
                }
                self.out.push(']');
                self.stack.pop();
                self.pos += 1;
                self.after_value();
            }
            '"' | '\'' if !self.stack.is_empty() => {
                self.string(c, false)?;
                self.after_value();
            }
            '-' | '0'..='9' if !self.stack.is_empty() => {
                let start = self.pos;
                while let Some(d) = self.peek() {
                    if d.is_ascii_digit() || matches!(d, '-' | '+' | '.' | 'e' | 'E') {
                        self.pos += 1;
                    } else {
                        break;
                    }
                }
                if self.pos >= self.chars.len() {
                    return Err("output ends inside a number".into());
                }
                self.out.extend(&self.chars[start..self.pos]);
                self.after_value();
            }
            c if c.is_alphabetic() && !self.stack.is_empty() => {
                let start = self.pos;
                while self.peek().is_some_and(|d| d.is_alphanumeric() || d == '_') {
                    self.pos += 1;
                }
                if self.pos >= self.chars.len() {
                    return Err("output ends inside a literal".into());
                }
                let word: String = self.chars[start..self.pos].iter().collect();
                let lit = match word.as_str() {
                    "true" | "false" | "null" => word.clone(),
                    "True" => "true".into(),
                    "False" => "false".into(),
                    "None" => "null".into(),
                    other => return Err(format!("unexpected bare word `{other}`")),
                };
                if lit != word {
                    self.note(RepairKind::PythonLiteral);
                }
                self.out.push_str(&lit);
                self.after_value();
            }
            other => return Err(format!("expected a value, found `{other}`")),
        }
        Ok(())
    }

    fn key(&mut self, c: char) -> Result<(), String> {
        match c {
            '}' => {
                if self.expect == Expect::Key {
                    self.drop_trailing_comma();
                }
                self.out.push('}');
                self.stack.pop();
                self.pos += 1;
                self.after_value();
            }
            '"' | '\'' => {
                self.string(c, true)?;
                self.expect = Expect::Colon;
            }
            c if c.is_alphabetic() || c == '_' => {
                let start = self.pos;
                while self
                    .peek()
                    .is_some_and(|d| d.is_alphanumeric() || d == '_' || d == '-')
                {
                    self.pos += 1;
                }
                if self.pos >= self.chars.len() {
                    return Err("output ends inside a key".into());
                }
                let word: String = self.chars[start..self.pos].iter().collect();
                self.note(RepairKind::UnquotedKey);
                self.out.push('"');
                self.out.push_str(&word);
                self.out.push('"');
                self.expect = Expect::Colon;
            }
            other => return Err(format!("expected a key, found `{other}`")),
        }
        Ok(())
    }

    fn comma_or_end(&mut self, c: char) -> Result<(), String> {
        let top = self.stack.last().copied();
        match (c, top) {
            (',', Some(Container::Object)) => {
                self.out.push(',');
                self.pos += 1;
                self.expect = Expect::Key;
            }
            (',', Some(Container::Array)) => {
                self.out.push(',');
                self.pos += 1;
                self.expect = Expect::Value;
            }
            ('}', Some(Container::Object)) | (']', Some(Container::Array)) => {
                self.out.push(c);
                self.stack.pop();
                self.pos += 1;
                self.after_value();
            }
            ('"', Some(Container::Object)) => {
                // `"a": 1 "b": 2` — a member without its comma.
                self.note(RepairKind::MissingComma);
                self.out.push(',');
                self.expect = Expect::Key;
            }
            ('"' | '{' | '[', Some(Container::Array)) => {
                self.note(RepairKind::MissingComma);
                self.out.push(',');
                self.expect = Expect::Value;
            }
            (other, _) => {
                return Err(format!(
                    "expected `,` or a closing bracket, found `{other}`"
                ));
            }
        }
        Ok(())
    }

    fn drop_trailing_comma(&mut self) {
        if self.out.ends_with(',') {
            self.out.pop();
            self.note(RepairKind::TrailingComma);
        }
    }

    /// Whether a quote at `self.pos` ends the string, judged by what follows it.
    fn quote_closes(&self, is_key: bool) -> bool {
        let Some((i, n)) = self.next_significant(self.pos + 1) else {
            return true;
        };
        if is_key {
            return n == ':';
        }
        match (self.stack.last(), n) {
            (Some(Container::Object), '}') | (Some(Container::Array), ']') => true,
            (Some(Container::Object), ',') => match self.next_significant(i + 1) {
                None => true,
                Some((j, m)) => matches!(m, '"' | '\'' | '}') || self.bare_key_at(j),
            },
            (Some(Container::Array), ',') => true,
            // A new member on the next line after a missing comma.
            (Some(Container::Object), '"') => self.chars[self.pos + 1..i].contains(&'\n'),
            _ => false,
        }
    }

    /// Whether a bare key followed by `:` starts at `at`.
    fn bare_key_at(&self, at: usize) -> bool {
        let mut i = at;
        while self
            .chars
            .get(i)
            .is_some_and(|d| d.is_alphanumeric() || *d == '_' || *d == '-')
        {
            i += 1;
        }
        i > at && matches!(self.next_significant(i), Some((_, ':')))
    }

    fn string(&mut self, quote: char, is_key: bool) -> Result<(), String> {
        if quote == '\'' {
            self.note(RepairKind::SingleQuotes);
        }
        self.out.push('"');
        self.pos += 1;
        let mut inner_quotes = false;
        loop {
            let Some(c) = self.peek() else {
                if is_key {
                    return Err("output ends inside a key".into());
                }
                if inner_quotes {
                    // A quote taken for part of the text may have ended the string: closing
                    // here could swallow keys and values into it.
                    return Err("output ends inside a string with unbalanced quotes".into());
                }
                self.note(RepairKind::Truncated);
                self.out.push('"');
                return Ok(());
            };
            match c {
                '\\' => {
                    let Some(next) = self.chars.get(self.pos + 1).copied() else {
                        self.pos += 1;
                        continue;
                    };
                    match next {
                        '"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't' => {
                            self.out.push('\\');
                            self.out.push(next);
                            self.pos += 2;
                        }
                        'u' if self
                            .chars
                            .get(self.pos + 2..self.pos + 6)
                            .is_some_and(|h| h.iter().all(|d| d.is_ascii_hexdigit())) =>
                        {
                            self.out.push_str("\\u");
                            self.out.extend(&self.chars[self.pos + 2..self.pos + 6]);
                            self.pos += 6;
                        }
                        '\'' => {
                            self.out.push('\'');
                            self.pos += 2;
                        }
                        _ => {
                            self.note(RepairKind::InvalidEscape);
                            self.out.push_str("\\\\");
                            self.pos += 1;
                        }
                    }
                }
                c if c == quote => {
                    if self.quote_closes(is_key) {
                        self.out.push('"');
                        self.pos += 1;
                        return Ok(());
                    }
                    inner_quotes = true;
                    self.note(RepairKind::UnescapedQuote);
                    self.out.push_str(if c == '"' { "\\\"" } else { "'" });
                    self.pos += 1;
                }
                '"' => {
                    // A double quote inside a single-quoted string.
                    self.out.push_str("\\\"");
                    self.pos += 1;
                }
                c if (c as u32) < 0x20 => {
                    self.note(RepairKind::ControlCharInString);
                    match c {
                        '\n' => self.out.push_str("\\n"),
                        '\r' => self.out.push_str("\\r"),
                        '\t' => self.out.push_str("\\t"),
                        other => self.out.push_str(&format!("\\u{:04x}", other as u32)),
                    }
                    self.pos += 1;
                }
                other => {
                    self.out.push(other);
                    self.pos += 1;
                }
            }
        }
    }

    /// End of input before the top-level value closed: close it if nothing must be invented.
    fn close_truncated(&mut self) -> Result<String, String> {
        if self.stack.is_empty() {
            return Err("no JSON value".into());
        }
        match self.expect {
            Expect::Colon => return Err("output ends after a key".into()),
            Expect::Value if self.out.ends_with(':') => {
                return Err("output ends before a member's value".into());
            }
            Expect::Value | Expect::Key => {
                if self.out.ends_with(',') {
                    self.out.pop();
                }
            }
            Expect::ValueOrEnd | Expect::KeyOrEnd | Expect::CommaOrEnd => {}
        }
        self.note(RepairKind::Truncated);
        while let Some(c) = self.stack.pop() {
            self.out.push(match c {
                Container::Object => '}',
                Container::Array => ']',
            });
        }
        Ok(std::mem::take(&mut self.out))
    }
}

/// Replaces the characters that would confuse a model writing JSON about this text (quotes,
/// backslashes, braces, brackets and control characters other than newline and tab) by
/// harmless look-alikes, so an observation placed in a prompt cannot lead the model into
/// unbalanced JSON (RCAgent's prompt sanitising).
pub fn sanitize_for_prompt(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '"' => '\'',
            '\\' => '/',
            '{' => '(',
            '}' => ')',
            '[' => '(',
            ']' => ')',
            '\n' | '\t' => c,
            c if c.is_control() => ' ',
            c => c,
        })
        .collect()
}

/// The result of [`JsonRegen::recover`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Regenerated {
    /// The recovered value.
    pub value: serde_json::Value,
    /// Regeneration rounds used (each round is a YAML restatement and a JSON regeneration).
    pub rounds: u32,
    /// Local repairs applied to the regenerated text.
    pub repairs: Vec<RepairKind>,
    /// Whether the value came from parsing the model's YAML locally because its regenerated
    /// JSON was still broken.
    pub from_yaml: bool,
    /// Tokens spent on regeneration.
    pub usage: Usage,
}

/// Asks the model to restate broken output as YAML and to regenerate JSON of the same
/// structure from it (RCAgent's JsonRegen), for up to `max_rounds` rounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JsonRegen {
    /// Rounds before giving up.
    pub max_rounds: u32,
    /// Sampling temperature of the regeneration calls (`None`: the server's default).
    pub temperature: Option<f32>,
    /// Apply local [`repair`] to the regenerated JSON and fall back to parsing the YAML
    /// locally; `false` accepts only JSON that parses as it stands (for ablations).
    pub lenient: bool,
    /// Token limit of each regeneration call (`None`: the backend's default).
    #[serde(default = "default_regen_tokens")]
    pub max_tokens: Option<u32>,
}

fn default_regen_tokens() -> Option<u32> {
    Some(512)
}

impl Default for JsonRegen {
    fn default() -> Self {
        JsonRegen {
            max_rounds: 2,
            temperature: Some(0.0),
            lenient: true,
            max_tokens: default_regen_tokens(),
        }
    }
}

/// The system message of every regeneration request (so wrappers and tests can recognise them).
pub const REGEN_SYSTEM: &str = "You convert data between formats. Keep every field and every value; \
     add nothing and drop nothing. Answer with the converted data only.";

impl JsonRegen {
    /// Regenerates JSON from `broken` output. `shape` optionally describes the expected
    /// structure (for example `{"thought": ..., "action": {"name": ..., "args": {...}}}`).
    pub async fn recover(
        &self,
        model: &dyn ChatModel,
        broken: &str,
        shape: Option<&str>,
    ) -> Result<Regenerated, JsonError> {
        let mut usage = Usage::default();
        let mut last = String::from("no rounds allowed");
        for round in 1..=self.max_rounds {
            let mut messages = vec![
                Message::system(REGEN_SYSTEM),
                Message::user(format!(
                    "Restate the following content as YAML. Keep its structure and every \
                     value.\n\n{broken}"
                )),
            ];
            let yaml_resp = model.complete(self.request(messages.clone())).await?;
            usage.add(&yaml_resp.usage);
            let yaml = yaml_resp.text().to_string();
            messages.push(Message::assistant(yaml.clone()));
            let shape_hint = shape
                .map(|s| format!(" The JSON must have this shape: {s}."))
                .unwrap_or_default();
            messages.push(Message::user(format!(
                "Now regenerate the same content as one JSON object of the same structure. \
                 Escape quotes and newlines inside strings.{shape_hint} Answer with JSON only."
            )));
            let json_resp = model.complete(self.request(messages).json()).await?;
            usage.add(&json_resp.usage);
            match self.parse(json_resp.text()) {
                Ok(r) => {
                    return Ok(Regenerated {
                        value: r.value,
                        rounds: round,
                        repairs: r.repairs,
                        from_yaml: false,
                        usage,
                    });
                }
                Err(e) => last = e.to_string(),
            }
            if let Some(value) = parse_yaml(&yaml).filter(|_| self.lenient) {
                return Ok(Regenerated {
                    value,
                    rounds: round,
                    repairs: Vec::new(),
                    from_yaml: true,
                    usage,
                });
            }
        }
        Err(JsonError::RegenExhausted {
            rounds: self.max_rounds,
            message: last,
        })
    }

    fn parse(&self, text: &str) -> Result<Repaired, JsonError> {
        if self.lenient {
            return repair(text);
        }
        match serde_json::from_str::<serde_json::Value>(text.trim()) {
            Ok(value) if value.is_object() || value.is_array() => Ok(Repaired {
                value,
                repairs: Vec::new(),
            }),
            Ok(_) => Err(JsonError::NoJson { raw: text.into() }),
            Err(e) => Err(JsonError::Unrepairable {
                message: e.to_string(),
                raw: text.into(),
            }),
        }
    }

    fn request(&self, messages: Vec<Message>) -> CompletionRequest {
        let mut req = CompletionRequest::new(messages);
        req.temperature = self.temperature;
        req.max_tokens = self.max_tokens;
        req
    }
}

/// Parses YAML (optionally inside a code fence) into JSON; `Some` only for a mapping or a
/// sequence, so a plain sentence that happens to be valid YAML is not taken for data.
pub fn parse_yaml(text: &str) -> Option<serde_json::Value> {
    let body = fenced(text).unwrap_or(text);
    let value: serde_json::Value = serde_norway::from_str(body).ok()?;
    (value.is_object() || value.is_array()).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scripted::ScriptedModel;
    use proptest::prelude::*;
    use serde_json::json;

    fn ok(text: &str) -> Repaired {
        repair(text).unwrap_or_else(|e| panic!("repair failed for {text:?}: {e}"))
    }

    #[test]
    fn valid_json_needs_no_repair() {
        let r = ok(r#"  {"a": [1, 2, {"b": null}], "c": "x\ny"}  "#);
        assert_eq!(r.value, json!({"a": [1, 2, {"b": null}], "c": "x\ny"}));
        assert!(!r.was_repaired());
    }

    #[test]
    fn strips_code_fences_and_prose() {
        let r = ok("Here is my answer:\n```json\n{\"a\": 1}\n```\nHope it helps.");
        assert_eq!(r.value, json!({"a": 1}));
        assert_eq!(r.repairs, vec![RepairKind::CodeFence]);
        let r = ok("I think {\"a\": 1} is right. Done.");
        assert_eq!(r.value, json!({"a": 1}));
        assert_eq!(
            r.repairs,
            vec![RepairKind::LeadingProse, RepairKind::TrailingProse]
        );
    }

    #[test]
    fn skips_braces_in_prose() {
        let r = ok("Use {braces} wisely. {\"a\": true}");
        assert_eq!(r.value, json!({"a": true}));
    }

    #[test]
    fn trailing_commas_and_single_quotes() {
        let r = ok("{'a': 'it\\'s', 'b': [1, 2,],}");
        assert_eq!(r.value, json!({"a": "it's", "b": [1, 2]}));
        assert!(r.repairs.contains(&RepairKind::TrailingComma));
        assert!(r.repairs.contains(&RepairKind::SingleQuotes));
        let r = ok("{'say': 'he said \"hi\"'}");
        assert_eq!(r.value, json!({"say": "he said \"hi\""}));
    }

    #[test]
    fn newlines_and_quotes_inside_strings() {
        let r = ok("{\"thought\": \"line one\nline two\", \"n\": 1}");
        assert_eq!(r.value["thought"], "line one\nline two");
        assert_eq!(r.repairs, vec![RepairKind::ControlCharInString]);
        let r = ok(r#"{"thought": "the log says "disk full", then stops", "n": 1}"#);
        assert_eq!(
            r.value["thought"],
            r#"the log says "disk full", then stops"#
        );
        assert_eq!(r.value["n"], 1);
        assert!(r.repairs.contains(&RepairKind::UnescapedQuote));
        let r = ok(r#"{"a": "path C:\temp\x", "b": "\u00e9"}"#);
        assert_eq!(r.value["a"], "path C:\temp\\x");
        assert_eq!(r.value["b"], "é");
    }

    #[test]
    fn bare_keys_python_literals_missing_commas() {
        let r = ok("{thought: 'x', done: True, err: None}");
        assert_eq!(r.value, json!({"thought": "x", "done": true, "err": null}));
        let r = ok("{\"a\": 1\n \"b\": 2}");
        assert_eq!(r.value, json!({"a": 1, "b": 2}));
        assert!(r.repairs.contains(&RepairKind::MissingComma));
    }

    #[test]
    fn truncation_closed_only_when_safe() {
        let r =
            ok(r#"{"thought": "look at the logs", "action": {"name": "logs", "args": {"q": "err"#);
        assert_eq!(r.value["action"]["args"]["q"], "err");
        assert!(r.repairs.contains(&RepairKind::Truncated));
        let r = ok(r#"{"a": [1, 2,"#);
        assert_eq!(r.value, json!({"a": [1, 2]}));
        for unsafe_cut in [
            r#"{"a": "#,
            r#"{"a""#,
            r#"{"ab"#,
            r#"{"a": 12"#,
            r#"{"a": tr"#,
        ] {
            assert!(
                matches!(repair(unsafe_cut), Err(JsonError::Unrepairable { .. })),
                "{unsafe_cut:?} must not be closed"
            );
        }
    }

    #[test]
    fn no_json_is_reported() {
        assert!(matches!(
            repair("I cannot answer that."),
            Err(JsonError::NoJson { .. })
        ));
        assert!(matches!(repair(""), Err(JsonError::NoJson { .. })));
        assert!(matches!(
            repair("{ this is : not json"),
            Err(JsonError::Unrepairable { .. })
        ));
    }

    #[test]
    fn sanitize_removes_json_sensitive_characters() {
        let s = sanitize_for_prompt("{\"k\": [\"v\\n\"]}\u{7}\nnext");
        assert!(!s.contains(['"', '\\', '{', '}', '[', ']', '\u{7}']));
        assert!(s.contains('\n'));
    }

    #[test]
    fn yaml_fallback_parses_mappings_only() {
        assert_eq!(
            parse_yaml("```yaml\na: 1\nb:\n  - x\n```"),
            Some(json!({"a": 1, "b": ["x"]}))
        );
        assert_eq!(parse_yaml("just a sentence"), None);
    }

    #[tokio::test]
    async fn regen_restates_as_yaml_then_json() {
        let model = ScriptedModel::from_texts(
            "scripted-regen-two-rounds",
            [
                "thought: check logs\naction:\n  name: logs",
                "{{{ still broken",
                "thought: check logs\naction: [unclosed",
                "{\"thought\": \"check logs\", \"action\": {\"name\": \"logs\", \"args\": {}}}",
            ],
        );
        let r = JsonRegen {
            max_rounds: 3,
            ..JsonRegen::default()
        };
        // Round 1: the JSON is broken, but the YAML parses locally.
        let out = r.recover(&model, "{thought: check", None).await.unwrap();
        assert_eq!(out.rounds, 1);
        assert!(out.from_yaml);
        assert_eq!(out.value["action"]["name"], "logs");
        // Round 2 of a second call: the YAML is broken, the regenerated JSON is fine.
        let model2 = ScriptedModel::from_texts(
            "scripted-regen-second-round",
            [
                "not: [yaml",
                "nope",
                "thought: x",
                "{\"thought\": \"x\", \"action\": {\"name\": \"logs\", \"args\": {}}}",
            ],
        );
        let out = r.recover(&model2, "broken", Some("{...}")).await.unwrap();
        assert_eq!(out.rounds, 2);
        assert!(!out.from_yaml);
        let reqs = model2.requests();
        assert_eq!(reqs.len(), 4);
        assert!(reqs[0].messages[1].content.contains("YAML"));
        assert!(reqs[1].messages.last().unwrap().content.contains("{...}"));
        assert!(out.usage.total() > 0);
        assert_eq!(model.remaining(), 2);
    }

    #[tokio::test]
    async fn regen_gives_up_after_max_rounds() {
        let model =
            ScriptedModel::from_texts("scripted-regen-exhausted", ["a: [", "x", "b: [", "y"]);
        let r = JsonRegen {
            max_rounds: 2,
            temperature: None,
            lenient: true,
            max_tokens: None,
        };
        let err = r.recover(&model, "x", None).await.unwrap_err();
        assert!(matches!(err, JsonError::RegenExhausted { rounds: 2, .. }));
        // Strict regeneration refuses fenced JSON and does not read the YAML.
        let strict = JsonRegen {
            max_rounds: 1,
            temperature: None,
            lenient: false,
            max_tokens: None,
        };
        let fenced_model = ScriptedModel::from_texts(
            "scripted-regen-strict",
            ["a: 1", "```json\n{\"a\": 1}\n```"],
        );
        assert!(strict.recover(&fenced_model, "x", None).await.is_err());
        let empty = ScriptedModel::from_texts("scripted-regen-model-error", Vec::<String>::new());
        assert!(matches!(
            r.recover(&empty, "x", None).await,
            Err(JsonError::Model(_))
        ));
    }

    fn arb_json() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::Bool),
            any::<i32>().prop_map(|n| json!(n)),
            "[ -~\\n\"'\\\\]{0,12}".prop_map(serde_json::Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
                prop::collection::btree_map("[a-z]{1,5}", inner, 0..4)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,200}") {
            let _ = repair(&s);
            let _ = sanitize_for_prompt(&s);
            let _ = parse_yaml(&s);
        }

        #[test]
        fn never_panics_on_json_like(s in "[{}\\[\\]\"',:a-z0-9 \\n\\\\`]{0,80}") {
            let _ = repair(&s);
        }

        #[test]
        fn valid_objects_round_trip(v in arb_json()) {
            let obj = json!({"v": v});
            let text = serde_json::to_string_pretty(&obj).unwrap();
            let r = repair(&text).unwrap();
            prop_assert!(!r.was_repaired());
            prop_assert_eq!(r.value, obj.clone());
            // Wrapped in prose and a fence, the value is still recovered.
            let r = repair(&format!("Answer:\n```json\n{text}\n```\n")).unwrap();
            prop_assert_eq!(r.value, obj);
        }
    }
}
