#!/usr/bin/env bash
# Installs the Debian 12 packages kvprof builds with, when any is missing. As root it runs
# apt-get; otherwise it prints the exact apt-get line and exits 1. With --tests it also installs
# what only the test suite uses: Slurm and munge for the single-node cluster the sweep's Slurm
# tests start (scripts/slurm-cluster.sh).
set -euo pipefail

packages=(
  g++ cmake ninja-build pkg-config git
  libfmt-dev nlohmann-json3-dev libyaml-cpp-dev libcli11-dev
  libcurl4-openssl-dev libssl-dev libboost-dev libsqlite3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  prometheus
  libcairo2-dev fonts-dejavu-core libjs-chart.js chromium curl jq
)
if [ "${1:-}" = "--tests" ]; then
  packages+=(slurmctld slurmd slurm-client munge)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# npm fetches the prebuilt libllama (scripts/fetch_llama.sh), playwright-core for the report's
# browser test and the OpenAI SDK for the servers' client test (scripts/fetch_node_deps.sh);
# Node.js from elsewhere may already bring its own npm.
if ! command -v npm >/dev/null 2>&1; then
  missing+=(npm)
fi

fetch() {
  bash "$(dirname "$0")/fetch_llama.sh"
  # The tests also drive (or see refused) older libllama releases.
  if [ "${1:-}" = "--tests" ]; then bash "$(dirname "$0")/fetch_llama_releases.sh"; fi
  bash "$(dirname "$0")/fetch_node_deps.sh"
}

if [ ${#missing[@]} -eq 0 ]; then
  fetch "${1:-}"
  exit 0
fi

line="apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "kvprof needs these Debian packages: ${missing[*]}" >&2
  echo "run as root:  $line" >&2
  exit 1
fi
echo "== installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
fetch "${1:-}"
