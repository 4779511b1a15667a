# Sourced by .ci/run and scripts/test.sh: `phase NAME CMD...` runs CMD and prints its wall time
# to stderr as `phase: NAME: N s`; `phase_total` prints the time since the script started.
PHASE_T0=${PHASE_T0:-$(date +%s)}
phase() {
  local name=$1 t0 rc=0
  shift
  t0=$(date +%s)
  "$@" || rc=$?
  printf 'phase: %s: %d s%s\n' "$name" "$(( $(date +%s) - t0 ))" \
    "$([ "$rc" -eq 0 ] || echo " (failed, exit $rc)")" >&2
  return "$rc"
}
phase_total() {
  printf 'phase: total: %d s\n' "$(( $(date +%s) - PHASE_T0 ))" >&2
}
