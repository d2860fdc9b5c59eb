#include "server/redis/script_cache.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/redis/sha1.h"

namespace sluice {

RedisScript::RedisScript(std::string name, std::string source, int id)
    : name_(std::move(name)), source_(std::move(source)), sha1_(Sha1Hex(source_)), id_(id) {}

absl::StatusOr<const RedisScript*> ScriptCache::Register(std::string_view name,
                                                         std::string_view source) {
  if (name.empty() || source.empty()) {
    return absl::InvalidArgumentError("a Redis script needs a name and a source");
  }
  MutexLock lock(mu_);
  for (const auto& script : scripts_) {
    if (script->name() == name) {
      if (script->source() != source) {
        return absl::AlreadyExistsError(absl::StrCat(
            "Redis script '", std::string(name), "' is already registered with another source"));
      }
      return script.get();
    }
  }
  // RedisScript's constructor is private; make_unique cannot reach it.
  scripts_.push_back(std::unique_ptr<RedisScript>(
      new RedisScript(std::string(name), std::string(source), static_cast<int>(scripts_.size()))));
  return scripts_.back().get();
}

const RedisScript* ScriptCache::Find(std::string_view name) const {
  MutexLock lock(mu_);
  for (const auto& script : scripts_) {
    if (script->name() == name) {
      return script.get();
    }
  }
  return nullptr;
}

std::vector<const RedisScript*> ScriptCache::All() const {
  MutexLock lock(mu_);
  std::vector<const RedisScript*> all;
  all.reserve(scripts_.size());
  for (const auto& script : scripts_) {
    all.push_back(script.get());
  }
  return all;
}

}  // namespace sluice
