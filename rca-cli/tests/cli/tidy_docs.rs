//! Tidy checks of the documentation: every relative Markdown link in `docs/**/*.md` and
//! `README.md` resolves to a file, `docs/ARCHITECTURE.md` links every area note of
//! `docs/arch/`, and its crate map names every top-level module of every workspace member.
//!
//! Convention of the crate map: under "## Crate map", each workspace member has one list entry
//! that starts with the member's path in backticks (`` - `rca-tools`: ... ``,
//! `` - `examples/diagnosis-service`: ... ``; continuation lines indented) and names each
//! module declared in the member's `src/lib.rs` (or `src/main.rs` without a library) as
//! `` `name` ``.

use std::path::{Path, PathBuf};

use regex::Regex;

/// Every `.md` file under `dir`, recursively, in a fixed order.
fn markdown_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// `text` with fenced code blocks and inline code spans replaced by spaces (newlines kept, so
/// byte offsets and line numbers stay those of the original).
fn without_code(text: &str) -> String {
    // Fenced blocks, line by line.
    let mut out = String::with_capacity(text.len());
    let mut fence: Option<String> = None;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let marker: String = trimmed
            .chars()
            .take_while(|&c| c == '`' || c == '~')
            .collect();
        let opens = marker.len() >= 3 && marker.chars().all(|c| c == marker.as_bytes()[0] as char);
        let blank = match &fence {
            Some(open) => {
                if opens
                    && marker.starts_with(open.as_str())
                    && trimmed[marker.len()..].trim().is_empty()
                {
                    fence = None;
                }
                true
            }
            None if opens => {
                fence = Some(marker);
                true
            }
            None => false,
        };
        if blank {
            out.extend(line.chars().map(|c| if c == '\n' { '\n' } else { ' ' }));
        } else {
            out.push_str(line);
        }
    }
    // Inline code spans: a run of n backticks up to the next run of exactly n.
    let bytes = out.as_bytes();
    let mut keep = vec![true; bytes.len()];
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'`' {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && bytes[i] == b'`' {
            i += 1;
        }
        let n = i - start;
        let mut j = i;
        let mut close = None;
        while j < bytes.len() {
            if bytes[j] == b'`' {
                let run = j;
                while j < bytes.len() && bytes[j] == b'`' {
                    j += 1;
                }
                if j - run == n {
                    close = Some(j);
                    break;
                }
            } else {
                j += 1;
            }
        }
        if let Some(end) = close {
            for k in keep.iter_mut().take(end).skip(start) {
                *k = false;
            }
            i = end;
        }
    }
    out.char_indices()
        .map(|(at, c)| if keep[at] || c == '\n' { c } else { ' ' })
        .collect()
}

/// The relative link targets of a Markdown text, with their line numbers: `[text](target)`,
/// `![alt](target)` and `[text](target "title")`, outside code. Web, mail and pure-anchor
/// links are left out; an anchor or query after a path is cut off.
fn relative_links(text: &str) -> Vec<(usize, String)> {
    let link = Regex::new(r#"\[[^\]]*\]\(\s*<?([^()\s<>]+)>?(?:\s+"[^"]*")?\s*\)"#).unwrap();
    let plain = without_code(text);
    let mut links = Vec::new();
    for caps in link.captures_iter(&plain) {
        let target = caps.get(1).unwrap();
        let raw = target.as_str();
        if raw.starts_with('#')
            || raw.starts_with("http://")
            || raw.starts_with("https://")
            || raw.starts_with("mailto:")
        {
            continue;
        }
        let path = raw.split(['#', '?']).next().unwrap_or(raw);
        if path.is_empty() {
            continue;
        }
        let line = plain[..target.start()].matches('\n').count() + 1;
        links.push((line, path.to_string()));
    }
    links
}

#[test]
fn every_relative_link_in_the_docs_resolves() {
    let root = super::repo_root();
    let mut files = markdown_under(&root.join("docs"));
    files.push(root.join("README.md"));
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let dir = file.parent().unwrap();
        for (line, target) in relative_links(&text) {
            let resolved = match target.strip_prefix('/') {
                Some(from_root) => root.join(from_root),
                None => dir.join(&target),
            };
            checked += 1;
            if !resolved.exists() {
                let shown = file.strip_prefix(&root).unwrap_or(file);
                broken.push(format!("{}:{line}: {target}", shown.display()));
            }
        }
    }
    assert!(
        checked > 0,
        "no relative link found: the link pattern is broken"
    );
    assert!(
        broken.is_empty(),
        "links that resolve to no file:\n{}",
        broken.join("\n")
    );
}

