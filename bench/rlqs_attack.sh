#!/usr/bin/env bash
# Issue 47's attacks on the quota service (RLQS), each against a fresh Sluice, measured from
# outside: the server's RSS, /healthcheck latency, and whether a well-behaved client beside the
# attacker still gets a token bucket.
#
#   bench/rlqs_attack.sh [--sluice=PATH] [--tools=DIR] [--attacks=1,1b,2,3,4,4b] [--seconds=45]
#                        [--hold=30] [--rss-cap-mb=8192] [--label=NAME] [--keep]
#
# --sluice: the server binary (build/bin/sluice); --tools: where sluice-rlqs-attack and sluicectl
# are (${BUILD_DIR:-build}/bin). For each attack: Sluice on two free 127.0.0.1 ports with default
# flags (memory backend) and a config of its own (domain edge: each tenant value a 100/s bucket);
# sluice-rlqs-attack (bench/rlqs_attack_main.cc) from 127.0.0.2 (127.0.0.2-6 for 1b and 4b), so
# that the real client, from 127.0.0.1, is another peer, as on a real network:
#   1   nonreading    2 streams x 180 buckets of 32 pairs of 1 KiB, never reading, --seconds
#   1b  nonreading    500 streams x 7 such buckets from 5 source addresses: each stream's
#                     answers under the pending cap, and the ids under the state budgets
#   2   large_ids     1 stream, 5,000 buckets of 32 pairs of 1 KiB, --seconds
#   3   many_buckets  100 streams x 10,000 one-pair buckets, --seconds
#   4   hold_slots    streams opened until refused, filled until refused, held --hold seconds
#   4b  hold_slots    the same from 5 source addresses
# Meanwhile: Sluice's VmRSS every 0.5 s (/proc/PID/status; Sluice is killed if it passes
# --rss-cap-mb, and the row says so), GET /healthcheck every second (curl's time_total; 10 s
# without an answer counts as 10,000 ms), and once, 8 s before the attack ends (attack 4: when
# its streams are filled), `sluicectl quota edge tenant=real --rate=10 --duration=3s`: served
# when it exits 0 having printed a token_bucket. The attacker's streams close when it exits; the
# RSS 10 s later is the "after" figure. Prints one Markdown table; every process started here is
# stopped on exit. Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."

sluice=build/bin/sluice
tools="${BUILD_DIR:-build}/bin"
attacks=1,1b,2,3,4,4b
seconds=45
hold=30
rss_cap_mb=8192
label=""
keep=0
for arg in "$@"; do
  case "$arg" in
    --sluice=*) sluice="${arg#*=}" ;;
    --tools=*) tools="${arg#*=}" ;;
    --attacks=*) attacks="${arg#*=}" ;;
    --seconds=*) seconds="${arg#*=}" ;;
    --hold=*) hold="${arg#*=}" ;;
    --rss-cap-mb=*) rss_cap_mb="${arg#*=}" ;;
    --label=*) label="${arg#*=}" ;;
    --keep) keep=1 ;;
    *) echo "bench/rlqs_attack.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done
for binary in "$sluice" "$tools/sluice-rlqs-attack" "$tools/sluicectl"; do
  [ -x "$binary" ] || { echo "bench/rlqs_attack.sh: $binary is not built" >&2; exit 2; }
done

work="$(mktemp -d "${TMPDIR:-/tmp}/sluice-rlqs-attack.XXXXXX")"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  sleep 0.5
  for pid in "${pids[@]}"; do
    kill -9 "$pid" 2>/dev/null || true
  done
  if [ "$keep" = 1 ]; then
    echo "logs kept in $work" >&2
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT

mkdir -p "$work/config"
cat >"$work/config/edge.yaml" <<'EOF'
domain: edge
descriptors:
  - key: tenant
    rate_limit: {unit: second, requests_per_unit: 100}
EOF

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
now() { date +%s.%N; }
kb() { awk -v k="$1" '$1 == k":" {print $2}' "/proc/$2/status" 2>/dev/null || true; }
mb() { [ -n "$1" ] && awk -v k="$1" 'BEGIN {printf "%d", k / 1024}' || printf -- "-"; }

