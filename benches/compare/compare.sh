#!/usr/bin/env bash
# Side-by-side throughput of our template miner and Drain3 0.9.11 on the same 1M-line input,
# in the same run. Prints both throughputs, the ratio, and our 2-thread / 1-thread ratio
# (wall clock, and CPU-accounted; see below), then each side's grouping accuracy on the same
# input (every line's true group comes from the Loghub labels of the line it was built from:
# benches/compare/labelled_input.py), beside the trivial grouper: a speed at equal accuracy,
# not a speed alone.
#
# Our timed region is `rca logs templates FILE` from file bytes to merged templates (reading,
# repairing, masking, mining, merging; the `stats:` line on stderr); Drain3's is only its
# add_log_message loop over lines already in memory, so the comparison favours Drain3.
#
# On a shared machine the wall-clock 2-thread ratio measures the scheduler as much as the
# miner: with autogroup scheduling (/proc/sys/kernel/sched_autogroup_enabled) every session
# gets an equal share of the CPUs however many threads it runs, so a busy machine pins the
# ratio near 1.0x. `cpus_used` shows the cores the run actually got; the CPU-accounted ratio
# is what the same work gives when each worker has a core of its own.
#
#   benches/compare/compare.sh            # uses <repo>/../shared
#   RCA_SHARED_DIR=/path/to/shared benches/compare/compare.sh
#
# Environment: RCA_SHARED_DIR (default <repo root>/../shared), CARGO_TARGET_DIR (where the
# release build goes; default <repo>/target), LINES (default 1000000),
# RUNS (rounds of our miner, each a 1-thread and a 2-thread run; default 5), PYTHON (default python3),
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
RUNS="${RUNS:-5}"
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
# The binary just built (CARGO_TARGET_DIR when set: a target directory of your own keeps
# builds from other checkouts that share the default one from replacing it mid-run).
RCA="${CARGO_TARGET_DIR:-$ROOT/target}/release/rca"

field() { # stats line, key -> value
  sed -n "s/^stats: .*[ ]$2=\([^ ]*\).*/\1/p" <<<"$1"
}
run_ours() { # threads -> the stats line of one run
  "$RCA" logs templates "$INPUT" --threads "$1" --json 2>&1 >/dev/null | grep '^stats: '
}

# The 1- and 2-thread runs alternate, so each pair sees the same machine load. Per round:
# both rates, their ratio, the cores the 2-thread run actually got (`cpus_used`: worker CPU
# time over the parallel phase's wall time), and the ratio the CPU accounting implies for an
# idle machine: the 1-thread run's CPU time over the 2-thread run's critical path (its
# slowest worker's CPU time plus the serial split and merge).
LOAD_START="$(cut -d' ' -f1-3 /proc/loadavg)"
echo "== ours, 1 and 2 threads alternating ($RUNS rounds)" >&2
ROUNDS=""
for r in $(seq "$RUNS"); do
  S1="$(run_ours 1)"; S2="$(run_ours 2)"
  ROUNDS+="$(field "$S1" lines_per_second) $(field "$S2" lines_per_second) $(field "$S2" cpus_used) \
$(field "$S1" worker_cpu_seconds) $(field "$S2" worker_cpu_seconds) $(field "$S2" split_seconds) \
$(field "$S2" merge_seconds) $(field "$S1" templates) $(field "$S2" templates)"$'\n'
done
LOAD_END="$(cut -d' ' -f1-3 /proc/loadavg)"
echo "== drain3 0.9.11 (one run)" >&2
read -r DRAIN DRAIN_CLUSTERS < <("$WORK/venv/bin/python" "$SHARED/bench/drain3_reference.py" "$INPUT")

# Accuracy: untimed runs that keep every line's group. Ours as `rca logs templates
# --per-line` at both thread counts; Drain3 in the timed configuration (drain3_groups.py
# reads it from the reference harness). All scored by `rca eval grouping` against the
# original and the corrected Loghub labels, the trivial grouper beside them.
LABELS="$WORK/labels_${LINES}"
if [[ ! -s "$LABELS.corrected" || "$LABELS.corrected" -ot "$INPUT" ]]; then
  echo "== labelling the input" >&2
  "$PYTHON" "$ROOT/benches/compare/labelled_input.py" "$SHARED/data/loghub-2k" "$INPUT" "$LABELS"
