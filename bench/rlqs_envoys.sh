#!/usr/bin/env bash
# RLQS as today's Envoy speaks it (issues 48, 56): emulated Envoys (client/rlqs_emulator.h, Envoy's
# rate_limit_quota filter modelled from its source, 5 s reports unless RLQS_TICK is set) against
# Sluice replicas sharing one Redis, on 100/s buckets. Every Envoy's report timer, and every
# bucket it creates, at a random phase (seed RLQS_SEED, default 1). Scenarios (each prints
# sluice-bench's table: per Envoy demand, max-min share, admitted, ratio, then the totals, the
# token buckets Envoy rebuilt, the abandons (of busy buckets apart) and every stream the server
# ended):
#   steady    8 Envoys (5..300/s) over 3 replicas, 40 s warm-up, 60 s measured
#   churn     4 Envoys of 50/s over 3 replicas, one replaced every 10 s, 60 s measured
#   buckets   4 Envoys over 3 replicas moving their traffic to a new bucket every 10-15 s, 120 s
#   single    4 Envoys (20, 60, 150, 300/s) on one replica (memory backend), 60 s measured
#   tenants   3 Envoys over 3 replicas, each sending 20/s to each of 12 tenants' buckets born at
#             random moments of the first 10 s, 15 s warm-up, 60 s measured
#   renewals  3 Envoys (30, 50, 70/s: 1.5x the limit) over 3 replicas, 180 s measured
#   newcomer  3 Envoys of 60/s over 3 replicas; every 10 s a newcomer of 60/s joins for 5 s:
#             its first second, and everyone's (newcomer-wait: the same with
#             --rlqs_newcomer_waits)
#   bench/rlqs_envoys.sh [BUILD_DIR] [scenario...]      default: build, all but newcomer-wait
# SLUICE_SERVER: another sluice binary to serve (e.g. an older build, to compare).
# Loopback only; every process it starts is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
shift || true
scenarios=("$@")
[ ${#scenarios[@]} -eq 0 ] && scenarios=(steady churn buckets single tenants renewals newcomer)
tick="${RLQS_TICK:-0}"
seed="${RLQS_SEED:-1}"
server_bin="${SLUICE_SERVER:-$build/bin/sluice}"
work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/config"
cat >"$work/config/bench.yaml" <<'YAML'
domain: bench
descriptors:
  - key: route
    rate_limit: {unit: second, requests_per_unit: 100}
YAML
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no \
  --daemonize no >"$work/redis.log" 2>&1 &
pids+=($!)
servers=()
start_replicas() {  # $1: count, $2...: backend flags
  local count="$1"
  shift
  servers=()
  for _ in $(seq "$count"); do
    local grpc http
    grpc=$(free_port)
    http=$(free_port)
    "$server_bin" --config="$work/config" --grpc_address="127.0.0.1:$grpc" \
      --http_address="127.0.0.1:$http" "$@" >>"$work/sluice.log" 2>&1 &
    pids+=($!)
    servers+=("127.0.0.1:$grpc")
  done
  sleep 1.5
}
stop_replicas() {
  for p in "${pids[@]:1}"; do kill "$p" 2>/dev/null || true; done
  pids=("${pids[0]}")
  sleep 0.5
}
run() {  # sluice-bench --rlqs with the replicas started
  "$build/bin/sluice-bench" --domain=bench --rlqs_bucket=route=api --rlqs_limit=100 \
    --rlqs_report_interval="$tick" --rlqs_seed="$seed" \
    --rlqs_servers="$(IFS=,; echo "${servers[*]}")" "$@"
}
redis=(--backend=redis "--redis_addresses=127.0.0.1:$redis_port")
for scenario in "${scenarios[@]}"; do
  echo "== $scenario"
  case "$scenario" in
    steady)
      start_replicas 3 "${redis[@]}"
      run --rlqs=5,10,20,40,60,80,150,300 --warmup=40 --duration=60
      ;;
    churn)
      start_replicas 3 "${redis[@]}"
      run --rlqs=50,50,50,50 --rlqs_churn_every=10 --warmup=20 --duration=60
      ;;
    buckets)
      start_replicas 3 "${redis[@]}"
      run --rlqs=20,40,60,80 --rlqs_new_bucket_every=10 --warmup=0 --duration=120
      ;;
    single)
      start_replicas 1
      run --rlqs=20,60,150,300 --warmup=30 --duration=60
      ;;
    tenants)
      start_replicas 3 "${redis[@]}"
      run --rlqs=20,20,20 --rlqs_tenants=12 --warmup=15 --duration=60
      ;;
    renewals)
      start_replicas 3 "${redis[@]}"
      run --rlqs=30,50,70 --warmup=20 --duration=180
      ;;
    newcomer)
      start_replicas 3 "${redis[@]}"
      run --rlqs=60,60,60 --rlqs_newcomer_every=10 --warmup=20 --duration=120
      ;;
    newcomer-wait)
      start_replicas 3 "${redis[@]}" --rlqs_newcomer_waits
      run --rlqs=60,60,60 --rlqs_newcomer_every=10 --warmup=20 --duration=120
      ;;
    *) echo "unknown scenario $scenario" >&2; exit 2 ;;
  esac
  stop_replicas
done
