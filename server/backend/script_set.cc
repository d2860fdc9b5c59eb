#include "server/backend/script_set.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "server/common/std_view.h"

namespace sluice {

absl::StatusOr<ScriptSet> ScriptSet::Register(absl::Span<const LuaScript> scripts,
                                              ScriptCache& cache) {
  ScriptSet set;
  for (const LuaScript& script : scripts) {
    auto registered = cache.Register(StdView(script.name), StdView(script.source));
    if (!registered.ok()) {
      return registered.status();
    }
    // "<algorithm>" decides one key, "<algorithm>_batch" several independent ones.
    absl::string_view name = script.name;
    const bool batch = absl::ConsumeSuffix(&name, "_batch");
    if (!batch && name == "group") {
      set.group_ = *registered;
    } else if (!batch && name == "give_back") {
      set.give_back_ = *registered;
    } else if (!batch && name == "rlqs_exchange") {
      set.rlqs_exchange_ = *registered;
    } else if (auto algorithm = ParseAlgorithm(name)) {
      (batch ? set.batch_ : set.single_key_)[static_cast<size_t>(*algorithm)] = *registered;
    }
  }
  for (size_t a = 0; a < set.single_key_.size(); ++a) {
    const auto algorithm = static_cast<Algorithm>(a);
    if (algorithm != Algorithm::kFixedWindow && Engine(algorithm) == algorithm &&
        (set.single_key_[a] == nullptr || set.batch_[a] == nullptr)) {
      return absl::InternalError(
          absl::StrCat("no embedded Lua scripts for ", AlgorithmName(algorithm)));
    }
  }
  if (set.group_ == nullptr || set.give_back_ == nullptr || set.rlqs_exchange_ == nullptr) {
    return absl::InternalError("no embedded Lua script named group, give_back or rlqs_exchange");
  }
  return set;
}

}  // namespace sluice
