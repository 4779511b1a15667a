#!/usr/bin/env bash
# Regenerates docs/img/report.png, the README's screenshot: the HTML report of the bundled
# incident (what the README's `rca diagnose examples/incidents/trainticket-cpu` runs), written
# by the rca binary and photographed by headless Chromium. Nothing is drawn by hand.
#
#   bash scripts/report-screenshot.sh            # writes docs/img/report.png
#   bash scripts/report-screenshot.sh OUT.png    # writes OUT.png
#
# RCA_BIN names an rca binary that is already built (default: `cargo build -p rca-cli`, then
# target/debug/rca). REPORT_HEIGHT sets the height of the picture in pixels (default 3000; the
# width is 1280). Needs Chromium (`apt-get install -y chromium`, or `bash scripts/services.sh
# start`).
set -euo pipefail
cd "$(dirname "$0")/.."

out="${1:-docs/img/report.png}"
incident=examples/incidents/trainticket-cpu
height="${REPORT_HEIGHT:-3000}"

chromium="$(command -v chromium || command -v chromium-browser || true)"
if [ -z "$chromium" ]; then
  echo "report-screenshot: chromium is required (apt-get install -y chromium)" >&2
  exit 1
fi
if [ -z "${RCA_BIN:-}" ]; then
  cargo build --quiet -p rca-cli
  RCA_BIN=target/debug/rca
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

if ! "$RCA_BIN" diagnose "$incident" --html "$work/report.html" \
  --trajectory "$work/trajectory.json" >/dev/null 2>"$work/rca.log"; then
  cat "$work/rca.log" >&2
  exit 1
fi

# No network, no GPU, a throw-away profile; the page has no scripts and loads nothing.
"$chromium" --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage \
  --no-first-run --disable-background-networking --disable-component-update --disable-sync \
  --hide-scrollbars --force-device-scale-factor=1 --user-data-dir="$work/profile" \
  --window-size="1280,$height" --screenshot="$work/report.png" \
  "file://$work/report.html" >/dev/null 2>&1

if [ ! -s "$work/report.png" ]; then
  echo "report-screenshot: chromium wrote no screenshot" >&2
  exit 1
fi
mkdir -p "$(dirname "$out")"
mv "$work/report.png" "$out"
echo "wrote $out"
