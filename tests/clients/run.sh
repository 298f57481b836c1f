#!/usr/bin/env bash
# ctest driver of the client conformance suite: starts `kvprof serve-sim` (vLLM's API) and, with
# libllama, `kvprof serve` on a tiny dummy-weight GGUF (llama-server's API), then runs the OpenAI
# SDK cases (openai_sdk_test.mjs) and raw HTTP/1.1 checks with curl against each, and has a real
# Prometheus (Debian's) scrape both servers' /metrics. Exit 77
# (skipped) without node, curl or the SDK, unless KVPROF_REQUIRE_BROWSER=1 (scripts/test.sh sets
# it: setup.sh installs them), then it fails.
#   run.sh KVPROF_BIN OUT_DIR SOURCE_DIR
set -uo pipefail
kvprof=$1 out=$2 src=$3
modules=${KVPROF_NODE_MODULES:-$src/.deps/node/node_modules}
missing=()
command -v node >/dev/null 2>&1 || missing+=("node (apt-get install nodejs)")
command -v curl >/dev/null 2>&1 || missing+=("curl (apt-get install curl)")
[ -d "$modules/openai" ] || missing+=("the openai SDK ($modules; bash scripts/fetch_node_deps.sh)")
if [ ${#missing[@]} -gt 0 ]; then
  echo "missing: ${missing[*]}"
  if [ "${KVPROF_REQUIRE_BROWSER:-0}" = 1 ]; then exit 1; fi
  exit 77
fi
export NODE_PATH=$modules
rm -rf "$out/run" && mkdir -p "$out/run"
pids=()
trap 'for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null; done; wait' EXIT

# Starts a server in the background; its URL (".../v1") is the fourth word of its first line.
start() {
  local name=$1
  shift
  "$kvprof" "$@" >"$out/run/$name.out" 2>"$out/run/$name.err" &
  pids+=($!)
  for _ in $(seq 1 200); do
    url=$(sed -n '1s/.* listening on \(http[^ ]*\)\/v1 .*/\1/p' "$out/run/$name.out")
    [ -n "$url" ] && return 0
    kill -0 "${pids[-1]}" 2>/dev/null || break
    sleep 0.05
  done
  echo "$name did not start:"; cat "$out/run/$name.err"; return 1
}

# Raw HTTP/1.1 as curl speaks it: two requests on one kept-alive connection, HEAD, and the
# chunked framing of a stream (hex sizes, the last chunk empty).
curl_checks() {
  local base=$1 model=$2
  curl -sv "$base/v1/models" "$base/v1/models" -o /dev/null -o /dev/null 2>"$out/run/keepalive.txt"
  grep -q "Re-using existing connection" "$out/run/keepalive.txt" ||
    { echo "curl: the second request did not reuse the connection"; return 1; }
  local head
  head=$(curl -sI "$base/v1/models")
  grep -qi "^content-type: application/json" <<<"$head" || { echo "HEAD: $head"; return 1; }
  local raw=$out/run/stream.raw
  curl -s --raw -N "$base/v1/completions" -H 'Content-Type: application/json' -o "$raw" \
    -d "{\"model\":\"$model\",\"prompt\":\"w1 w2\",\"max_tokens\":3,\"stream\":true}"
  grep -qE '^[0-9a-f]+'$'\r''$' "$raw" || { echo "stream: no chunk sizes"; cat "$raw"; return 1; }
  [ "$(tail -c 5 "$raw" | od -An -c | tr -d ' \n')" = '0\r\n\r\n' ] ||
    { echo "stream: no last chunk"; cat "$raw"; return 1; }
  grep -q "data: \[DONE\]" "$raw" || { echo "stream: no [DONE]"; return 1; }
  echo "ok   curl: keep-alive, HEAD, chunked stream"
}

set -e
start sim serve-sim --model sim-llama --gpu H100 --port 0 --max-model-len 2048
sim_url=$url
node "$src/tests/clients/openai_sdk_test.mjs" --base "$sim_url" --dialect vllm \
  --model sim-llama --context 2048
curl_checks "$sim_url" sim-llama

"$kvprof" make-gguf -m "$src/tests/fixtures/tiny_llama/config.json" -o "$out/run/tiny.gguf" >/dev/null
if ! start serve serve -m "$out/run/tiny.gguf" -c 1024 --parallel 2 --metrics -q --port 0; then
  if [ "${KVPROF_REQUIRE_LLAMA:-0}" = 1 ]; then exit 1; fi
  echo "no libllama: kvprof serve is not checked"
  exit 0
fi
serve_url=$url
node "$src/tests/clients/openai_sdk_test.mjs" --base "$serve_url" --dialect llama-server \
  --model tiny.gguf --context 512
curl_checks "$serve_url" tiny.gguf

# A real Prometheus scraping both servers' /metrics every 200 ms: each target up, and each
# engine's own gauge stored (its parser takes the exposition as it takes vLLM's and llama-server's).
if ! command -v prometheus >/dev/null 2>&1; then
  if [ "${KVPROF_REQUIRE_PROMETHEUS:-0}" = 1 ]; then echo "prometheus is not installed"; exit 1; fi
  echo "no prometheus: the scrape is not checked"
  exit 0
fi
prom_port=$(node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})")
cat >"$out/run/prometheus.yml" <<YAML
global:
  scrape_interval: 200ms
  scrape_timeout: 150ms
scrape_configs:
  - job_name: sim
    static_configs: [{targets: ['${sim_url#http://}']}]
  - job_name: serve
    static_configs: [{targets: ['${serve_url#http://}']}]
YAML
prometheus --config.file="$out/run/prometheus.yml" --web.listen-address="127.0.0.1:$prom_port" \
  --storage.tsdb.path="$out/run/prometheus-data" >"$out/run/prometheus.log" 2>&1 &
pids+=($!)
query() { curl -s "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1"; }
for _ in $(seq 1 150); do
  if query 'up == 1' | grep -q '"job":"serve"' && query 'up == 1' | grep -q '"job":"sim"' &&
     query 'llamacpp:requests_processing' | grep -q '"job":"serve"' &&
     query 'vllm:num_requests_running' | grep -q '"job":"sim"'; then
    echo "ok   prometheus: scraped both servers' /metrics"
    exit 0
  fi
  sleep 0.1
done
echo "prometheus never scraped both servers:"; query up; tail -5 "$out/run/prometheus.log"
exit 1
