#!/usr/bin/env bash
# Side-by-side throughput of our template miner and Drain3 0.9.11 on the same 1M-line input,
# in the same run. Prints both throughputs, the ratio, and our 2-thread / 1-thread ratio.
#
#   benches/compare/compare.sh            # uses <repo>/../shared
#   RCA_SHARED_DIR=/path/to/shared benches/compare/compare.sh
#
# Environment: RCA_SHARED_DIR (default <repo root>/../shared), LINES (default 1000000),
# RUNS (runs of our miner per thread count, best kept; default 3), PYTHON (default python3),
# WRITE_DOCS (a Markdown file, e.g. docs/benchmarks.md: the result replaces its section
# `miner-speed`, between the same markers rca_eval::docs::write_section uses).
# Everything it creates lives in benches/compare/.work (git-ignored): the virtualenv with
# drain3==0.9.11 and the generated input.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SHARED="${RCA_SHARED_DIR:-$ROOT/../shared}"
SHARED="$(cd "$SHARED" && pwd)"
WORK="$ROOT/benches/compare/.work"
LINES="${LINES:-1000000}"
RUNS="${RUNS:-3}"
PYTHON="${PYTHON:-python3}"
mkdir -p "$WORK"

for f in "$SHARED/bench/loghub_speed_input.py" "$SHARED/bench/drain3_reference.py"; do
  [[ -f "$f" ]] || { echo "missing $f (set RCA_SHARED_DIR)" >&2; exit 1; }
done

if [[ ! -x "$WORK/venv/bin/python" ]]; then
  echo "== creating virtualenv $WORK/venv" >&2
  "$PYTHON" -m venv "$WORK/venv"
fi
if ! "$WORK/venv/bin/python" -c 'import drain3, sys; sys.exit(0 if drain3.__version__ == "0.9.11" else 1)' 2>/dev/null \
   && ! "$WORK/venv/bin/pip" show drain3 2>/dev/null | grep -q '^Version: 0.9.11$'; then
  echo "== installing drain3==0.9.11" >&2
  "$WORK/venv/bin/pip" install --quiet 'drain3==0.9.11'
fi

INPUT="$WORK/loghub_speed_${LINES}.txt"
if [[ ! -s "$INPUT" ]]; then
  echo "== building the input ($LINES lines)" >&2
  "$PYTHON" "$SHARED/bench/loghub_speed_input.py" "$INPUT" "$LINES"
fi

echo "== building rca (release)" >&2
(cd "$ROOT" && cargo build --release -p rca-cli --quiet)
RCA="$ROOT/target/release/rca"

ours() { # threads -> best lines/s over RUNS runs
  local best=0 lps
  for _ in $(seq "$RUNS"); do
    lps="$("$RCA" logs templates "$INPUT" --threads "$1" --json 2>&1 >/dev/null \
           | sed -n 's/^stats: .*lines_per_second=\([0-9.]*\).*/\1/p')"
    best="$(awk -v a="$best" -v b="$lps" 'BEGIN{print (b>a)?b:a}')"
  done
  echo "$best"
}

echo "== ours, 1 thread ($RUNS runs)" >&2
OURS1="$(ours 1)"
echo "== ours, 2 threads ($RUNS runs)" >&2
OURS2="$(ours 2)"
TEMPLATES="$("$RCA" logs templates "$INPUT" --threads 1 --json 2>&1 >/dev/null | sed -n 's/^stats: .*templates=\([0-9]*\).*/\1/p')"
echo "== drain3 0.9.11 (one run)" >&2
read -r DRAIN DRAIN_CLUSTERS < <("$WORK/venv/bin/python" "$SHARED/bench/drain3_reference.py" "$INPUT")

RESULT="$(awk -v o1="$OURS1" -v o2="$OURS2" -v d="$DRAIN" -v dc="$DRAIN_CLUSTERS" -v t="$TEMPLATES" -v n="$LINES" 'BEGIN {
  printf "input: %d lines (loghub_speed_input.py)\n", n
  printf "drain3 0.9.11 (1 process): %12.0f lines/s  (%d clusters)\n", d, dc
  printf "rca, 1 thread:             %12.0f lines/s  (%d templates)\n", o1, t
  printf "rca, 2 threads:            %12.0f lines/s\n", o2
  printf "ratio rca(1 thread) / drain3: %.1fx\n", o1 / d
  printf "ratio rca 2 threads / 1 thread: %.2fx\n", o2 / o1
}')"
echo "$RESULT"

if [[ -n "${WRITE_DOCS:-}" ]]; then
  CPUS="$(nproc)"; LOAD="$(cut -d' ' -f1-3 /proc/loadavg)"
  "$PYTHON" - "$WRITE_DOCS" "$RESULT" "$CPUS" "$LOAD" <<'PY'
import os, sys
path, result, cpus, load = sys.argv[1:]
name = "miner-speed"
begin, end = f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"
cmd = f"WRITE_DOCS={path} benches/compare/compare.sh"
body = (f"### Template-miner throughput vs Drain3 0.9.11\n\n```\n{result}\n```\n\n"
        f"Machine: {cpus} CPUs, load average at the end of the run: {load}.")
section = f"{begin}\n_Written by `{cmd}`._\n\n{body}\n{end}"
text = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
if begin in text and end in text:
    a, b = text.index(begin), text.index(end) + len(end)
    text = text[:a] + section + text[b:]
else:
    text = text.rstrip() + "\n\n" + section + "\n"
open(path + ".tmp", "w").write(text)
os.replace(path + ".tmp", path)
PY
  echo "wrote section miner-speed of $WRITE_DOCS" >&2
fi
