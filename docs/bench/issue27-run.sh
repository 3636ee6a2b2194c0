#!/usr/bin/env bash
# Issue 27: POST /v1/consume over HTTP, Stipend's API on PostgreSQL against a
# bare-SQL reference server, spread over 1,000 agents and on one hot agent
# (cmd/storebench -http). It starts a private, durable PostgreSQL (fsync and
# synchronous_commit on, the defaults) on a free loopback port, runs the
# bench, and stops and removes the server. Extra arguments go to storebench.
#
#   docs/bench/issue27-run.sh                      # 5 rounds of 3,000 calls per server and scenario
#   docs/bench/issue27-run.sh -http-rounds 1       # a quick look
#   STOREBENCH=/tmp/storebench-before docs/bench/issue27-run.sh   # a storebench built elsewhere (the store before)
set -euo pipefail
cd "$(dirname "$0")/../.."
bench=${STOREBENCH:-}
if [[ -z "$bench" ]]; then
  bench=$(mktemp -d)/storebench
  go build -o "$bench" ./cmd/storebench
fi
pg_dir=$(mktemp -d)
pg_as=()
if [[ $(id -u) -eq 0 ]]; then
  owner=postgres
  id "$owner" >/dev/null 2>&1 || owner=nobody
  chown "$owner" "$pg_dir"
  pg_as=(runuser -u "$owner" --)
fi
trap '"${pg_as[@]}" pg_ctl -D "$pg_dir/data" -m fast -w stop >/dev/null 2>&1 || true; rm -rf "$pg_dir"' EXIT
"${pg_as[@]}" initdb -D "$pg_dir/data" -U stipend --auth=trust -E UTF8 >/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"${pg_as[@]}" pg_ctl -D "$pg_dir/data" -l "$pg_dir/postgres.log" -w -t 60 \
  -o "-c listen_addresses=127.0.0.1 -p $port -k $pg_dir -c max_connections=100 -c fsync=on -c synchronous_commit=on" start >/dev/null
echo "issue27-run: $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores, PostgreSQL at 127.0.0.1:$port (durable)"
"$bench" -http -postgres-url "postgres://stipend@127.0.0.1:$port/postgres?sslmode=disable" "$@"
