// The Lua scripts the Redis backend calls, registered with a Redis client's script cache and
// looked up by what they decide: an algorithm's single-key and batch scripts, the group script
// and give_back. lua/CMakeLists.txt composes them; lua/README.md is their calling contract.
// Immutable once created; safe from any thread.
#pragma once

#include <array>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "lua/lua_scripts.h"
#include "server/algorithm/algorithm.h"
#include "server/redis/script_cache.h"

namespace sluice {

class ScriptSet {
 public:
  // Registers every script of `scripts` with `cache` (before any connection exists, every
  // connection loads them in its handshake, so the first requests never meet NOSCRIPT).
  // kInternal if one is missing: each algorithm but the fixed window needs "<algorithm>" and
  // "<algorithm>_batch" (a lone fixed window needs no script), and "group" and "give_back" must
  // be there. Scripts of other names are registered but have no role here.
  static absl::StatusOr<ScriptSet> Register(absl::Span<const LuaScript> scripts,
                                            ScriptCache& cache);

  // Decides one key of `algorithm`. REQUIRES: algorithm is not kFixedWindow.
  const RedisScript& single_key(Algorithm algorithm) const {
    return *single_key_[static_cast<size_t>(Engine(algorithm))];
  }
  // Decides several independent keys of `algorithm`, one after the other.
  // REQUIRES: algorithm is not kFixedWindow.
  const RedisScript& batch(Algorithm algorithm) const {
    return *batch_[static_cast<size_t>(Engine(algorithm))];
  }
  // The script for `keys` lone checks of `algorithm`: the batch script for more than one.
  const RedisScript& for_lone_checks(Algorithm algorithm, size_t keys) const {
    return keys > 1 ? batch(algorithm) : single_key(algorithm);
  }
  // Decides keys of any algorithms all-or-nothing.
  const RedisScript& group() const { return *group_; }
  // Gives a denied lone fixed window's hits back to its window key.
  const RedisScript& give_back() const { return *give_back_; }
  // Shares the replicas' quota-stream demand per bucket (lua/rlqs_exchange.lua).
  const RedisScript& rlqs_exchange() const { return *rlqs_exchange_; }

 private:
  ScriptSet() = default;

  // Indexed by Algorithm; null for the fixed window.
  std::array<const RedisScript*, kAlgorithmCount> single_key_{};  // by Engine(algorithm)
  std::array<const RedisScript*, kAlgorithmCount> batch_{};
  const RedisScript* group_ = nullptr;
  const RedisScript* give_back_ = nullptr;
  const RedisScript* rlqs_exchange_ = nullptr;
};

}  // namespace sluice
