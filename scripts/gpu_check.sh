#!/usr/bin/env bash
# Runs kvprof's checks on a real NVIDIA GPU (issue 34) in one go, in under 8 minutes, and packs
# every figure with the command behind it into OUT_DIR/gpu_check.tar.gz (its log beside it):
#   1. bench_gpu_check (NVML device and per-process memory vs nvidia-smi and a known cuMemAlloc),
#      bench_sampler and `kvprof sample` at 1 ms for 10 s (rate, CPU per sample);
#   2. HF transformers in-process (benchmarks/gpu_hf_inprocess.py: 3 models from their configs,
#      random bf16 weights, SDPA, a batch x prompt grid) — kvprof's plans are compared here later;
#   3. llama.cpp's CUDA build through `kvprof bench -ngl 99` on two dummy GGUFs, FA on and off;
#   4. `kvprof profile --launch "kvprof serve -m X.gguf -ngl 99 ..."` sampling NVML;
#   5. MoE experts on the host (issue 36): Qwen3-30B-A3B's layout in Q4_0 (dummy weights) through
#      `kvprof bench -ngl 99` with --n-cpu-moe, --cpu-moe and an -ot pattern: llama.cpp's CUDA0
#      and host buffers (and the CUDA compute buffer the host experts' copies take) vs the plan;
#   6. llama.cpp's own --fit on the GPU (issue 36): common_fit_params of the CUDA build
#      (llama_fit_report) on that model and on Qwen3-4B f16, --fit-target leaving as much to fill
#      as a smaller GPU would have: what it chooses, per line, against kvprof's plan later.
# Needs the bundle scripts/device_bundle.sh makes, .device/bundle.tar.xz (carried there):
#   device run: bash scripts/gpu_check.sh "$OUT"      (carry: .device)
# Each step has its own time limit; a failed step is logged and the next one runs.
set -uo pipefail
cd "$(dirname "$0")/.."

out_dir=${1:?usage: scripts/gpu_check.sh OUT_DIR [all|llama|moe]}
only=${2:-all} # llama: steps 3 to 5 alone (a rerun after 1 and 2 were measured); moe: step 5
mkdir -p "$out_dir"
work=$(mktemp -d /tmp/gpu_check.XXXXXX)
results=$work/gpu_check
mkdir -p "$results"
exec > >(tee "$out_dir/gpu_check.log") 2>&1
script_start=$(date +%s)

repo=$PWD
tar -C "$work" -xJf .device/bundle.tar.xz || exit 1
bundle=$work/kvprof-device
# kvprof's programs run with the bundle's libraries (Debian's) and CUDA 13's runtime and cuBLAS
# from the machine (its CUDA or PyTorch's wheels) for llama.cpp's CUDA build; everything else
# (nvidia-smi, PyTorch) keeps the machine's own, through wrappers in $work/bin.
library_path=$bundle/lib
for soname in libcudart.so.13 libcublas.so.13 libcublasLt.so.13; do
  found=$(find /usr/local/cuda*/ /usr/local/lib /opt /usr/lib/x86_64-linux-gnu -name "$soname" 2>/dev/null | head -1)
  echo "$soname: ${found:-not found}"
  [ -n "$found" ] && library_path=$library_path:$(dirname "$found")
done
mkdir -p "$work/bin"
for program in kvprof bench_gpu_check bench_sampler; do
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$library_path" "$bundle/bin/$program" >"$work/bin/$program"
  chmod +x "$work/bin/$program"
done
kvprof=$work/bin/kvprof
export NO_COLOR=1 KVPROF_LLAMA_LIB=$bundle/llama-cuda/libllama.so
ln -sf "$(basename "$(ls "$bundle"/llama-cuda/libllama.*.so | head -1)")" "$KVPROF_LLAMA_LIB"
# ggml's CUDA kernels arrive as sm_90 PTX (scripts/prune_fatbin.py): the driver compiles each
# module once, on first use; the cache keeps them for the later steps.
export CUDA_CACHE_PATH=$work/cuda-cache CUDA_CACHE_MAXSIZE=4294967296

# Packs what was measured so far; runs at exit, whatever stopped the script.
pack() {
  echo "== total: $(($(date +%s) - script_start)) s"
  cp "$out_dir/gpu_check.log" "$results/" 2>/dev/null
  tar -C "$work" -czf "$out_dir/gpu_check.tar.gz" gpu_check
  ls -la "$out_dir"
}
trap pack EXIT

# step NAME LIMIT_S COMMAND...: runs COMMAND under a time limit, logging it into commands.txt;
# no step runs past the script's deadline (480 s after its start: the results are packed in time).
deadline=$((script_start + 480))
step() {
  local name=$1 limit=$2
  shift 2
  local left=$((deadline - $(date +%s)))
  if ((left < 10)); then
    echo "== $name: skipped, the script's 480 s are spent"
    printf '%s\tskipped\n' "$name" >>"$results/steps.tsv"
    return 0
  fi
  ((limit > left)) && limit=$left
  local start_ms
  start_ms=$(($(date +%s%N) / 1000000))
  printf '%s\t%s\n' "$name" "$*" >>"$results/commands.txt"
  echo "== $name (limit ${limit} s): $*"
  timeout -k 5 "$limit" "$@"
  local rc=$? elapsed_ms=$(($(date +%s%N) / 1000000 - start_ms))
  echo "== $name: exit $rc after $elapsed_ms ms"
  printf '%s\texit %s\t%s ms\n' "$name" "$rc" "$elapsed_ms" >>"$results/steps.tsv"
  return 0
}

