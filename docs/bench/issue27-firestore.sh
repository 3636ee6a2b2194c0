#!/usr/bin/env bash
# Issue 27, Firestore: the spread scenario (cmd/consumebench -mode spread:
# many agents, each with its own entitlement; Stipend's consume without an
# entitlementId against the naive one-transaction consume) for each
# consumebench binary given, in turn, on one private emulator.
#
#   go build -o /tmp/consumebench-after ./cmd/consumebench
#   docs/bench/issue27-firestore.sh /tmp/consumebench-after [/tmp/consumebench-before] [-- consumebench flags]
#
# PASSES=N (default 1) runs the binaries N times over, every other pass in
# reverse order (after, before, before, after, ...), so neither always runs
# on an emulator the other warmed. Each binary is told the emulator's
# process group (-emulator-pgid) to count its CPU per call.
set -euo pipefail
bins=()
while [[ $# -gt 0 && "$1" != "--" ]]; do bins+=("$1"); shift; done
[[ "${1:-}" == "--" ]] && shift
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
log=$(mktemp)
setsid gcloud emulators firestore start --quiet --host-port=127.0.0.1:$port > "$log" 2>&1 < /dev/null &
pgid=$!
trap 'kill -TERM -- -$pgid 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 1 300); do curl -fsS http://127.0.0.1:$port/ >/dev/null 2>&1 && break; sleep 0.2; done
export FIRESTORE_EMULATOR_HOST=127.0.0.1:$port
for pass in $(seq 1 "${PASSES:-1}"); do
  order=("${bins[@]}")
  if (( pass % 2 == 0 )); then
    order=(); for (( i=${#bins[@]}-1; i>=0; i-- )); do order+=("${bins[i]}"); done
  fi
  for b in "${order[@]}"; do
    echo "=== pass $pass: $b, $(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
    "$b" -mode spread -emulator-pgid "$pgid" "$@"
  done
done
