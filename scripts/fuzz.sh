#!/usr/bin/env bash
# Fuzzes kvprof's parsers of outside data: scripts/fuzz.sh [SECONDS] [TARGET...]
#
# Installs clang 16 and its sanitizer/libFuzzer runtime when missing (Debian packages, as root),
# builds every fuzz/<name>_fuzz.cpp with ASan + UBSan into build-fuzz/, runs each target for
# SECONDS (default 60) from its checked-in corpus tests/corpus/<name>/ (new inputs go to
# build-fuzz/corpus/<name>/, never into the repository) and prints per target the executions,
# the coverage (edges), the corpus size and any finding. Each crash, leak, timeout or sanitizer
# report is minimized and copied to tests/corpus/<name>/regressions/, which the normal test suite
# replays (fuzz_replay_<name>), so a finding stays fixed once fixed. Exit 1 when anything was found.
# KVPROF_FUZZ_JOBS (default 1) runs that many targets at once; KVPROF_FUZZ_RUNS (default
# 10000000) ends a target after that many executions even before SECONDS. The long campaign:
#   bash scripts/fuzz.sh 3600     (every target 10 million executions or one hour)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

seconds=60
if [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; then
  seconds=$1
  shift
fi

need=()
command -v clang++-16 >/dev/null 2>&1 || need+=(clang-16)
[ -e /usr/lib/llvm-16/lib/clang/16/lib/linux/libclang_rt.fuzzer-x86_64.a ] || need+=(libclang-rt-16-dev)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "fuzz.sh needs: ${need[*]}; run as root: apt-get install -y ${need[*]}" >&2
    exit 1
  fi
  echo "== installing ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
bash scripts/setup.sh >/dev/null

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in fuzz/*_fuzz.cpp; do
    n=$(basename "$f" .cpp)
    targets+=("${n%_fuzz}")
  done
fi
for t in "${targets[@]}"; do
  if [ ! -f "fuzz/${t}_fuzz.cpp" ]; then
    echo "fuzz.sh: no fuzz target '$t' (fuzz/${t}_fuzz.cpp)" >&2
    exit 2
  fi
done

build=build-fuzz
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
if [ ! -f "$build/CMakeCache.txt" ]; then
  # One object per file: the unity build (the default) is checked with GCC, not yet with clang.
  CC=clang-16 CXX=clang++-16 cmake -S . -B "$build" "${generator[@]}" -DKVPROF_BUILD_FUZZ=ON \
    -DKVPROF_BUILD_TESTS=OFF -DKVPROF_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_UNITY_BUILD=OFF >/dev/null
fi
echo "== building ${targets[*]}"
cmake --build "$build" -j "${KVPROF_JOBS:-$(nproc)}" --target "${targets[@]/%/_fuzz}" >/dev/null

run_one() {
  local t=$1
  local work="$build/corpus/$t" artifacts="$build/artifacts/$t/" log="$build/logs/$t.log"
  mkdir -p "$work" "$artifacts" "$(dirname "$log")" "tests/corpus/$t"
  rm -f "$artifacts"/*
  # -rss_limit_mb keeps a runaway allocation a finding, not the machine's problem.
  "$build/fuzz/${t}_fuzz" "$work" "tests/corpus/$t" -max_total_time="$seconds" \
    -runs="${KVPROF_FUZZ_RUNS:-10000000}" \
    -artifact_prefix="$artifacts" -print_final_stats=1 -rss_limit_mb=2048 -timeout=25 \
    >"$log" 2>&1 || true
}

jobs=${KVPROF_FUZZ_JOBS:-1}
echo "== fuzzing ${#targets[@]} targets for ${seconds} s or ${KVPROF_FUZZ_RUNS:-10000000} executions each, ${jobs} at a time"
running=0
for t in "${targets[@]}"; do
  run_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
done
wait

found=0
printf '%-16s %14s %10s %8s %8s  %s\n' target executions exec/s edges corpus findings
for t in "${targets[@]}"; do
  log="$build/logs/$t.log"
  execs=$(grep -oE 'stat::number_of_executed_units: +[0-9]+' "$log" | awk '{print $2}' | tail -1)
  rate=$(grep -oE 'stat::average_exec_per_sec: +[0-9]+' "$log" | awk '{print $2}' | tail -1)
  edges=$(grep -o 'cov: [0-9]*' "$log" | awk '{print $2}' | tail -1)
  corpus=$(find "$build/corpus/$t" "tests/corpus/$t" -type f | wc -l)
  findings=()
  for a in "$build/artifacts/$t"/*; do
    [ -e "$a" ] || continue
    name=$(basename "$a")
    dest="tests/corpus/$t/regressions/$name"
    mkdir -p "tests/corpus/$t/regressions"
    # A smaller input that still fails, when libFuzzer can find one in a minute.
    if "$build/fuzz/${t}_fuzz" -minimize_crash=1 -max_total_time=60 -runs=100000 \
      -exact_artifact_path="$dest" "$a" >/dev/null 2>&1 && [ -s "$dest" ]; then
      :
    else
      cp "$a" "$dest"
    fi
    findings+=("$dest")
    found=1
  done
  if grep -q "ERROR: AddressSanitizer\|runtime error:\|ERROR: libFuzzer" "$log" && [ ${#findings[@]} -eq 0 ]; then
    findings+=("see $log")
    found=1
  fi
  printf '%-16s %14s %10s %8s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "${edges:-?}" "$corpus" \
    "${findings[*]:-none}"
done
echo "logs: $root/$build/logs/"
exit $found
