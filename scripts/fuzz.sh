#!/usr/bin/env bash
# Coverage-guided fuzzing of the parsers for a bounded time: log formats and lines, telemetry
# files (logs, metrics, spans, gzip), incident manifests, model output (JSON repair, YAML), the
# CLI's configuration file.
#
#   bash scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default: 60 s, every target)
#   WRITE_DOCS=docs/benchmarks.md bash scripts/fuzz.sh 300    (also writes the `fuzz` section)
#
# Needs a nightly toolchain (libFuzzer's instrumentation); installs cargo-fuzz from crates.io
# if it is missing. Each target starts from the bad-input corpus (rca-cli/tests/corpus) and
# keeps what it learns in fuzz/corpus/<target>/; a crash is written to fuzz/artifacts/<target>/
# and makes the run exit non-zero once every target has run. Add a crashing input to
# rca-cli/tests/corpus (and a case to its cases.json) once fixed. Not part of the test suite:
# CI never builds fuzz/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
case "$seconds" in
  '' | *[!0-9]* | 0)
    echo "fuzz: SECONDS_PER_TARGET must be a whole number of seconds, at least 1" >&2
    exit 2
    ;;
esac
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(log_format telemetry_files incident_manifest model_output configuration)
fi
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  echo "fuzz: a nightly toolchain is needed (rustup toolchain install nightly)" >&2
  exit 1
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz: installing cargo-fuzz from crates.io" >&2
  cargo install --locked cargo-fuzz
fi
seed=fuzz/seed
mkdir -p "$seed" fuzz/logs
# Seeds: every regular file of the bad-input corpus (links are skipped: one leads to /dev/zero).
find rca-cli/tests/corpus -type f -size -1M -print0 | while IFS= read -r -d '' f; do
  cp "$f" "$seed/$(echo "$f" | tr '/' '_')"
done
# The instrumented build first, so the time limit is spent fuzzing.
cargo +nightly fuzz build

table="| target | seconds | inputs run | inputs/s | coverage (edges) | corpus | peak RSS | crashes |
|---|---:|---:|---:|---:|---:|---:|---:|"
failed=0
for t in "${targets[@]}"; do
  mkdir -p "fuzz/corpus/$t"
  log="fuzz/logs/$t.log"
  echo "fuzz: $t for $seconds s (log: $log)" >&2
  rc=0
  # -timeout: one input may take at most 10 s; -rss_limit_mb: memory is bounded too.
  cargo +nightly fuzz run "$t" "fuzz/corpus/$t" "$seed" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    >"$log" 2>&1 || rc=$?
  stat() { grep -o "stat::$1: *[0-9]*" "$log" | tail -1 | grep -o '[0-9]*$' || echo "-"; }
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo "-")
  corp=$(find "fuzz/corpus/$t" -type f | wc -l)
  crashes=$(find "fuzz/artifacts/$t" -type f 2>/dev/null | wc -l)
  if [ "$rc" -ne 0 ]; then
    failed=1
    echo "fuzz: $t ended with exit $rc; see $log and fuzz/artifacts/$t/" >&2
  fi
  table="$table
| \`$t\` | $seconds | $(stat number_of_executed_units) | $(stat average_exec_per_sec) | $cov | $corp | $(stat peak_rss_mb) MB | $crashes |"
done
echo "$table"
if [ -n "${WRITE_DOCS:-}" ]; then
  body="### Fuzzing the parsers

Measures how the parsers hold under generated input. No trivial baseline applies: the goal
is absolute (no crash), and every crash is a defect to fix. Coverage-guided (cargo-fuzz,
libFuzzer) from the bad-input corpus, on this machine; a crash is an input that panicked,
overflowed, ran past 10 s or past 2 GB.

$table"
  python3 benches/compare/write_section.py "$WRITE_DOCS" fuzz \
    "WRITE_DOCS=$WRITE_DOCS bash scripts/fuzz.sh $seconds" "$body"
  echo "fuzz: wrote section fuzz of $WRITE_DOCS" >&2
fi
exit "$failed"
