#!/usr/bin/env bash
# Starts (or stops) the servers the test suite talks to, on loopback only:
#   - PostgreSQL (a throw-away cluster in .services/pg, port $RCA_PG_PORT, default 54329),
#     with TLS on (the certificate of .services/tls; RCA_POSTGRES_CA_FILE names its authority);
#   - Prometheus (port $RCA_PROM_PORT, default 19090) with a small fixture backfilled from
#     OpenMetrics by promtool; it also scrapes the Pushgateway every second and evaluates one
#     alerting rule, RcaE2eErrorRatio, on what the tests push there, sending to Alertmanager;
#   - the Prometheus Pushgateway (port $RCA_PUSHGATEWAY_PORT, default 19091);
#   - Alertmanager (port $RCA_ALERTMANAGER_PORT, default 19093, clustering off), which posts
#     every alert group to the diagnosis service's webhook at
#     https://127.0.0.1:$RCA_ALERT_WEBHOOK_PORT/alerts (default 19095) over TLS with a client
#     certificate: groups whose alerts carry rca_auth="basic" with basic auth, the others with
#     a bearer token (the TLS material and both secrets are made by openssl in .services/tls);
#     nothing listens there until the end-to-end test starts the service on that port;
#   - the local language model: llama-cpp-python's OpenAI-compatible server (port
#     $RCA_LLM_PORT, default 18080) serving Gemma 3 270M, fetched and built by
#     scripts/fetch-llm.sh. Ready means it answered a real chat completion.
# Installs the Debian packages when they are missing (needs root, as on CI), including
# chromium and chromium-driver for the HTML report test.
#
#   bash scripts/services.sh start      # prints the environment the tests read
#   bash scripts/services.sh start-llm  # only the model server
#   bash scripts/services.sh stop
#
# The environment is also written to .services/env, which scripts/test.sh sources (`start-llm`
# writes the model server's part of it).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
STATE=$ROOT/.services
PG_PORT=${RCA_PG_PORT:-54329}
PROM_PORT=${RCA_PROM_PORT:-19090}
LLM_PORT=${RCA_LLM_PORT:-18080}
PUSH_PORT=${RCA_PUSHGATEWAY_PORT:-19091}
AM_PORT=${RCA_ALERTMANAGER_PORT:-19093}
WEBHOOK_PORT=${RCA_ALERT_WEBHOOK_PORT:-19095}
# The metric the end-to-end test pushes and the alert Prometheus raises on it.
ALERT_METRIC=rca_e2e_error_ratio
ALERT_NAME=RcaE2eErrorRatio
LLM_ALIAS=gemma-3-270m-q4_k_m
LLM_N_CTX=8192

