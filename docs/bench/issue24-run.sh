#!/usr/bin/env bash
# Issue 24 before/after. Build first: (cd a checkout of 3d124c0 && go build -o /tmp/bench/cb-before ./cmd/consumebench && go test -c -o /tmp/bench/mem-before ./store/memory), the same from main into cb-after and mem-after.
# Issue 24 before/after: consumebench (one entitlement on 4 instances,
# own entitlements, single-instance hot and spread) and the memory store's
# CheckAndConsume benchmark, built at 3d124c0 (before) and at the refactor
# (after), run in turn on one emulator, the order alternating per round.
set -u
cd /tmp/bench
port=18777
setsid gcloud emulators firestore start --quiet --host-port=127.0.0.1:$port > emulator.log 2>&1 < /dev/null &
pgid=$!
trap 'kill -TERM -- -$pgid 2>/dev/null' EXIT
for _ in $(seq 1 300); do curl -fsS http://127.0.0.1:$port/ >/dev/null 2>&1 && break; sleep 0.2; done
export FIRESTORE_EMULATOR_HOST=127.0.0.1:$port
for r in 1 2 3; do
  if (( r % 2 )); then order="before after"; else order="after before"; fi
  for v in $order; do
    echo "=== round $r $v $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)"
    ./mem-$v -test.run '^$' -test.bench CheckAndConsume -test.benchtime 2s -test.count 2 2>&1 | grep Benchmark
    ./cb-$v -naive=false -calls 2000 -proc-calls 1000 -proc-rounds 1 2>&1
  done
done
