#!/usr/bin/env bash
# Sluice CPU per million gateway requests: RLS (a call per request, sluice-bench closed loop) vs
# RLQS (Envoys report every 2 s and enforce locally, sluice-bench --rlqs), one replica on the
# memory backend, one 100/s rule. Prints CPU seconds (user + system, from /proc) per million
# requests the gateways saw.
#   bench/rlqs_vs_rls.sh [BUILD_DIR]      default: build
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
work="$(mktemp -d)"
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$work/config"
cat >"$work/config/bench.yaml" <<'YAML'
domain: bench
descriptors:
  - key: key
    rate_limit: {unit: second, requests_per_unit: 100000000}
  - key: route
    rate_limit: {unit: second, requests_per_unit: 100}
YAML
port=$((20000 + RANDOM % 20000))
"$build/bin/sluice" --config="$work/config" --grpc_address="127.0.0.1:$port" \
  --http_address="127.0.0.1:$((port + 1))" >"$work/sluice.log" 2>&1 &
pid=$!
sleep 1
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
ticks=$(getconf CLK_TCK)

before=$(cpu)
rls=$("$build/bin/sluice-bench" --server="127.0.0.1:$port" --domain=bench --key=key \
  --keyspace=1000 --concurrency=16 --duration=10 --warmup=0 --json)
after=$(cpu)
requests=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["requests"])' "$rls")
echo "RLS:  $requests calls, $(python3 -c "print(round(($after - $before) / $ticks / $requests * 1e6, 2))") CPU s per million requests"

# Ten Envoys at 1,000 requests a second each, 2 s reports, 20 s.
before=$(cpu)
"$build/bin/sluice-bench" --server="127.0.0.1:$port" --domain=bench --rlqs_bucket=route=api \
  --rlqs=1000,1000,1000,1000,1000,1000,1000,1000,1000,1000 --rlqs_limit=100 \
  --rlqs_report_interval=2 --warmup=0 --duration=20 >/dev/null
after=$(cpu)
echo "RLQS: 200000 gateway requests, $(python3 -c "print(round(($after - $before) / $ticks / 200000 * 1e6, 3))") CPU s per million requests"
