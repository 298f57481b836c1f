#!/usr/bin/env bash
# ctest driver of the report's browser test: makes a profile run (built-in simulator) and, with
# libllama, a bench run — both write report.html by default — and a side-by-side report of the
# two; a second profile run on another GPU compared with the first; a sweep and a find-max search
# (both write their own page); then opens each page in headless Chromium (report_test.mjs). Screenshots go to
# OUT/screenshots. Exit 77 (skipped) without chromium, node or playwright-core, unless
# KVPROF_REQUIRE_BROWSER=1 (scripts/test.sh sets it: setup.sh installs them), then it fails.
#   run.sh KVPROF_BIN OUT_DIR SOURCE_DIR
set -uo pipefail
kvprof=$1 out=$2 src=$3
chromium=${KVPROF_CHROMIUM:-/usr/bin/chromium}
modules=${KVPROF_NODE_MODULES:-$src/.deps/node/node_modules}
missing=()
[ -x "$chromium" ] || missing+=("chromium ($chromium; apt-get install chromium)")
command -v node >/dev/null 2>&1 || missing+=("node (apt-get install nodejs)")
[ -d "$modules/playwright-core" ] || missing+=("playwright-core ($modules; bash scripts/fetch_node_deps.sh)")
if [ ${#missing[@]} -gt 0 ]; then
  echo "missing: ${missing[*]}"
  if [ "${KVPROF_REQUIRE_BROWSER:-0}" = 1 ]; then exit 1; fi
  exit 77
fi
export KVPROF_CHROMIUM=$chromium KVPROF_NODE_MODULES=$modules
rm -rf "$out/results" "$out/screenshots" && mkdir -p "$out/results" "$out/screenshots"
set -e
"$kvprof" profile --sim -q --output-dir "$out/results" --run-tag browser >"$out/profile.txt"
profile_dir=$(sed -n 's/^report: \(.*\)\/report.html$/\1/p' "$out/profile.txt")
[ -n "$profile_dir" ] || { echo "profile printed no report line"; cat "$out/profile.txt"; exit 1; }
runs=("$profile_dir")
"$kvprof" make-gguf -m "$src/tests/fixtures/tiny_llama/config.json" -o "$out/tiny.gguf" >/dev/null
if "$kvprof" bench -m "$out/tiny.gguf" --concurrency 1,2,4 --prompt-toks 32,64 --gen-toks 8 \
     --output-dir "$out/results" --tag browser >"$out/bench.txt" 2>&1; then
  runs+=("$(sed -n 's/^report: \(.*\)\/report.html$/\1/p' "$out/bench.txt")")
elif [ "${KVPROF_REQUIRE_LLAMA:-0}" = 1 ]; then
  echo "bench failed:"; cat "$out/bench.txt"; exit 1
else
  echo "no libllama: the bench report is not checked"
fi
"$kvprof" report "${runs[@]}" -o "$out/results/compare" --format html,png,svg >/dev/null
# Two profile runs that differ in one setting (the GPU), compared: the differences section.
"$kvprof" profile -q --output-dir "$out/results" --run-tag browser-a100 --sim-gpu A100 >"$out/profile_b.txt"
profile_b=$(sed -n 's/^report: \(.*\)\/report.html$/\1/p' "$out/profile_b.txt")
"$kvprof" report "$profile_dir" "$profile_b" -o "$out/results/compare_gpus" >/dev/null
# A sweep (two configurations, a 2 x 2 grid each) and a find-max search, both on the built-in
# simulator: each writes its report.html into its folder.
cat >"$out/sweep.yaml" <<'YAML'
name: browser
baseline_s: 0.05
post_warmup_s: 0.05
warmup_requests: 1
gpu: H100
input_lengths: [64, 256]
output_lengths: [8]
batch_sizes: [2, 8]
models:
  - model_id: Qwen/Qwen2.5-0.5B-Instruct
  - model_id: Qwen/Qwen2.5-0.5B-Instruct
    kv_cache_dtype: fp8
YAML
"$kvprof" sweep -q --config "$out/sweep.yaml" --output-dir "$out/results" >"$out/sweep.txt"
grep -q "^report: $out/results/sweeps/browser/report.html$" "$out/sweep.txt" ||
  { echo "sweep printed no report line"; cat "$out/sweep.txt"; exit 1; }
"$kvprof" find-max -q --sim-num-gpu-blocks 60 --input-len 64 --output-len 32 --max-concurrency 64 \
  --output-dir "$out/results" >"$out/find_max.txt"
find_max_dir=$(sed -n 's/^report: \(.*\)\/report.html$/\1/p' "$out/find_max.txt")
[ -n "$find_max_dir" ] || { echo "find-max printed no report line"; cat "$out/find_max.txt"; exit 1; }
pages=("$out/results/compare_gpus" "$out/results/sweeps/browser" "$find_max_dir")
# A sweep of two real llama.cpp servers (kvprof serve on the tiny GGUF), planned on the CPU from
# their own flags: its page draws their host memory.
if [ -s "$out/tiny.gguf" ]; then
  cat >"$out/sweep_llama.yaml" <<YAML
name: browser-llama
baseline_s: 0.1
post_warmup_s: 0.1
warmup_requests: 1
min_condition_s: 0.3
input_lengths: [32, 64]
output_lengths: [8]
batch_sizes: [1, 2]
models:
  - model_id: $out/tiny.gguf
    launch: "$kvprof serve -m {model} -t 1 -q --host {host} --port {port} -c 1024 -np 2"
  - model_id: $out/tiny.gguf
    launch: "$kvprof serve -m {model} -t 1 -q --host {host} --port {port} -c 512 -np 2"
YAML
  KVPROF_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 "$kvprof" sweep -q \
    --config "$out/sweep_llama.yaml" --output-dir "$out/results" >"$out/sweep_llama.txt" 2>&1 ||
    { echo "llama.cpp sweep failed:"; cat "$out/sweep_llama.txt"; exit 1; }
  pages+=("$out/results/sweeps/browser-llama")
fi
# find-max against libllama in-process: its failing steps have no latency to draw.
if [ -s "$out/tiny.gguf" ] && "$kvprof" find-max -q --model "$out/tiny.gguf" -c 1024 --input-len 96 \
     --output-len 32 --max-concurrency 64 --output-dir "$out/results" >"$out/find_max_llama.txt" 2>&1; then
  pages+=("$(sed -n 's/^report: \(.*\)\/report.html$/\1/p' "$out/find_max_llama.txt")")
elif [ "${KVPROF_REQUIRE_LLAMA:-0}" = 1 ]; then
  echo "find-max in-process failed:"; cat "$out/find_max_llama.txt"; exit 1
fi
for dir in "${pages[@]}"; do
  node "$src/tests/browser/report_test.mjs" --report "$dir/report.html" --shots "$out/screenshots"
done
for f in fig1_mem_vs_concurrency fig2_tps_vs_concurrency; do
  [ -s "$out/results/compare/$f.svg" ] || { echo "no $f.svg"; exit 1; }
  grep -q "<svg" "$out/results/compare/$f.svg" || { echo "$f.svg is not SVG"; exit 1; }
done
for dir in "${runs[@]}" "$out/results/compare"; do
  node "$src/tests/browser/report_test.mjs" --report "$dir/report.html" \
    --shots "$out/screenshots" --png "$dir/fig1_mem_vs_concurrency.png" \
    --png "$dir/fig2_tps_vs_concurrency.png"
done
echo "screenshots: $out/screenshots"
