#!/usr/bin/env bash
# Builds kvprof, bench_gpu_check and bench_sampler in Release into build-device/ (and the tests'
# llama_fit_report) and packs them,
# with every shared library they load except glibc's own, into .device/bundle.tar.xz (bin/,
# lib/): what a bare GPU machine without Debian's packages can run. With them, llama.cpp's CUDA
# build (@node-llama-cpp/linux-x64-cuda, CUDA 13.1) in llama-cuda/, its GPU code cut to one
# architecture ($KVPROF_DEVICE_CUDA_ARCH, default 90: H100/H200) by scripts/prune_fatbin.py and
# made loadable by a CUDA 13.0 driver (machine code compiled here by CUDA 13.0's ptxas where it is
# installed, else PTX lowered to ISA 9.0), so that it fits the 64 MiB the GPU machine takes (159
# MB whole) and runs there; scripts/gpu_check.sh unpacks the bundle. Both folders are added to
# .git/info/exclude so they stay out of git (and can be carried to the GPU machine as ignored
# paths). Prints the bundle's size and the command to run on the GPU machine. Build jobs:
# $KVPROF_JOBS (default 1).
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=build-device
bundle_dir=.device
max_bundle_mib=44 # the GPU machine takes 64 MiB: the working tree (~15 MiB) and this
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
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
unpacked=$staging/kvprof-device # what gpu_check.sh unpacks on the GPU machine
mkdir -p "$unpacked/bin" "$unpacked/lib" "$unpacked/llama-cuda"
for binary in "${binaries[@]}"; do
  [ -x "$binary" ] || die "$binary was not built"
  cp "$binary" "$unpacked/bin/"
  strip "$unpacked/bin/$(basename "$binary")"
  while read -r soname path; do
    [ -e "$unpacked/lib/$soname" ] || cp -L "$path" "$unpacked/lib/$soname"
  done < <(needed_libraries "$binary")
done
chmod u+w "$unpacked"/lib/*
strip --strip-unneeded "$unpacked"/lib/*

# Every non-glibc library must now resolve inside the bundle.
for binary in "$unpacked"/bin/*; do
  while read -r soname path; do
    case "$path" in
      "$unpacked/lib/"*) ;;
      *) die "$binary: $soname resolves to $path, outside the bundle's lib/" ;;
    esac
  done < <(LD_LIBRARY_PATH="$unpacked/lib" needed_libraries "$binary")
done

# llama.cpp's CUDA build, one architecture's GPU code kept.
cuda_arch=${KVPROF_DEVICE_CUDA_ARCH:-90}
cuda_package=.deps/llama/linux-x64-cuda
KVPROF_LLAMA_PACKAGE=@node-llama-cpp/linux-x64-cuda bash scripts/fetch_llama.sh
[ -f "$cuda_package/libggml-cuda.so" ] || die "$cuda_package/libggml-cuda.so was not fetched"
for file in "$cuda_package"/*.so "$cuda_package"/_nlcBuildMetadata.json "$cuda_package"/package.json; do
  case "$(basename "$file")" in
    libggml-cuda.so) ;; # pruned below
    *) cp "$file" "$unpacked/llama-cuda/" ;;
  esac
done
# llama.cpp's own --fit (common_fit_params of llama-common), run by gpu_check.sh step 6: a
# program of the tests that needs only libdl, built here.
c++ -std=c++20 -O2 -Wall -Wextra tests/llama_c_api/llama_fit_report.cpp -o "$unpacked/bin/llama_fit_report" -ldl
strip "$unpacked/bin/llama_fit_report"
command -v zstd >/dev/null || die "zstd is not installed (apt-get install zstd): the CUDA build's PTX is zstd-compressed"
# With CUDA 13.0's ptxas here ($KVPROF_PTXAS, else /usr/local/cuda's), the PTX becomes machine code
# now (cached in .deps/llama/sass-sm<arch>/): the GPU then compiles nothing at load.
ptxas=${KVPROF_PTXAS:-/usr/local/cuda/bin/ptxas}
sass=()
if [ -x "$ptxas" ] && "$ptxas" --version | grep -q "release 13\.0"; then
  sass=(--sass "$ptxas" ".deps/llama/sass-sm$cuda_arch")
  echo "== compiling the sm_$cuda_arch PTX with $ptxas (cached; the first time takes ~15 minutes)"
fi
python3 scripts/prune_fatbin.py "$cuda_package/libggml-cuda.so" "$cuda_arch" \
  "$unpacked/llama-cuda/libggml-cuda.so" --lower-ptx-isa "${sass[@]}"

rm -rf "$bundle_dir"
mkdir -p "$bundle_dir"
tar -C "$staging" -cf - kvprof-device | xz -T0 -6 >"$bundle_dir/bundle.tar.xz"
bundle_kib=$(du -sk "$bundle_dir" | cut -f1)
((bundle_kib <= max_bundle_mib * 1024)) || die "$bundle_dir is $((bundle_kib / 1024)) MiB, over $max_bundle_mib MiB"
program_count=$(find "$unpacked/bin" -type f | wc -l)
library_count=$(find "$unpacked/lib" -type f | wc -l)
echo "$bundle_dir/bundle.tar.xz: $program_count programs, $library_count libraries, llama.cpp's CUDA build (sm_$cuda_arch); $((bundle_kib / 1024)) MiB ($bundle_kib KiB)"
echo "Carry: $bundle_dir. Command for the GPU machine (run from the repository root):"
# Single quotes: $OUT is the GPU machine's.
# shellcheck disable=SC2016
echo 'bash scripts/gpu_check.sh $OUT'
