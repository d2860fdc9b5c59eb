// The states the Lua scripts keep on Redis (each lua/<algorithm>.lua says its form under
// "State:"), read back into the C++ algorithm states of server/algorithm/, so that the admin API
// (Backend::Inspect) can show a key's state by its fields and decide a check of 0 hits on a copy
// of it without writing anything. The other direction, writing, is the scripts' alone.
//
//   fixed_window            a decimal integer under a window key (INCRBY's form, the group
//                           script's "%.0f"); not a number, or negative, counts 0
//   sliding_window_counter  struct.pack("<Bddd", 2, window_start_us, current, previous)
//   token_bucket            struct.pack("<Bdd", 3, tokens, last_us)
//   leaky_bucket            struct.pack("<Bdd", 4, level, last_us)
//   gcra                    struct.pack("<Bd", 5, tat_us)
//   sliding_window_log      a sorted set: member struct.pack("<dd", ts_us, cum_after), score
//                           cum_before (concurrency keeps the same)
// A value of another length or code is not the algorithm's: the scripts read it as a fresh key.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "server/algorithm/algorithm.h"

namespace sluice {

// The state a string `value` holds for a rule of `params` (any algorithm but the sliding window
// log and concurrency), as its script reads it at now_us; nullopt when the value is not that
// algorithm's state (the script then starts from a fresh key). A fixed window's value is the
// count of the window its key names, which is the window that holds now_us (FixedWindowAt).
std::optional<AlgorithmState> DecodeStringState(const LimitParams& params,
                                                absl::string_view value, int64_t now_us);

// The sliding window log a sorted set holds, from its members and their scores (Redis' decimal
// text) in rank order, as ZRANGE ... WITHSCORES answers. nullopt when a member or score is not
// of the log's form.
std::optional<SlidingWindowLogState> DecodeLogState(
    absl::Span<const std::pair<std::string, std::string>> members_and_scores);

}  // namespace sluice
