#include "server/backend/script_set.h"

#include <vector>

#include "gtest/gtest.h"

namespace sluice {
namespace {

// Verifies every embedded script is found by what it decides.
TEST(ScriptSetTest, FindsTheEmbeddedScriptsByRole) {
  ScriptCache cache;
  absl::StatusOr<ScriptSet> scripts = ScriptSet::Register(LuaScripts(), cache);
  ASSERT_TRUE(scripts.ok()) << scripts.status();
  EXPECT_EQ(scripts->single_key(Algorithm::kGcra).name(), "gcra");
  EXPECT_EQ(scripts->batch(Algorithm::kTokenBucket).name(), "token_bucket_batch");
  EXPECT_EQ(scripts->for_lone_checks(Algorithm::kLeakyBucket, 1).name(), "leaky_bucket");
  EXPECT_EQ(scripts->for_lone_checks(Algorithm::kLeakyBucket, 2).name(), "leaky_bucket_batch");
  EXPECT_EQ(scripts->group().name(), "group");
  EXPECT_EQ(scripts->give_back().name(), "give_back");
  // Every script is registered, so that connections load them in their handshake.
  EXPECT_EQ(cache.All().size(), LuaScripts().size());
}

// Verifies a missing script is an internal error naming what is missing, not a null later.
TEST(ScriptSetTest, MissingScriptsAreErrors) {
  std::vector<LuaScript> scripts(LuaScripts().begin(), LuaScripts().end());
  std::vector<LuaScript> without_batch;
  for (const LuaScript& script : scripts) {
    if (script.name != "sliding_window_log_batch") {
      without_batch.push_back(script);
    }
  }
  ScriptCache cache;
  absl::StatusOr<ScriptSet> set = ScriptSet::Register(without_batch, cache);
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(set.status().message(), "no embedded Lua scripts for sliding_window_log");

  std::vector<LuaScript> without_group;
  for (const LuaScript& script : scripts) {
    if (script.name != "group") {
      without_group.push_back(script);
    }
  }
  ScriptCache other;
  set = ScriptSet::Register(without_group, other);
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().message(),
            "no embedded Lua script named group, give_back or rlqs_exchange");
}

}  // namespace
}  // namespace sluice