need_packages() {
  local missing=()
  command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
  command -v openssl >/dev/null 2>&1 || missing+=(openssl)
  command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
  # Debian's packages install init scripts and systemd units; nothing here uses them: the
  # servers below run from their binaries with their own flags, state and ports.
  command -v prometheus-alertmanager >/dev/null 2>&1 || missing+=(prometheus-alertmanager)
  command -v prometheus-pushgateway >/dev/null 2>&1 || missing+=(prometheus-pushgateway)
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
  # Headless Chromium and ChromeDriver for the HTML report test (not a server: nothing starts).
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
  if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
      echo "services: missing packages (${missing[*]}) and not root; install them with apt-get" >&2
      return 1
    fi
    echo "services: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

as_pg_owner() {
  # initdb and postgres refuse to run as root: run them as the postgres user when we are root.
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# PostgreSQL over TLS or not, as the client likes (ssl=on with the server certificate of
# make_tls, which also asks clients for a certificate of the same authority), trust
# authentication on loopback, except for two roles the TLS tests create, admitted over TLS
# only: rca_scram with a SCRAM password (channel binding) and rca_cert with a client
# certificate (the CN "rca test client"). A cluster running from another version of this
# function or another certificate (e.g. one without TLS) is replaced.
start_postgres() {
  local bin
  bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
  local dir=$STATE/pg tls=$STATE/tls
  make_tls "$tls"
  local marker
  marker="rca-pg 2 tls $(sha256sum < "$tls/server.pem" | cut -c1-64)"
  if [ -f "$dir/postmaster.pid" ] && as_pg_owner "$bin/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
    if [ "$(cat "$dir/rca-marker" 2>/dev/null)" = "$marker" ]; then
      return 0
    fi
    as_pg_owner "$bin/pg_ctl" -D "$dir" -m fast -w stop >/dev/null
  fi
  rm -rf "$dir"
  mkdir -p "$dir"
  [ "$(id -u)" -eq 0 ] && chown postgres:postgres "$dir"
  chmod 700 "$dir"
  as_pg_owner "$bin/initdb" -D "$dir" -A trust -U postgres --no-instructions >/dev/null
  # postgres refuses a key others may read: copies of mode 600, owned by the server's user.
  local owner=() f
  [ "$(id -u)" -eq 0 ] && owner=(-o postgres -g postgres)
  for f in server.pem server-key.pem ca.pem; do
    install -m 600 "${owner[@]}" "$tls/$f" "$dir/$f"
  done
  # The first matching line wins: these come before initdb's trust lines.
  local hba
  hba=$(cat "$dir/pg_hba.conf")
  printf '%s\n' \
    'hostnossl all rca_scram,rca_cert 127.0.0.1/32 reject' \
    'hostssl all rca_scram 127.0.0.1/32 scram-sha-256' \
    'hostssl all rca_cert 127.0.0.1/32 cert map=rca' \
    "$hba" > "$dir/pg_hba.conf"
  printf 'rca "rca test client" rca_cert\n' >> "$dir/pg_ident.conf"
  as_pg_owner "$bin/pg_ctl" -D "$dir" -l "$dir/server.log" -w \
    -o "-p $PG_PORT -c listen_addresses=127.0.0.1 -k $dir -c ssl=on -c ssl_cert_file=$dir/server.pem -c ssl_key_file=$dir/server-key.pem -c ssl_ca_file=$dir/ca.pem" \
    start >/dev/null
  echo "$marker" > "$dir/rca-marker"
}

write_prometheus_fixture() {
  # Three series, one sample a minute over the two hours ending ten minutes ago:
  #   rca_fixture_requests_total{instance="svc-a"} = minute index
  #   rca_fixture_latency_seconds{instance="svc-a"} = 0.1, and 2.5 in the last 10 samples
  #   rca_fixture_latency_seconds{instance="svc-b"} = 0.2
  local out=$1 start=$2
  python3 - "$out" "$start" <<'PY'
import sys
out, start = sys.argv[1], int(sys.argv[2])
n = 120
with open(out, "w") as f:
    f.write("# TYPE rca_fixture_requests_total counter\n")
    for i in range(n):
        f.write(f'rca_fixture_requests_total{{instance="svc-a"}} {i} {start + 60 * i}\n')
    f.write("# TYPE rca_fixture_latency_seconds gauge\n")
    for i in range(n):
        v = 2.5 if i >= n - 10 else 0.1
        f.write(f'rca_fixture_latency_seconds{{instance="svc-a"}} {v} {start + 60 * i}\n')
        f.write(f'rca_fixture_latency_seconds{{instance="svc-b"}} 0.2 {start + 60 * i}\n')
    f.write("# EOF\n")
PY
}

# wait_ready NAME URL LOG PIDFILE: polls URL (each try bounded to 1 s) for at most 30 s.
wait_ready() {
  local name=$1 url=$2 log=$3 pidfile=$4
  for _ in $(seq 1 60); do
    if python3 -c "import urllib.request; urllib.request.urlopen('$url', timeout=1)" 2>/dev/null; then
      return 0
    fi
    if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
      break
    fi
    sleep 0.5
  done
  echo "services: $name did not become ready; log:" >&2
  tail -20 "$log" >&2
  return 1
}

start_pushgateway() {
  local dir=$STATE/pushgateway
  if [ -f "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
    return 0
  fi
  rm -rf "$dir"
  mkdir -p "$dir"
  # No persistence file: pushed groups live as long as the process.
  nohup prometheus-pushgateway --web.listen-address="127.0.0.1:$PUSH_PORT" \
    >"$dir/server.log" 2>&1 &
  echo $! > "$dir/pid"
  wait_ready pushgateway "http://127.0.0.1:$PUSH_PORT/-/ready" "$dir/server.log" "$dir/pid"
}

# make_tls DIR: a throw-away authority, a server certificate for 127.0.0.1 and localhost, a
# client certificate, a bearer token and a basic-auth password (once; P-256 keys).
make_tls() {
  local dir=$1
  [ -f "$dir/done" ] && return 0
  rm -rf "$dir"
  mkdir -p "$dir"
  (
    cd "$dir"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
      -keyout ca-key.pem -out ca.pem -subj "/CN=rca test authority" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
    local who
    for who in server client; do
      openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -keyout "$who-key.pem" -out "$who.csr" -subj "/CN=rca test $who"
    done
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' > server.ext
    printf 'basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n' > client.ext
    for who in server client; do
      openssl x509 -req -in "$who.csr" -CA ca.pem -CAkey ca-key.pem -CAcreateserial \
        -days 3650 -out "$who.pem" -extfile "$who.ext"
    done
    openssl rand -hex 32 > am-token
    openssl rand -hex 32 > am-password
    chmod 600 ./*-key.pem am-token am-password
  ) >/dev/null 2>&1
  touch "$dir/done"
}

start_alertmanager() {
  local dir=$STATE/alertmanager tls=$STATE/tls
  make_tls "$tls"
  # The route docs/guides/diagnosis-service.md describes, with test-sized intervals: one group
  # per (alertname, instance), posted a second after its first alert, changes after 2 s; over
  # TLS with a client certificate, authenticated by a bearer token or (alerts labelled
  # rca_auth="basic") basic auth.
  local config
  config=$(cat <<YML
route:
  receiver: rca
  group_by: [alertname, instance]
  group_wait: 1s
  group_interval: 2s
  repeat_interval: 24h
  routes:
    - receiver: rca-basic
      matchers: ['rca_auth="basic"']
receivers:
  - name: rca
    webhook_configs:
      - url: https://127.0.0.1:$WEBHOOK_PORT/alerts
        send_resolved: true
        max_alerts: 50
        http_config:
          authorization:
            type: Bearer
            credentials_file: $tls/am-token
          tls_config:
            ca_file: $tls/ca.pem
            cert_file: $tls/client.pem
            key_file: $tls/client-key.pem
  - name: rca-basic
    webhook_configs:
      - url: https://127.0.0.1:$WEBHOOK_PORT/alerts
        send_resolved: true
        max_alerts: 50
        http_config:
          basic_auth:
            username: alertmanager-basic
            password_file: $tls/am-password
          tls_config:
            ca_file: $tls/ca.pem
            cert_file: $tls/client.pem
            key_file: $tls/client-key.pem
YML
)
  # A running Alertmanager is kept only if it runs this configuration.
  if [ -f "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
    if [ "$config" = "$(cat "$dir/alertmanager.yml" 2>/dev/null)" ]; then
      return 0
    fi
    kill "$(cat "$dir/pid")" 2>/dev/null || true
    sleep 1
  fi
  rm -rf "$dir"
  mkdir -p "$dir/data"
  printf '%s\n' "$config" > "$dir/alertmanager.yml"
  # An empty cluster address turns the gossip cluster off (one instance, no port 9094).
  nohup prometheus-alertmanager --config.file="$dir/alertmanager.yml" \
    --storage.path="$dir/data" --web.listen-address="127.0.0.1:$AM_PORT" \
    --cluster.listen-address= >"$dir/server.log" 2>&1 &
  echo $! > "$dir/pid"
  wait_ready alertmanager "http://127.0.0.1:$AM_PORT/-/ready" "$dir/server.log" "$dir/pid"
}

start_prometheus() {
  local dir=$STATE/prom
  if [ -f "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
    return 0
  fi
  rm -rf "$dir"
  mkdir -p "$dir/data"
  local now start
  now=$(date +%s)
  start=$(( (now - 600 - 120 * 60) / 60 * 60 ))
  echo "$start" > "$dir/fixture_start"
  write_prometheus_fixture "$dir/fixture.om" "$start"
  promtool tsdb create-blocks-from openmetrics "$dir/fixture.om" "$dir/data" >/dev/null
  # The alert fires when every pushed value of the last 5 s was above 0.2.
  cat > "$dir/rules.yml" <<YML
groups:
  - name: rca-e2e
    rules:
      - alert: $ALERT_NAME
        expr: min_over_time(${ALERT_METRIC}[5s]) > 0.2
        labels:
          severity: page
        annotations:
          summary: "error ratio {{ \$value }} on {{ \$labels.instance }}"
YML
  cat > "$dir/prometheus.yml" <<YML
global:
  scrape_interval: 1h
  evaluation_interval: 1s
rule_files:
  - $dir/rules.yml
alerting:
  alertmanagers:
    - static_configs:
        - targets: ["127.0.0.1:$AM_PORT"]
scrape_configs:
  - job_name: pushgateway
    scrape_interval: 1s
    honor_labels: true
    static_configs:
      - targets: ["127.0.0.1:$PUSH_PORT"]
YML
  nohup prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
    --storage.tsdb.retention.time=100y --web.listen-address="127.0.0.1:$PROM_PORT" \
    >"$dir/server.log" 2>&1 &
  echo $! > "$dir/pid"
  wait_ready prometheus "http://127.0.0.1:$PROM_PORT/-/ready" "$dir/server.log" "$dir/pid"
}

start_llm() {
  local dir=$STATE/llm
  # Paths of the model file and the server's Python (fetched or built once; a no-op after).
  eval "$(bash "$ROOT/scripts/fetch-llm.sh")"
  if [ -f "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
    return 0
  fi
  rm -rf "$dir"
  mkdir -p "$dir"
  "$RCA_LLM_SERVER_PYTHON" -c 'import llama_cpp; print(llama_cpp.__version__)' > "$dir/version"
  nohup "$RCA_LLM_SERVER_PYTHON" -m llama_cpp.server --model "$RCA_LLM_MODEL_FILE" \
    --host 127.0.0.1 --port "$LLM_PORT" --n_ctx "$LLM_N_CTX" --model_alias "$LLM_ALIAS" \
    --chat_format gemma --n_threads 2 --interrupt_requests False >"$dir/server.log" 2>&1 &
  echo $! > "$dir/pid"
  # Requests queue instead of interrupting each other (the default cuts a running stream
  # short when another request arrives). Ready when it answers a real one-token completion (loading takes 5-10 s).
  for _ in $(seq 1 120); do
    if python3 - "$LLM_PORT" "$LLM_ALIAS" 2>/dev/null <<'PY'
import json, sys, urllib.request
port, alias = sys.argv[1], sys.argv[2]
body = json.dumps({"model": alias, "max_tokens": 1, "temperature": 0,
                   "messages": [{"role": "user", "content": "ping"}]}).encode()
req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", body,
                             {"Content-Type": "application/json"})
with urllib.request.urlopen(req, timeout=30) as r:
    assert json.load(r)["usage"]["prompt_tokens"] > 0
PY
    then
      return 0
    fi
    if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
      break
    fi
    sleep 1
  done
  echo "services: the model server did not become ready; log:" >&2
  tail -20 "$dir/server.log" >&2
  return 1
}

# The model server's environment (what the real-model tests and `bench agents` read), as
# export lines.
llm_env() {
  cat <<ENV
export RCA_LLM_BASE_URL="http://127.0.0.1:$LLM_PORT/v1"
export RCA_LLM_MODEL="$LLM_ALIAS"
export RCA_LLM_MODEL_FILE="$RCA_LLM_MODEL_FILE"
export RCA_LLM_MODEL_SHA256="$RCA_LLM_MODEL_SHA256"
export RCA_LLM_QUANTIZATION="Q4_K_M"
export RCA_LLM_SERVER="llama-cpp-python"
export RCA_LLM_SERVER_VERSION="$(cat "$STATE/llm/version")"
export RCA_LLM_N_CTX="$LLM_N_CTX"
ENV
}

stop_all() {
  local bin
  if [ -d "$STATE/pg" ] && bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1); then
    as_pg_owner "$bin/pg_ctl" -D "$STATE/pg" -m fast stop >/dev/null 2>&1 || true
  fi
  local f
  for f in "$STATE/prom/pid" "$STATE/alertmanager/pid" "$STATE/pushgateway/pid" "$STATE/llm/pid"; do
    if [ -f "$f" ]; then
      kill "$(cat "$f")" 2>/dev/null || true
      rm -f "$f"
    fi
  done
}

case "${1:-start}" in
  start)
    mkdir -p "$STATE"
    need_packages
    start_postgres
    start_pushgateway
    start_alertmanager
    start_prometheus
    start_llm
    cat > "$STATE/env" <<ENV
export RCA_POSTGRES_URL="host=127.0.0.1 port=$PG_PORT user=postgres dbname=postgres"
export RCA_POSTGRES_CA_FILE="$STATE/tls/ca.pem"
export RCA_PROMETHEUS_URL="http://127.0.0.1:$PROM_PORT"
export RCA_PROMETHEUS_FIXTURE_START="$(cat "$STATE/prom/fixture_start")"
export RCA_PUSHGATEWAY_URL="http://127.0.0.1:$PUSH_PORT"
export RCA_ALERTMANAGER_URL="http://127.0.0.1:$AM_PORT"
export RCA_ALERT_WEBHOOK_URL="https://127.0.0.1:$WEBHOOK_PORT/alerts"
export RCA_ALERT_TLS_DIR="$STATE/tls"
export RCA_ALERT_TEST_METRIC="$ALERT_METRIC"
export RCA_ALERT_TEST_ALERTNAME="$ALERT_NAME"
ENV
    llm_env >> "$STATE/env"
    cat "$STATE/env"
    ;;
  start-llm)
    # Only the model server (for trying the agents on the local model). Its variables go to
    # .services/env too: the other services' lines (from `start`) are kept, the model's
    # replaced, so `source .services/env` works after either command.
    mkdir -p "$STATE"
    start_llm
    if [ -f "$STATE/env" ]; then
      grep -v '^export RCA_LLM_' "$STATE/env" > "$STATE/env.tmp" || true
    else
      : > "$STATE/env.tmp"
    fi
    llm_env >> "$STATE/env.tmp"
    mv "$STATE/env.tmp" "$STATE/env"
    echo "model server ready at http://127.0.0.1:$LLM_PORT/v1 (model $LLM_ALIAS); its environment is in .services/env; stop it with: bash scripts/services.sh stop" >&2
    ;;
  stop)
    stop_all
    ;;
  *)
    echo "usage: $0 start|start-llm|stop" >&2
    exit 2
    ;;
esac
