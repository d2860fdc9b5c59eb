// Reads the error replies by which Redis Cluster tells a client to go elsewhere or to wait:
//   MOVED <slot> <host:port>   the slot lives on that node now: update the map, resend there;
//   ASK <slot> <host:port>     this one key is being migrated there: send ASKING + the command
//                              there once, keep the map;
//   TRYAGAIN ...               a multi-key command during a migration: retry shortly;
//   CLUSTERDOWN ...            the cluster cannot serve the slot right now (failover): retry;
//   LOADING / MASTERDOWN / READONLY ...  the node cannot serve writes right now (restarting,
//                              lost its master, demoted): refresh the map and retry.
// Anything else (WRONGTYPE, OOM, a script's error) is a real answer for the caller.
// Pure functions; safe from any thread.
#pragma once

#include <string>
#include <string_view>

#include "server/redis/reply.h"

namespace sluice {

enum class ClusterErrorKind {
  kNone,  // not an error, or an error meant for the caller
  kMoved,
  kAsk,
  kTryAgain,
  kClusterDown,
  kNodeNotServing,  // LOADING, MASTERDOWN, READONLY
};

struct ClusterError {
  ClusterErrorKind kind = ClusterErrorKind::kNone;
  // For kMoved and kAsk: the slot and the node to go to, as "host:port" ("[v6]:port").
  int slot = -1;
  std::string address{};
};

// Classifies `reply`. A MOVED/ASK whose host is empty (Redis sends ":port" when it does not know
// the node's address) names `replying_address`'s host. A MOVED/ASK that cannot be parsed is
// kNone, so it reaches the caller rather than sending anything astray.
ClusterError ParseClusterError(const RedisReply& reply, std::string_view replying_address);

// "host:port", with brackets around an IPv6 host, as RedisClientOptions::address expects.
std::string JoinHostPort(std::string_view host, int port);

}  // namespace sluice