# 0. The machine.
step nvidia-smi 20 nvidia-smi
if [ "$only" = all ]; then
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv >"$results/nvidia_smi.csv" 2>&1
step env 30 sh -c "'$kvprof' env --json > '$results/env.json'"

# 1. NVML against nvidia-smi and cuMemAlloc; the sampler's rate and CPU.
step bench_gpu_check 60 sh -c "'$work/bin/bench_gpu_check' --json > '$results/bench_gpu_check.json'"
step bench_gpu_check_text 60 "$work/bin/bench_gpu_check"
step bench_sampler 60 env KVPROF_NVML_LIBRARY=libnvidia-ml.so.1 "$work/bin/bench_sampler" \
  --benchmark_out="$results/bench_sampler.json" --benchmark_out_format=json
TIMEFORMAT='%R real %U user %S sys'
{ time timeout 30 "$kvprof" sample -o "$results/sample_1ms.csv" --duration 10 --interval-ms 1 \
  --json >"$results/sample_1ms.json"; } 2>"$results/sample_1ms.time"
printf 'sample_1ms\t%s\n' "$kvprof sample -o sample_1ms.csv --duration 10 --interval-ms 1 --json" >>"$results/commands.txt"
echo "== sample at 1 ms: $(cat "$results/sample_1ms.time"); $(($(wc -l <"$results/sample_1ms.csv") - 1)) rows"

# 2. HF transformers in-process.
hf_configs=(tests/fixtures/hf/llama-3.1-8b.json tests/fixtures/hf/qwen2.5-7b.json tests/fixtures/hf/phi-2.json)
step hf_inprocess 180 env PYTHONUNBUFFERED=1 python3 benchmarks/gpu_hf_inprocess.py \
  "$results/hf_inprocess.json" "${hf_configs[@]}" --batches 1,8,32 --prompt-tokens 512,2048 --new-tokens 16
fi

mkdir -p "$work/gguf"
if [ "$only" != moe ]; then
# 3. llama.cpp's CUDA build.
step make_gguf_small 60 "$kvprof" make-gguf -m llama-3.2-1b -o "$work/gguf/llama-3.2-1b-f16.gguf" --type f16
step make_gguf_large 120 "$kvprof" make-gguf -m qwen3-4b -o "$work/gguf/qwen3-4b-f16.gguf" --type f16
for gguf in llama-3.2-1b-f16 qwen3-4b-f16; do
  for fa in on off; do
    step "bench_${gguf}_fa_$fa" 150 sh -c "'$kvprof' bench -m '$work/gguf/$gguf.gguf' -ngl 99 --flash-attn $fa \
      --concurrency 1 4 --prompt-toks 512 --gen-toks 16 -c 8192 --output-dir '$results/bench' \
      --tag ${gguf}_fa_$fa --no-report --json > '$results/bench_${gguf}_fa_$fa.json'"
  done
done

# 4. profile of a launched `kvprof serve` on the GPU, NVML sampled every 10 ms.
step profile_serve 90 "$kvprof" profile \
  --launch "$kvprof serve -m $work/gguf/llama-3.2-1b-f16.gguf -ngl 99 -c 16384 --parallel 4 --metrics --port {port}" \
  --input-lens 512 2048 --output-lens 32 --concurrencies 1 4 --prefix-modes low \
  --gpu-interval-ms 10 --output-dir "$results/profile" --run-tag serve_cuda --no-report
fi

# 5. MoE experts on the host: the experts of the first 24 of 48 layers, of all layers, of layers
# 40-47 by -ot (the engine's own pattern syntax); one short condition each.
step make_gguf_moe 150 "$kvprof" make-gguf -m Qwen/Qwen3-30B-A3B -o "$work/gguf/qwen3-30b-a3b-q4_0.gguf" \
  --type q4_0
moe_offload=("--n-cpu-moe 24" "--cpu-moe" "-ot 'blk\\.(4[0-7])\\.ffn_.*_exps=CPU'")
moe_tag=(n_cpu_moe_24 cpu_moe ot_40_47)
for i in 0 1 2; do
  step "bench_moe_${moe_tag[$i]}" 120 sh -c "'$kvprof' bench -m '$work/gguf/qwen3-30b-a3b-q4_0.gguf' -ngl 99 \
    ${moe_offload[$i]} --flash-attn on --concurrency 1 --prompt-toks 512 --gen-toks 8 -c 8192 \
    --output-dir '$results/bench' --tag moe_${moe_tag[$i]} --no-report --json > '$results/bench_moe_${moe_tag[$i]}.json'"
done

# 6. llama.cpp's own --fit on the GPU: the free memory squeezed by --fit-target to 6 GiB (the MoE
# model: full layers, then part of one more), 2 GiB (dense-only layers) and, for the dense
# model, 4 GiB (its layers) to fill; the free memory it measured is in its first lines.
free_mib=$(nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits | head -1 | tr -d ' ')
echo "free before the fits: ${free_mib:-?} MiB" | tee "$results/fit_free_mib.txt"
fit_cases=("qwen3-30b-a3b-q4_0 6144" "qwen3-30b-a3b-q4_0 2048" "qwen3-4b-f16 4096")
for fit_case in "${fit_cases[@]}"; do
  read -r gguf left <<<"$fit_case"
  [ -f "$work/gguf/$gguf.gguf" ] || continue
  target=$(( (${free_mib:-0} - left) * 1048576 ))
  ((target > 0)) || continue
  step "fit_${gguf}_${left}" 60 sh -c "LD_LIBRARY_PATH='$bundle/llama-cuda:$library_path' \
    '$bundle/bin/llama_fit_report' '$bundle/llama-cuda' '$work/gguf/$gguf.gguf' $target 4096 \
    > '$results/fit_${gguf}_${left}.txt' 2>&1"
done
