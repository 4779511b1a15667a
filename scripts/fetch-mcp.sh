#!/usr/bin/env bash
# Installs the official MCP Python SDK (PyPI `mcp`, with its dependencies, among them
# jsonschema) into .models/mcp-python (once; version pinned), for the test that drives
# `rca mcp` with a real client over stdio and Streamable HTTP (rca-cli/tests/cli/mcp.rs).
# Prints the PYTHONPATH to use. Override the destination with RCA_MODELS_DIR=/some/dir.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${RCA_MODELS_DIR:-$ROOT/.models}/mcp-python"
VERSION=2.3.0
MARK="$DEST/.installed-$VERSION"
# Tests run in parallel processes and each may call this: one installs, the others wait.
mkdir -p "$(dirname "$DEST")"
exec 9>"$DEST.lock"
flock -w 600 9
if [ ! -f "$MARK" ]; then
  rm -rf "$DEST"
  mkdir -p "$DEST"
  python3 -m pip install --quiet --disable-pip-version-check --no-input --timeout 60 --target "$DEST" \
    "mcp==$VERSION" >&2
  touch "$MARK"
fi
echo "PYTHONPATH=$DEST"
