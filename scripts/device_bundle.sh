#!/usr/bin/env bash
# Builds kvprof, bench_gpu_check and bench_sampler in Release into build-device/ and packs them,
# with every shared library they load except glibc's own, into .device/ (bin/, lib/): a folder a
# bare GPU machine without Debian's packages can run. Both folders are added to .git/info/exclude
# so they stay out of git (and can be carried to the GPU machine as ignored paths). Prints the
# bundle's size and the command to run on the GPU machine. Build jobs: $KVPROF_JOBS (default 1).
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=build-device
bundle_dir=.device
max_bundle_mib=60 # the GPU machine takes at most 64 MiB of carried files
jobs=${KVPROF_JOBS:-1}
targets=(kvprof bench_gpu_check bench_sampler)
binaries=("$build_dir/src/kvprof" "$build_dir/benchmarks/bench_gpu_check" "$build_dir/benchmarks/bench_sampler")
# glibc's libraries: the GPU machine's own (newer) glibc must serve them, never Debian's copies.
glibc_family='^(linux-vdso|linux-gate|ld-linux[^ ]*|libc|libm|libdl|libpthread|librt|libresolv|libutil|libanl|libmvec|libBrokenLocale|libthread_db|libnss_[a-z]+)\.so'

die() {
  echo "device_bundle: $*" >&2
  exit 1
}

# Adds `pattern` to .git/info/exclude unless it is already there.
exclude_once() {
  local exclude_file
  exclude_file=$(git rev-parse --git-path info/exclude)
  mkdir -p "$(dirname "$exclude_file")"
  touch "$exclude_file"
  grep -qxF "$1" "$exclude_file" || echo "$1" >>"$exclude_file"
}

# Prints "soname path" for each shared library `binary` loads, glibc's excluded; fails on a
# library the loader cannot find.
needed_libraries() {
  local out
  out=$(ldd "$1") || die "ldd $1 failed"
  if grep -q "not found" <<<"$out"; then die "$1: $(grep "not found" <<<"$out" | head -1)"; fi
  awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' <<<"$out" | grep -Ev "$glibc_family" || true
}

command -v ninja >/dev/null || die "ninja is not installed (apt-get install ninja-build)"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVPROF_BUILD_TESTS=OFF \
  -DKVPROF_BUILD_BENCH=ON >/dev/null
nice ninja -C "$build_dir" -j "$jobs" "${targets[@]}"

exclude_once "/$bundle_dir/"
exclude_once "/$build_dir/"
rm -rf "$bundle_dir"
mkdir -p "$bundle_dir/bin" "$bundle_dir/lib"
for binary in "${binaries[@]}"; do
  [ -x "$binary" ] || die "$binary was not built"
  cp "$binary" "$bundle_dir/bin/"
  strip "$bundle_dir/bin/$(basename "$binary")"
  while read -r soname path; do
    [ -e "$bundle_dir/lib/$soname" ] || cp -L "$path" "$bundle_dir/lib/$soname"
  done < <(needed_libraries "$binary")
done
chmod u+w "$bundle_dir"/lib/*
strip --strip-unneeded "$bundle_dir"/lib/*

# Every non-glibc library must now resolve inside the bundle.
for binary in "$bundle_dir"/bin/*; do
  while read -r soname path; do
    case "$path" in
      "$PWD/$bundle_dir/lib/"*) ;;
      *) die "$binary: $soname resolves to $path, outside $bundle_dir/lib" ;;
    esac
  done < <(LD_LIBRARY_PATH="$PWD/$bundle_dir/lib" needed_libraries "$binary")
done

bundle_kib=$(du -sk "$bundle_dir" | cut -f1)
((bundle_kib <= max_bundle_mib * 1024)) || die "$bundle_dir is $((bundle_kib / 1024)) MiB, over $max_bundle_mib MiB"
program_count=$(find "$bundle_dir/bin" -type f | wc -l)
library_count=$(find "$bundle_dir/lib" -type f | wc -l)
echo "$bundle_dir: $program_count programs, $library_count libraries, $((bundle_kib / 1024)) MiB ($bundle_kib KiB)"
echo "Carry: $bundle_dir. Command for the GPU machine (run from the repository root):"
# Single quotes: $PWD and $OUT are the GPU machine's.
# shellcheck disable=SC2016
echo 'export LD_LIBRARY_PATH=$PWD/.device/lib; .device/bin/bench_gpu_check --json > $OUT/gpu_check.json; .device/bin/bench_gpu_check; KVPROF_NVML_LIBRARY=libnvidia-ml.so.1 .device/bin/bench_sampler; nvidia-smi; .device/bin/kvprof sample -o $OUT/gpu_mem_trace.csv --duration 3 --interval-ms 1'