fi
ids_ours() { # threads -> file of template ids, one a line
  "$RCA" logs templates "$INPUT" --threads "$1" --per-line 2>/dev/null \
    | "$PYTHON" -c 'import json, sys
for line in sys.stdin:
    sys.stdout.write("%s\n" % json.loads(line)["template_id"])' > "$WORK/groups_rca_$1"
}
echo "== grouping accuracy: ours (1 and 2 threads), drain3 (untimed)" >&2
ids_ours 1
ids_ours 2
"$WORK/venv/bin/python" "$ROOT/benches/compare/drain3_groups.py" "$SHARED/bench/drain3_reference.py" \
  "$INPUT" "$WORK/groups_drain3"
ACCURACY="$("$RCA" eval grouping --lines "$INPUT" \
  --truth "original=$LABELS.original" --truth "corrected=$LABELS.corrected" \
  --predicted "drain3 0.9.11=$WORK/groups_drain3" \
  --predicted "rca, 1 thread=$WORK/groups_rca_1" --predicted "rca, 2 threads=$WORK/groups_rca_2")"

RESULT="$(awk -v d="$DRAIN" -v dc="$DRAIN_CLUSTERS" -v n="$LINES" -v l0="$LOAD_START" -v l1="$LOAD_END" \
  -v cpus="$(nproc)" '
function median(a, k,   i, j, t) {
  for (i = 2; i <= k; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
  return (k % 2) ? a[(k+1)/2] : (a[k/2] + a[k/2+1]) / 2
}
NF >= 9 {
  k++; o1[k] = $1; o2[k] = $2; used[k] = $3
  split($5, w, ","); crit = (w[1] > w[2]) ? w[1] : w[2]
  wall[k] = $2 / $1; cpu[k] = ($4 != "na" && w[1] != "na") ? $4 / (crit + $6 + $7) : -1
  if ($1 > best1) best1 = $1; if ($2 > best2) best2 = $2; t1 = $8; t2 = $9
  rows = rows sprintf("  round %d: 1 thread %9.0f lines/s, 2 threads %9.0f lines/s, ratio %.2fx, cores used by the 2-thread run %s, CPU-accounted ratio %.2fx\n", k, $1, $2, wall[k], $3, cpu[k])
}
END {
  printf "input: %d lines (loghub_speed_input.py); %d CPUs; load average %s at the start, %s at the end\n", n, cpus, l0, l1
  printf "drain3 0.9.11 (1 process): %12.0f lines/s  (%d clusters)\n", d, dc
  printf "rca, 1 thread (best of %d): %11.0f lines/s  (%d templates)\n", k, best1, t1
  printf "rca, 2 threads (best of %d): %10.0f lines/s  (%d templates)\n", k, best2, t2
  printf "ratio rca(1 thread) / drain3: %.1fx\n", best1 / d
  printf "%s", rows
  printf "ratio rca 2 threads / 1 thread, wall clock (median of %d rounds): %.2fx\n", k, median(wall, k)
  printf "ratio rca 2 threads / 1 thread, CPU-accounted (median of %d rounds): %.2fx\n", k, median(cpu, k)
}' <<<"$ROUNDS")"
echo "$RESULT"
echo
echo "$ACCURACY"

if [[ -n "${WRITE_DOCS:-}" ]]; then
  CPUS="$(nproc)"; LOAD="$(cut -d' ' -f1-3 /proc/loadavg)"
  BODY="### Template-miner throughput vs Drain3 0.9.11

Measures: both miners on the same seeded input in the same run, each side's grouping accuracy on that input beside its speed; the trivial grouper (token count and first token) is the baseline both must beat.

\`\`\`
$RESULT
\`\`\`

Grouping accuracy on the same input (untimed runs; labels: every line carries the Loghub label of the line it was built from, prefixed with its system; \`benches/compare/labelled_input.py\` checks that it rebuilds every line of the input):

$ACCURACY

Machine: $CPUS CPUs, load average at the end of the run: $LOAD.

Our timed region runs from file bytes to merged templates; Drain3's covers only its mining loop over lines already in memory. The wall-clock 2-thread ratio depends on the cores the run gets: with autogroup scheduling a busy machine gives the process the same share whatever its thread count (see \`cores used\`). The CPU-accounted ratio is the 1-thread run's CPU time over the 2-thread run's critical path (slowest worker's CPU time plus the serial split and merge): the speed-up when each worker has a core. See benches/compare/compare.sh."
  "$PYTHON" "$ROOT/benches/compare/write_section.py" "$WRITE_DOCS" miner-speed \
    "WRITE_DOCS=$WRITE_DOCS benches/compare/compare.sh" "$BODY"
  echo "wrote section miner-speed of $WRITE_DOCS" >&2
fi
