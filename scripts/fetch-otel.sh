#!/usr/bin/env bash
# Installs the OpenTelemetry Python SDK and its OTLP/HTTP exporter from PyPI into
# .models/otel-python (once; versions pinned), for the test that exports a small instrumented
# shop to `rca otlp serve` (rca-cli/tests/cli/otlp.rs). Prints the PYTHONPATH to use.
# Override the destination with RCA_MODELS_DIR=/some/dir.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${RCA_MODELS_DIR:-$ROOT/.models}/otel-python"
VERSION=1.45.2
MARK="$DEST/.installed-$VERSION"
if [ ! -f "$MARK" ]; then
  rm -rf "$DEST"
  mkdir -p "$DEST"
  python3 -m pip install --quiet --disable-pip-version-check --no-input --target "$DEST" \
    "opentelemetry-sdk==$VERSION" "opentelemetry-exporter-otlp-proto-http==$VERSION" >&2
  touch "$MARK"
fi
echo "PYTHONPATH=$DEST"