#[test]
fn architecture_links_every_area_note() {
    let root = super::repo_root();
    let arch = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).unwrap();
    let linked: Vec<String> = relative_links(&arch).into_iter().map(|(_, t)| t).collect();
    for note in markdown_under(&root.join("docs/arch")) {
        let name = format!("arch/{}", note.file_name().unwrap().to_string_lossy());
        assert!(
            linked.iter().any(|t| t == &name),
            "docs/ARCHITECTURE.md must link the area note {name}"
        );
    }
}

/// The workspace members, as listed in the root `Cargo.toml`.
fn workspace_members(root: &Path) -> Vec<String> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let start = manifest
        .find("members")
        .expect("the root Cargo.toml lists members");
    let open = start + manifest[start..].find('[').unwrap();
    let close = open + manifest[open..].find(']').unwrap();
    let quoted = Regex::new(r#""([^"]+)""#).unwrap();
    let members: Vec<String> = manifest[open..close]
        .lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .flat_map(|l| {
            quoted
                .captures_iter(l)
                .map(|c| c[1].to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(!members.is_empty(), "no workspace members found");
    members
}

/// The file modules declared at the top of a crate root (`mod name;`, `pub mod name;`,
/// `pub(crate) mod name;`, with or without attributes such as `#[cfg(feature = "x")]`), except
/// test-only ones (`#[cfg(test)]`).
fn declared_modules(source: &str) -> Vec<String> {
    let decl = Regex::new(
        r"^\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\((?:crate|super)\))?\s+)?mod\s+([A-Za-z_][A-Za-z0-9_]*)\s*;",
    )
    .unwrap();
    let mut modules = Vec::new();
    let mut previous = "";
    for line in source.lines() {
        if let Some(caps) = decl.captures(line) {
            let test_only = line.contains("#[cfg(test)]") || previous.trim() == "#[cfg(test)]";
            if !test_only {
                modules.push(caps[1].to_string());
            }
        }
        if !line.trim().is_empty() {
            previous = line;
        }
    }
    modules
}

/// The crate map's entry of a member: its list item under "## Crate map" that starts with the
/// member's path in backticks, continuation lines included.
fn crate_map_entry(arch: &str, member: &str) -> Option<String> {
    let section = arch.split("\n## Crate map").nth(1)?;
    let section = section.split("\n## ").next().unwrap_or(section);
    let head = format!("- `{member}`");
    let mut lines = section.lines().skip_while(|l| !l.starts_with(&head));
    let first = lines.next()?;
    let mut entry = first.to_string();
    for line in lines {
        if line.trim().is_empty() || !line.starts_with(' ') {
            break;
        }
        entry.push('\n');
        entry.push_str(line);
    }
    Some(entry)
}

#[test]
fn the_crate_map_names_every_top_level_module() {
    let root = super::repo_root();
    let arch = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).unwrap();
    let mut missing = Vec::new();
    for member in workspace_members(&root) {
        let src = root.join(&member).join("src");
        let crate_root = if src.join("lib.rs").exists() {
            src.join("lib.rs")
        } else {
            src.join("main.rs")
        };
        let source = std::fs::read_to_string(&crate_root)
            .unwrap_or_else(|e| panic!("{}: {e}", crate_root.display()));
        let Some(entry) = crate_map_entry(&arch, &member) else {
            missing.push(format!(
                "{member}: no entry starting with \"- `{member}`\" under \"## Crate map\""
            ));
            continue;
        };
        for module in declared_modules(&source) {
            if !entry.contains(&format!("`{module}`")) {
                missing.push(format!("{member}: module `{module}` is not named"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/ARCHITECTURE.md's crate map is incomplete:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_link_and_module_readers_do_what_they_say() {
    let text = "See [a](x.md#part), ![i](img/p.png \"t\"), [web](https://e.org), [top](#here),\n\
                `[not](code.md)` and\n```\n[fenced](no.md)\n```\n[wrapped\ntext](y.md)\n";
    let links: Vec<String> = relative_links(text).into_iter().map(|(_, t)| t).collect();
    assert_eq!(links, ["x.md", "img/p.png", "y.md"]);
    let source = "pub mod a;\n#[cfg(feature = \"f\")]\npub mod b;\nmod c;\npub(crate) mod d;\n\
                  #[cfg(test)]\nmod tests;\nmod inline {\n}\n";
    assert_eq!(declared_modules(source), ["a", "b", "c", "d"]);
}