rows=()
run_attack() {
  local name="$1" attack="$2"
  shift 2
  local dir="$work/$name"
  mkdir -p "$dir"
  local grpc_port http_port
  grpc_port="$(free_port)"
  http_port="$(free_port)"
  "$sluice" --config="$work/config" --grpc_address="127.0.0.1:$grpc_port" \
    --http_address="127.0.0.1:$http_port" >"$dir/sluice.log" 2>&1 &
  local spid=$!
  pids+=("$spid")
  local up=0
  for _ in $(seq 100); do
    if curl -sf -o /dev/null --max-time 1 "http://127.0.0.1:$http_port/healthcheck"; then
      up=1
      break
    fi
    sleep 0.1
  done
  if [ "$up" = 0 ]; then
    echo "bench/rlqs_attack.sh: $name: Sluice did not start (log: $dir/sluice.log)" >&2
    cat "$dir/sluice.log" >&2
    exit 1
  fi
  sleep 1
  local rss_start
  rss_start="$(kb VmRSS "$spid")"

  # Sampler: VmRSS every 0.5 s; past the cap, Sluice is killed.
  (
    while kill -0 "$spid" 2>/dev/null; do
      rss="$(kb VmRSS "$spid")"
      [ -n "$rss" ] || break
      echo "$(now) $rss" >>"$dir/rss"
      if [ "$rss" -gt $((rss_cap_mb * 1024)) ]; then
        echo "$rss" >"$dir/killed"
        kill -9 "$spid" 2>/dev/null || true
        break
      fi
      sleep 0.5
    done
  ) &
  local sampler=$!
  pids+=("$sampler")

  local start
  start="$(now)"
  "$tools/sluice-rlqs-attack" --server="127.0.0.1:$grpc_port" --attack="$attack" "$@" \
    >"$dir/attack.out" 2>"$dir/attack.err" &
  local apid=$!
  pids+=("$apid")

  # Health checks every second while the attacker runs.
  : >"$dir/health"
  (
    while kill -0 "$apid" 2>/dev/null; do
      t="$(curl -sf -o /dev/null -w '%{time_total}' --max-time 10 \
        "http://127.0.0.1:$http_port/healthcheck")" || t=10
      echo "$t" >>"$dir/health"
      sleep 1
    done
  ) &
  local checker=$!
  pids+=("$checker")

  # The real client: when the attacker's streams are filled (attack 4) or 8 s before the end
  # (whatever the attacker has sent by then).
  while kill -0 "$apid" 2>/dev/null; do
    if [ "$attack" = hold_slots ]; then
      grep -q '^ready$' "$dir/attack.out" && break
    elif awk -v n="$(now)" -v s="$start" -v d="$seconds" 'BEGIN {exit !(n >= s + d - 8)}'; then
      break
    fi
    sleep 0.2
  done
  local real_rc=0
  timeout 30 "$tools/sluicectl" --server="127.0.0.1:$grpc_port" quota edge tenant=real \
    --rate=10 --duration=3s >"$dir/real.out" 2>"$dir/real.err" || real_rc=$?
  local real
  if [ "$real_rc" = 0 ] && grep -q token_bucket "$dir/real.out"; then
    real="yes"
  elif [ "$real_rc" = 0 ]; then
    real="no: no assignment in 3 s"
  else
    real="no: $(tail -1 "$dir/real.err" | sed 's/^sluicectl quota: //' | cut -c1-110)"
  fi
  if ! kill -0 "$apid" 2>/dev/null; then
    real="$real (attacker already gone)"
  fi

  # The attacker ends by itself (--seconds; attack 4: --hold after filling); a hard stop after.
  local waited=0
  while kill -0 "$apid" 2>/dev/null && [ "$waited" -lt $((seconds * 4 + 300)) ]; do
    sleep 1
    waited=$((waited + 1))
  done
  kill "$apid" 2>/dev/null || true
  wait "$apid" 2>/dev/null || true
  wait "$checker" 2>/dev/null || true
  local ran
  ran="$(awk -v s="$start" -v n="$(now)" 'BEGIN {printf "%.0f", n - s}')"

  # Ten seconds after the streams closed.
  sleep 10
  local rss_after hwm streams_left state_left
  rss_after="$(kb VmRSS "$spid")"
  hwm="$(kb VmHWM "$spid")"
  streams_left="$(curl -s --max-time 10 "http://127.0.0.1:$http_port/metrics" |
    awk '$1 == "sluice_rlqs_streams" {print $2}' || true)"
  state_left="$(curl -s --max-time 10 "http://127.0.0.1:$http_port/metrics" |
    awk '$1 == "sluice_rlqs_state_bytes" {print $2}' || true)"
  kill "$sampler" 2>/dev/null || true
  wait "$sampler" 2>/dev/null || true
  kill "$spid" 2>/dev/null || true
  for _ in $(seq 100); do
    kill -0 "$spid" 2>/dev/null || break
    sleep 0.1
  done
  kill -9 "$spid" 2>/dev/null || true
  wait "$spid" 2>/dev/null || true

  local peak health_max health_n stopped summary killed=""
  peak="$(awk 'BEGIN {m = 0} $2 > m {m = $2} END {print m}' "$dir/rss")"
  [ -z "$hwm" ] || [ "$hwm" -lt "$peak" ] || peak="$hwm"
  health_max="$(awk 'BEGIN {m = 0} $1 > m {m = $1} END {printf "%.1f", m * 1000}' "$dir/health")"
  health_n="$(wc -l <"$dir/health")"
  summary="$(grep '^summary:' "$dir/attack.out" || true)"
  if [ -f "$dir/killed" ]; then
    killed="Sluice killed at $(mb "$(cat "$dir/killed")") MB (> --rss-cap-mb); "
    rss_after=""
  fi
  stopped="$(echo "$summary" | tr ' ' '\n' | awk -F= '
    $1 == "ended" {ended = $2} $1 == "first_end" {first = $2} $1 == "open_at_end" {open = $2}
    $1 == "opened" {opened = $2}
    END {
      gsub(/,/, ", ", ended); gsub(/:/, " x", ended)
      s = opened " opened; ended by the server: " ended
      if (ended != "none") s = s " (first at " first " s)"
      print s "; " open " open at the end"
    }')"
  local flags
  flags="$(grep -o -- '--rlqs_[a-z_]*' "$dir/attack.out" | sort | uniq | paste -sd, - || true)"
  if grep -q 'status not delivered' "$dir/attack.out"; then
    flags="${flags:+$flags, }writes failed, status not delivered"
  fi
  if grep -q '"Cancelled on the server side"' "$dir/attack.out"; then
    flags="${flags:+$flags, }cancelled by the server"
  fi
  [ -z "$flags" ] || stopped="$stopped [$flags]"
  [ -n "$summary" ] || stopped="no summary (attacker killed?)"
  local after_cell
  after_cell="$(mb "$rss_after")"
  if [ -n "$streams_left" ]; then
    after_cell="$after_cell (streams $streams_left${state_left:+, state $state_left B})"
  fi
  rows+=("| $name | $(mb "$rss_start") | $(mb "$peak") | $after_cell | $health_max ($health_n) |\
 $real | ${killed}${stopped}; ${ran} s |")
  echo "$name done: peak $(mb "$peak") MB, after $(mb "$rss_after") MB," \
    "health max $health_max ms, real client: $real" >&2
  echo "  $(grep -v '^summary:\|^ready$' "$dir/attack.out" | tr '\n' ' ' | cut -c1-400)" >&2
}

IFS=, read -r -a list <<<"$attacks"
for a in "${list[@]}"; do
  case "$a" in
    1) run_attack "1. non-reading" nonreading --seconds="$seconds" ;;
    1b) run_attack "1b. non-reading, 500 streams, 5 peers" nonreading --seconds="$seconds" \
      --streams=500 --buckets=7 --sources=5 ;;
    2) run_attack "2. large ids" large_ids --seconds="$seconds" ;;
    3) run_attack "3. many buckets" many_buckets --seconds="$seconds" ;;
    4) run_attack "4. one peer holds every slot" hold_slots --hold="$hold" ;;
    4b) run_attack "4b. five peers hold every slot" hold_slots --hold="$hold" --sources=5 ;;
    *) echo "bench/rlqs_attack.sh: unknown attack $a (1, 1b, 2, 3, 4, 4b)" >&2; exit 2 ;;
  esac
done

echo
[ -z "$label" ] || echo "$label ($sluice)"
echo "| attack | RSS at start MB | peak RSS MB | RSS 10 s after close MB |" \
  "/healthcheck max ms (samples) | real client served |" \
  "attacker: streams, how they ended; time |"
echo "|---|---|---|---|---|---|---|"
for row in "${rows[@]}"; do
  echo "$row"
done
