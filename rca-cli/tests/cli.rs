//! End-to-end checks of the `rca` binary and tidy checks of the repository: the README's test
//! command is what CI runs, every library crate denies missing docs, no stub macros in library
//! code.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn rca() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rca"))
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn version_and_help() {
    let out = rca().arg("--version").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("rca "), "{text}");

    let out = rca().arg("--help").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("Usage"));
}

#[test]
fn unknown_subcommand_is_a_clear_error() {
    let out = rca().arg("no-such-command").output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-command"));
}

#[test]
fn ci_runs_the_readme_test_command() {
    let root = repo_root();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let ci = std::fs::read_to_string(root.join(".ci/run")).unwrap();
    assert!(
        readme.contains("scripts/test.sh"),
        "README must name scripts/test.sh"
    );
    assert!(
        ci.contains("bash scripts/test.sh"),
        ".ci/run must call scripts/test.sh"
    );
    assert!(ci.contains("RCA_REQUIRE_ALL=1"));
}

#[test]
fn library_crates_deny_missing_docs_and_have_no_stubs() {
    let root = repo_root();
    for krate in ["rca-core", "rca-llm", "rca-tools", "rca-agents", "rca-eval"] {
        let lib = std::fs::read_to_string(root.join(krate).join("src/lib.rs")).unwrap();
        assert!(
            lib.contains("#![deny(missing_docs)]"),
            "{krate} must deny missing docs"
        );
        let mut stack = vec![root.join(krate).join("src")];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    for banned in ["todo!(", "unimplemented!("] {
                        assert!(
                            !text.contains(banned),
                            "{} contains {banned}",
                            path.display()
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn architecture_doc_names_every_crate() {
    let root = repo_root();
    let arch = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).unwrap();
    for krate in [
        "rca-core",
        "rca-llm",
        "rca-tools",
        "rca-agents",
        "rca-eval",
        "rca-cli",
    ] {
        assert!(
            arch.contains(krate),
            "docs/ARCHITECTURE.md must describe {krate}"
        );
    }
}
