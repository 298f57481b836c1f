#!/usr/bin/env bash
# Builds kvprof and its whole test suite with sanitizers and runs it: `address` (ASan + UBSan +
# LeakSanitizer) into build-asan/, `thread` (TSan) into build-tsan/.
#   bash scripts/sanitize.sh [address|thread|all] [ctest arguments...]
# Every sanitizer report of every process (the test binary, and each kvprof it starts) goes to
# <build>/sanitizer-logs/; the run fails when any report was written, even where a test passed.
# Suppressions are in scripts/sanitizers/*.supp, each with the reason it is there.
set -euo pipefail
cd "$(dirname "$0")/.."
which=${1:-all}
shift || true
case "$which" in
  address | thread) kinds=("$which") ;;
  all) kinds=(address thread) ;;
  *)
    echo "usage: scripts/sanitize.sh [address|thread|all] [ctest arguments...]" >&2
    exit 2
    ;;
esac
bash scripts/setup.sh >/dev/null
supp=$PWD/scripts/sanitizers
status=0
for kind in "${kinds[@]}"; do
  if [ "$kind" = address ]; then
    dir=build-asan sanitize=address,undefined timeout_s=1200
  else
    dir=build-tsan sanitize=thread timeout_s=3000
  fi
  echo "== $sanitize: building into $dir/"
  KVPROF_BUILD_DIR=$dir bash scripts/build.sh -DKVPROF_WERROR=ON -DKVPROF_BUILD_TESTS=ON \
    -DKVPROF_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" -DKVPROF_SANITIZE=$sanitize \
    -DKVPROF_TEST_TIMEOUT_S=$timeout_s
  logs=$PWD/$dir/sanitizer-logs
  rm -rf "$logs" && mkdir -p "$logs"
  common="log_path=$logs/report:print_suppressions=0"
  # handle_segv=0: the engine tests kill a bench worker with SIGSEGV "as if libllama crashed" and
  # check that kvprof reports the signal; ASan and TSan would turn it into a report and exit
  # instead. A real segfault still kills the process by signal, and its test fails.
  export ASAN_OPTIONS="$common:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:handle_segv=0"
  export LSAN_OPTIONS="$common:suppressions=$supp/lsan.supp"
  export UBSAN_OPTIONS="$common:print_stacktrace=1:halt_on_error=1:suppressions=$supp/ubsan.supp"
  export TSAN_OPTIONS="$common:halt_on_error=1:second_deadlock_stack=1:handle_segv=0:suppressions=$supp/tsan.supp"
  export KVPROF_REQUIRE_LLAMA=1 KVPROF_REQUIRE_PROMETHEUS=1 KVPROF_REQUIRE_BROWSER=1
  started=$(date +%s)
  rc=0
  (cd "$dir" && ctest --output-on-failure -j "$(nproc)" --timeout "$timeout_s" "$@") || rc=$?
  echo "== $sanitize: ctest exit $rc after $(($(date +%s) - started)) s"
  reports=$(find "$logs" -type f | wc -l)
  if [ "$reports" -gt 0 ]; then
    echo "== $sanitize: $reports sanitizer report(s) in $logs:"
    for f in "$logs"/*; do
      echo "--- $f" && head -40 "$f"
    done
    rc=1
  fi
  [ "$rc" -eq 0 ] || status=1
done
exit $status
