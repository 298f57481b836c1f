#!/usr/bin/env bash
# What a sweep pays for running its configurations as Slurm jobs: the same sweep of N short
# serve-sim configurations run by the local executor and by `--executor slurm` on the single-node
# cluster of scripts/slurm-cluster.sh, wall time each, and the difference per configuration.
#
#   benchmarks/sweep_slurm.sh [BUILD_DIR] [N]      (as root; defaults: build-test, 8)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-test}
n=${2:-8}
kvprof=$(realpath "$build/src/kvprof")
fake_nvml=$(realpath "$build/fake_nvml/libnvidia-ml.so.1")
work=$(mktemp -d /tmp/kvprof-sweep-bench.XXXX)
cluster=/tmp/kvprof-slurm-bench
trap 'bash scripts/slurm-cluster.sh stop "$cluster"; rm -rf "$work" "$cluster"' EXIT
KVPROF_SLURM_PORT=17817 bash scripts/slurm-cluster.sh start "$cluster" >/dev/null
export SLURM_CONF=$cluster/slurm.conf KVPROF_NVML_LIBRARY=$fake_nvml KVPROF_FAKE_NVML_GPUS=4 \
  KVPROF_FAKE_NVML_LIVE=$work/live.txt KVPROF_OUTPUT_DIR=

{
  echo "baseline_s: 0.2"
  echo "post_warmup_s: 0.1"
  echo "warmup_requests: 1"
  echo "min_condition_s: 0.3"
  echo "gpu: H100"
  echo "input_lengths: [64]"
  echo "output_lengths: [4]"
  echo "launch: \"$kvprof serve-sim --model {model} --gpu {gpu} --host {host} --port {port} --max-num-seqs {max_concurrency} --max-model-len {max_model_len} --live-state $work/live.txt\""
  echo "models:"
  for i in $(seq 1 "$n"); do
    echo "  - model_id: meta-llama/Llama-3.1-8B-Instruct"
    echo "    batch_sizes: [1]"
    echo "    max_model_len: $((1024 + i * 16))"
  done
} >"$work/grid.yaml"

seconds() { date +%s.%N; }
t0=$(seconds)
"$kvprof" sweep --config "$work/grid.yaml" --output-dir "$work/local" --no-report -q >/dev/null
t1=$(seconds)
"$kvprof" sweep --config "$work/grid.yaml" --output-dir "$work/slurm" --no-report -q \
  --executor slurm --poll-s 0.5 >/dev/null
t2=$(seconds)
awk -v n="$n" -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN {
  printf "configurations: %d\n", n
  printf "local executor: %.1f s (%.2f s each)\n", b - a, (b - a) / n
  printf "slurm executor: %.1f s (%.2f s each; %+.2f s per configuration against local)\n", \
    c - b, (c - b) / n, ((c - b) - (b - a)) / n
}'
