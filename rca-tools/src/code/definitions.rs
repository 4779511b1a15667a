//! Finding where a class, function or type is defined, by language-aware patterns.

use regex::Regex;

use rca_core::source::Definition;

/// A language whose definitions we can find.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Language {
    /// `.java`
    Java,
    /// `.kt`, `.kts`
    Kotlin,
    /// `.py`
    Python,
    /// `.go`
    Go,
    /// `.rs`
    Rust,
    /// `.ts`, `.tsx`, `.js`, `.jsx`, `.mjs`
    TypeScript,
}

impl Language {
    /// The language of a path, by extension.
    pub fn of_path(path: &str) -> Option<Language> {
        let ext = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase())?;
        Some(match ext.as_str() {
            "java" => Language::Java,
            "kt" | "kts" => Language::Kotlin,
            "py" => Language::Python,
            "go" => Language::Go,
            "rs" => Language::Rust,
            "ts" | "tsx" | "js" | "jsx" | "mjs" | "cjs" => Language::TypeScript,
            _ => return None,
        })
    }

    /// The pattern of a definition of `name` (already regex-escaped) in this language.
    fn pattern(self, name: &str) -> String {
        match self {
            Language::Java => format!(
                r"\b(?:class|interface|enum|record|@interface)\s+{name}\b|^\s*(?:public|protected|private|static|final|abstract|synchronized|\s)*[\w<>\[\],.? ]+\s+{name}\s*\([^;]*$"
            ),
            Language::Kotlin => format!(
                r"\b(?:class|interface|object|typealias|fun(?:\s*<[^>]*>)?(?:\s+[\w.]+\.)?)\s+{name}\b"
            ),
            Language::Python => format!(r"^\s*(?:async\s+)?(?:class|def)\s+{name}\b"),
            Language::Go => format!(r"^\s*type\s+{name}\b|^func\s+(?:\([^)]*\)\s*)?{name}\s*[\[(]"),
            Language::Rust => format!(
                r"\b(?:struct|enum|trait|type|fn|mod|union|const|static)\s+{name}\b|^\s*macro_rules!\s*{name}\b"
            ),
            Language::TypeScript => format!(
                r"\b(?:class|interface|type|enum|function\*?|namespace)\s+{name}\b|\b(?:const|let|var)\s+{name}\s*(?::[^=]+)?=\s*(?:async\s*)?(?:\(|function|class)"
            ),
        }
    }
}

/// The last segment of a qualified name (`com.acme.Foo`, `pkg::Foo`, `Foo#bar` -> `Foo` /
/// `bar`), which is what a definition names.
fn simple_name(symbol: &str) -> &str {
    let s = symbol.trim();
    let s = s
        .rsplit(['.', ':', '#', '/', '\\'])
        .find(|p| !p.is_empty())
        .unwrap_or(s);
    s.trim_end_matches("()")
}

/// Every definition of `symbol` in `text` (a file at `path`), with 1-based line numbers.
/// Files of unknown languages have none.
pub fn find_definitions(symbol: &str, path: &str, text: &str) -> Vec<Definition> {
    let name = simple_name(symbol);
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '$')
    {
        return Vec::new();
    }
    let Some(lang) = Language::of_path(path) else {
        return Vec::new();
    };
    let Ok(re) = Regex::new(&format!("(?m){}", lang.pattern(&regex::escape(name)))) else {
        return Vec::new();
    };
    // Only lines that contain the name can match: skip the rest cheaply.
    text.lines()
        .enumerate()
        .filter(|(_, line)| line.contains(name) && re.is_match(line))
        .filter(|(_, line)| !is_comment(line))
        .map(|(i, _)| Definition {
            symbol: name.to_string(),
            path: path.to_string(),
            line: i + 1,
        })
        .collect()
}

fn is_comment(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("//") || t.starts_with('#') || t.starts_with('*') || t.starts_with("/*")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(symbol: &str, path: &str, text: &str) -> Vec<usize> {
        find_definitions(symbol, path, text)
            .into_iter()
            .map(|d| d.line)
            .collect()
    }

    #[test]
    fn each_language() {
        let java = "package a;\n// class Checkpoint in a comment\npublic class Checkpoint extends Base {\n  void run() {}\n  Checkpoint make() { return null; }\n}\n";
        assert_eq!(
            lines("com.acme.Checkpoint", "src/Checkpoint.java", java),
            vec![3]
        );
        assert_eq!(lines("run", "A.java", java), vec![4]);
        let kt = "data class JobSpec(val id: String)\nfun <T> retry(block: () -> T): T = block()\nobject Registry\n";
        assert_eq!(lines("JobSpec", "a.kt", kt), vec![1]);
        assert_eq!(lines("retry", "a.kt", kt), vec![2]);
        assert_eq!(lines("Registry", "a.kt", kt), vec![3]);
        let py = "import os\nclass Loader:\n    async def fetch(self):\n        pass\n";
        assert_eq!(lines("Loader", "x.py", py), vec![2]);
        assert_eq!(lines("Loader.fetch", "x.py", py), vec![3]);
        let go = "type Scheduler struct{}\nfunc (s *Scheduler) Tick() error {\nfunc NewScheduler() *Scheduler {\n";
        assert_eq!(lines("Scheduler", "s.go", go), vec![1]);
        assert_eq!(lines("Tick", "s.go", go), vec![2]);
        assert_eq!(lines("NewScheduler", "s.go", go), vec![3]);
        let rs = "pub struct Miner;\nimpl Miner {\n    pub fn ingest(&mut self) {}\n}\n";
        assert_eq!(lines("Miner", "m.rs", rs), vec![1]);
        assert_eq!(lines("crate::Miner::ingest", "m.rs", rs), vec![3]);
        let ts = "export class Api {}\nexport const handler = async (e) => {}\ninterface Opts {}\n";
        assert_eq!(lines("Api", "a.ts", ts), vec![1]);
        assert_eq!(lines("handler", "a.ts", ts), vec![2]);
        assert_eq!(lines("Opts", "a.ts", ts), vec![3]);
    }

    #[test]
    fn odd_input_finds_nothing() {
        assert!(find_definitions("Foo", "README.md", "class Foo").is_empty());
        assert!(find_definitions("a b", "x.py", "class a b").is_empty());
        assert!(find_definitions("", "x.py", "class").is_empty());
        assert!(find_definitions("(.*)", "x.py", "class (.*)").is_empty());
    }
}
