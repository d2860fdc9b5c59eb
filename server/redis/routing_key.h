// Finds the key a Redis command is routed by in a cluster: the key whose hash slot decides
// which node must run it. For most commands that is the first argument after the name
// (GET key, SET key value, INCRBY key n, MGET key ...); for EVAL/EVALSHA/FCALL it is the first
// of the `numkeys` keys, or none if numkeys is 0; a handful of commands name their key second
// (OBJECT ENCODING key, MEMORY USAGE key, XINFO STREAM key, XGROUP CREATE key, BITOP op dest);
// server and connection commands (PING, INFO, SCRIPT, CLUSTER, ASKING, ...) have none.
// Commands not listed are assumed to name their key first: for a multi-key command that is
// correct routing as long as its keys share a slot, which Redis Cluster requires anyway.
//
// Pure functions over a command in RESP form; safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace sluice {

// Where the routing key lies inside one RESP command.
struct RoutingKeyPosition {
  uint32_t offset = 0;  // of the key's first byte, from the start of the command
  uint32_t length = 0;
};

// The position of `resp`'s routing key, or nullopt if the command has none or `resp` does not
// start with a well-formed RESP array of bulk strings.
std::optional<RoutingKeyPosition> FindRoutingKey(std::string_view resp);

}  // namespace sluice
