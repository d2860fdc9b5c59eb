#!/usr/bin/env bash
# Hot key (issue 57): one token-bucket key with a limit far above the load, driven at saturation
# (closed loop) through 1 or 3 Sluice replicas on one Redis. For each mode it prints the
# decisions a second, the Redis commands and redis-server CPU per decision (INFO stats and cpu
# around the measured interval), and the lease counters:
#   memory     the embedded memory backend (no Redis): the ceiling
#   redis      Redis, leases off (--redis_lease_rate=0)
#   leases     Redis, leases on (--redis_lease_rate=$LEASE_RATE, 500 by default)
# The modes run interleaved, ROUNDS times (3 by default: memory, redis, leases, memory, ...), so
# that the machine's drift falls on each alike; the last lines give each mode's median and the
# ratios of the medians (decisions/s against memory and against leases off).
# Usage: bench/hot_key.sh [replicas (1)] [seconds (5)]      ROUNDS=N LEASE_RATE=N
# Needs build/bin/sluice and build/bin/sluice-bench (scripts/build or ninja -C build).
set -euo pipefail
cd "$(dirname "$0")/.."
replicas="${1:-1}"
seconds="${2:-5}"
lease_rate="${LEASE_RATE:-500}"
rounds="${ROUNDS:-3}"
bin=build/bin
work="$(mktemp -d)"
redis_port=$((20000 + RANDOM % 10000))
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  redis-cli -p "$redis_port" shutdown nosave >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/hot.yaml" <<'EOF'
domain: hot
descriptors:
  - key: k
    rate_limit:
      algorithm: token_bucket
      unit: second
      requests_per_unit: 100000000
      burst: 100000000
EOF
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --daemonize yes \
  --logfile "$work/redis.log" --dir "$work"
sleep 0.3

redis_cpu() {
  redis-cli -p "$redis_port" INFO cpu | awk -F: '/^used_cpu_(sys|user):/ {s += $2} END {printf "%.6f", s}'
}
redis_commands() {
  redis-cli -p "$redis_port" INFO stats | awk -F: '/^total_commands_processed:/ {printf "%d", $2}'
}

run_mode() {
  local mode="$1"
  local flags=()
  case "$mode" in
    memory) flags=(--backend=memory) ;;
    redis) flags=(--backend=redis "--redis_addresses=127.0.0.1:$redis_port" --redis_lease_rate=0) ;;
    leases) flags=(--backend=redis "--redis_addresses=127.0.0.1:$redis_port"
                   "--redis_lease_rate=$lease_rate" "--replicas_hint=$replicas") ;;
  esac
  local servers=()
  pids=()
  for ((r = 0; r < replicas; r++)); do
    local grpc=$((redis_port + 100 + 2 * r)) http=$((redis_port + 101 + 2 * r))
    "$bin/sluice" "--config=$work/hot.yaml" "--grpc_address=127.0.0.1:$grpc" \
      "--http_address=127.0.0.1:$http" "${flags[@]}" >"$work/sluice-$r.log" 2>&1 &
    pids+=($!)
    servers+=("$grpc:$http")
  done
  sleep 1.5
  local cpu0 commands0
  cpu0="$(redis_cpu)"
  commands0="$(redis_commands)"
  local outs=()
  for s in "${servers[@]}"; do
    "$bin/sluice-bench" "--server=127.0.0.1:${s%%:*}" --domain=hot --key=k --keyspace=1 \
      "--duration=$seconds" --warmup=1 --concurrency=64 --json >"$work/bench-${s%%:*}.json" &
    outs+=($!)
  done
  wait "${outs[@]}"
  local cpu1 commands1
  cpu1="$(redis_cpu)"
  commands1="$(redis_commands)"
  local decisions=0
  for s in "${servers[@]}"; do
    decisions=$((decisions + $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["decisions"])' "$work/bench-${s%%:*}.json")))
  done
  local granted=0 from_leases=0 page value
  for s in "${servers[@]}"; do
    page="$(curl -s "127.0.0.1:${s##*:}/metrics")"
    value="$(echo "$page" | awk '/^sluice_lease_decisions_total / {print $2 + 0}')"
    from_leases=$((from_leases + ${value:-0}))
    value="$(echo "$page" | awk '/^sluice_lease_taken_total[{]result="granted"[}] / {print $2 + 0}')"
    granted=$((granted + ${value:-0}))
  done
  # The measured interval plus the warm-up: Redis' counters ran through both.
  python3 - "$mode" "$replicas" "$decisions" "$seconds" "$cpu0" "$cpu1" "$commands0" "$commands1" \
    "$from_leases" "$granted" "$work/results" <<'EOF'
import sys
mode, replicas, decisions, seconds, cpu0, cpu1, c0, c1, from_leases, granted, results = sys.argv[1:]
decisions, seconds = int(decisions), float(seconds)
# Redis' counters ran through the warm-up too: scale the decisions to the whole span.
span_decisions = decisions * (seconds + 1) / seconds
cpu_us = (float(cpu1) - float(cpu0)) * 1e6
commands = int(c1) - int(c0)
print(f"{mode:7s} replicas {replicas}  decisions/s {decisions / seconds:9.0f}  "
      f"redis commands/decision {commands / span_decisions:7.4f}  "
      f"redis cpu us/decision {cpu_us / span_decisions:7.3f}  "
      f"leases granted {granted}  decided from leases {from_leases}", flush=True)
with open(results, "a") as out:
    out.write(f"{mode} {decisions / seconds} {commands / span_decisions} {cpu_us / span_decisions}\n")
EOF
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait "${pids[@]}" 2>/dev/null || true
  pids=()
}

for ((round = 1; round <= rounds; round++)); do
  for mode in memory redis leases; do
    run_mode "$mode"
  done
done
python3 - "$work/results" "$replicas" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    mode, rate, commands, cpu = line.split()
    rows.setdefault(mode, []).append((float(rate), float(commands), float(cpu)))
median = {m: [statistics.median(r[i] for r in v) for i in range(3)] for m, v in rows.items()}
for m in ("memory", "redis", "leases"):
    rate, commands, cpu = median[m]
    print(f"median {m:7s} replicas {sys.argv[2]}  decisions/s {rate:9.0f}  "
          f"redis commands/decision {commands:7.4f}  redis cpu us/decision {cpu:7.3f}")
print(f"leases/memory decisions/s {median['leases'][0] / median['memory'][0]:.2f}x  "
      f"leases/redis {median['leases'][0] / median['redis'][0]:.2f}x  "
      f"(rounds {len(rows['leases'])}; each round's ratio: " +
      ", ".join(f"{l[0] / m[0]:.2f}" for l, m in zip(rows["leases"], rows["memory"])) + ")")
EOF
