#!/usr/bin/env bash
# Peak memory of `rca logs segment` (RCAgent Algorithm 1) and `rca logs templates` on two
# 1M-line inputs: one template repeated (the worst case for a graph over lines) and the
# miner-speed benchmark input (loghub_speed_input.py). Segmentation runs chunk by chunk, so its
# memory should follow the chunk, the window and the templates, not the number of lines; the
# goal is under 200 MB for both inputs. Peak memory is the process's VmHWM (printed by the
# command on its `stats:` line) and, as a cross-check, GNU time's maximum resident set size.
#
#   benches/compare/segment_memory.sh            # uses <repo>/../shared
#   WRITE_DOCS=docs/benchmarks.md benches/compare/segment_memory.sh
#
# Environment: RCA_SHARED_DIR (default <repo root>/../shared), CARGO_TARGET_DIR (where the
# release build goes; default <repo>/target), LINES (default 1000000),
# PYTHON (default python3), WRITE_DOCS (a Markdown file: the result replaces its section
# `segment-memory`). Inputs are generated into benches/compare/.work (git-ignored).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SHARED="${RCA_SHARED_DIR:-$ROOT/../shared}"
SHARED="$(cd "$SHARED" && pwd)"
WORK="$ROOT/benches/compare/.work"
LINES="${LINES:-1000000}"
PYTHON="${PYTHON:-python3}"
mkdir -p "$WORK"

SAME="$WORK/one_template_${LINES}.txt"
if [[ ! -s "$SAME" ]]; then
  echo "== building $SAME" >&2
  "$PYTHON" - "$SAME" "$LINES" <<'PY'
import sys
path, n = sys.argv[1], int(sys.argv[2])
with open(path, "w") as f:
    for i in range(n):
        f.write("2024-01-01 12:00:00 INFO worker: heartbeat ok from pool main\n")
PY
fi
MIXED="$WORK/loghub_speed_${LINES}.txt"
if [[ ! -s "$MIXED" ]]; then
  echo "== building $MIXED" >&2
  "$PYTHON" "$SHARED/bench/loghub_speed_input.py" "$MIXED" "$LINES"
fi

echo "== building rca (release)" >&2
(cd "$ROOT" && cargo build --release -p rca-cli --quiet)
# The binary just built (CARGO_TARGET_DIR when set: a target directory of your own keeps
# builds from other checkouts that share the default one from replacing it mid-run).
RCA="${CARGO_TARGET_DIR:-$ROOT/target}/release/rca"

measure() { # label, command... -> one result line
  local label="$1"; shift
  local err
  err="$( { /usr/bin/time -f 'time_maxrss_kb=%M wall=%e' "$@" >/dev/null; } 2>&1 )"
  local stats peak rss wall
  stats="$(grep '^stats: ' <<<"$err" | tail -n 1 || true)"
  peak="$(sed -n 's/.*peak_rss_mib=\([^ ]*\).*/\1/p' <<<"$stats")"
  rss="$(sed -n 's/.*time_maxrss_kb=\([0-9]*\).*/\1/p' <<<"$err")"
  wall="$(sed -n 's/.*wall=\([0-9.]*\).*/\1/p' <<<"$err")"
  local extra
  extra="$(sed -n 's/.*\(blocks=[0-9]*\).*\(templates=[0-9]*\).*/\1 \2/p' <<<"$stats")"
  [[ -z "$extra" ]] && extra="$(sed -n 's/.*\(templates=[0-9]*\).*/\1/p' <<<"$stats")"
  printf '%-44s peak %8s MiB (VmHWM), %8.1f MiB (GNU time), %7ss; %s\n' \
    "$label" "${peak:-na}" "$(awk -v k="$rss" 'BEGIN{print k/1024}')" "$wall" "$extra"
}

RESULT="$(
  echo "input: $LINES lines each; $(nproc) CPUs"
  measure "segment, one template" "$RCA" logs segment "$SAME" --json
  measure "segment, loghub_speed_input.py" "$RCA" logs segment "$MIXED" --json
  measure "templates, one template" "$RCA" logs templates "$SAME" --json
  measure "templates, loghub_speed_input.py" "$RCA" logs templates "$MIXED" --json
)"
echo "$RESULT"

if [[ -n "${WRITE_DOCS:-}" ]]; then
  BODY="### Peak memory of segmentation and template mining on 1M lines

Measures the peak memory of both commands against the goal (under 200 MB). Baseline: the one-template input, the least state either command can hold, in the same table.

\`\`\`
$RESULT
\`\`\`

Segmentation (RCAgent Algorithm 1) runs in chunks of \`--chunk-lines\` lines (4096 by default) with the 200-line window, so its memory follows the chunk, the window and the templates, not the length of the log. The goal is under 200 MB for both inputs. The JSON list of blocks is the output and grows with the number of blocks. See benches/compare/segment_memory.sh."
  "$PYTHON" "$ROOT/benches/compare/write_section.py" "$WRITE_DOCS" segment-memory \
    "WRITE_DOCS=$WRITE_DOCS benches/compare/segment_memory.sh" "$BODY"
  echo "wrote section segment-memory of $WRITE_DOCS" >&2
fi
