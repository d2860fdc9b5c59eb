#!/bin/sh
# Forms a Redis Cluster out of blank nodes, or joins blank nodes to the cluster that exists.
# Idempotent: run it again any time; a formed cluster is left as it is.
#   REDIS_NODES="host1 host2 ..."   every node, by name (required)
#   REDIS_PORT=6379  REDIS_CLUSTER_REPLICAS=1  REDIS_WAIT_SECONDS=300
# Used by the Job in k8s/overlays/redis-cluster and by the redis-cluster-init service of
# docker-compose.yml. Needs redis-cli and getent (the redis:7.0 image has both).
set -eu

: "${REDIS_NODES:?REDIS_NODES must list every node by name}"
port="${REDIS_PORT:-6379}"
replicas="${REDIS_CLUSTER_REPLICAS:-1}"
wait_seconds="${REDIS_WAIT_SECONDS:-300}"
say() { echo "redis-cluster-init: $*" >&2; }

# CLUSTER MEET takes IP addresses, not names: resolve each node first (an IPv4 address is
# taken as it is).
resolve() {
  case "$1" in
    *[!0-9.]*) getent hosts "$1" | awk '{ print $1; exit }' ;;
    *) echo "$1" ;;
  esac
}
# One field of CLUSTER INFO on ADDRESS (HOST:PORT).
info_field() {
  redis-cli -h "${1%:*}" -p "${1##*:}" cluster info | tr -d '\r' | awk -F: -v f="$2" '$1 == f { print $2 }'
}

# Runs COMMAND every STEP seconds until it succeeds; after $wait_seconds, says WHAT and fails.
wait_until() {
  what="$1" step="$2"
  shift 2
  waited=0
  until "$@"; do
    if [ "$waited" -ge "$wait_seconds" ]; then
      say "$what after ${wait_seconds}s"
      exit 1
    fi
    sleep "$step"
    waited=$((waited + step))
  done
}
# HOST resolves and answers PING; leaves its address in $ip.
node_answers() {
  ip="$(resolve "$1" || true)"
  [ -n "$ip" ] && [ "$(redis-cli -h "$ip" -p "$port" ping 2>/dev/null)" = "PONG" ]
}
cluster_ok() { [ "$(info_field "$1" cluster_state)" = "ok" ]; }

# Every node must answer before anything is decided: pods and containers start in any order.
addresses=""
for host in $REDIS_NODES; do
  wait_until "$host:$port does not answer" 2 node_answers "$host"
  addresses="$addresses $ip:$port"
done

# A member knows other nodes or serves slots; a blank node knows only itself.
member=""
blank=""
for address in $addresses; do
  known="$(info_field "$address" cluster_known_nodes)"
  assigned="$(info_field "$address" cluster_slots_assigned)"
  if [ "${known:-1}" -gt 1 ] || [ "${assigned:-0}" -gt 0 ]; then
    member="${member:-$address}"
  else
    blank="$blank $address"
  fi
done

if [ -z "$member" ]; then
  say "creating a cluster of$addresses, $replicas replica(s) per master"
  # shellcheck disable=SC2086 # one argument per address
  redis-cli --cluster create $addresses --cluster-replicas "$replicas" --cluster-yes
elif [ -n "$blank" ]; then
  # A node that lost its nodes.conf (a new volume) comes back blank: it rejoins as a replica of
  # the master with the fewest replicas.
  for address in $blank; do
    say "joining blank node $address to the cluster of $member as a replica"
    redis-cli --cluster add-node "$address" "$member" --cluster-slave
  done
else
  say "every node already belongs to the cluster: nothing to do"
fi

# Done when every node serves the whole slot map.
for address in $addresses; do
  wait_until "$address: cluster_state is not ok" 1 cluster_ok "$address"
done
say "cluster ready:$addresses"
