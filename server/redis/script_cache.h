// The Lua scripts a Redis client may run with EVALSHA, each registered once by (name, source)
// with its SHA-1 computed up front. Connections load every registered script when they connect
// and heal NOSCRIPT replies (after SCRIPT FLUSH, a restart or a failover) by loading the
// script again, so a caller never sees NOSCRIPT; see RedisConnection.
//
// Thread-safe: Register and the lookups may be called concurrently from any thread. A
// RedisScript never changes and lives as long as its cache, so commands and connections refer
// to scripts by plain pointer. The per-node clients of a cluster client share one cache.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "server/common/mutex.h"

namespace sluice {

class RedisScript {
 public:
  RedisScript(const RedisScript&) = delete;
  RedisScript& operator=(const RedisScript&) = delete;

  const std::string& name() const { return name_; }
  const std::string& source() const { return source_; }
  // 40 lower-case hex characters, as SCRIPT LOAD returns and EVALSHA expects.
  const std::string& sha1() const { return sha1_; }
  // Dense index in its cache (0, 1, ...), so connections can keep per-script state in a vector.
  int id() const { return id_; }

 private:
  friend class ScriptCache;
  RedisScript(std::string name, std::string source, int id);

  const std::string name_;
  const std::string source_;
  const std::string sha1_;
  const int id_;
};

class ScriptCache {
 public:
  ScriptCache() = default;
  ScriptCache(const ScriptCache&) = delete;
  ScriptCache& operator=(const ScriptCache&) = delete;

  // Registers `source` under `name` and returns the script, valid for the cache's lifetime.
  // Registering the same (name, source) again returns the same script; a name already taken by
  // a different source is kAlreadyExists; an empty name or source is kInvalidArgument.
  // Connections that are already up load a new script when it is first used (NOSCRIPT).
  absl::StatusOr<const RedisScript*> Register(std::string_view name, std::string_view source);

  // The script registered under `name`, or nullptr.
  const RedisScript* Find(std::string_view name) const;

  // Every registered script, in registration (id) order.
  std::vector<const RedisScript*> All() const;

 private:
  mutable Mutex mu_;
  std::vector<std::unique_ptr<RedisScript>> scripts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice
