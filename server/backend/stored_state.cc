#include "server/backend/stored_state.h"

#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "server/algorithm/fixed_window.h"

namespace sluice {
namespace {

// The little-endian double at `at` of `value` (struct.pack's "<d").
double DoubleAt(absl::string_view value, size_t at) {
  unsigned char bytes[8];
  std::memcpy(bytes, value.data() + at, sizeof(bytes));
  uint64_t bits = 0;
  for (int i = 7; i >= 0; --i) {
    bits = (bits << 8) | bytes[i];
  }
  double out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

// struct.pack("<B" .. "d" x doubles) with first byte `code`: the doubles, or nullopt.
std::optional<std::vector<double>> Record(absl::string_view value, Algorithm code,
                                          size_t doubles) {
  if (value.size() != 1 + 8 * doubles ||
      static_cast<unsigned char>(value[0]) != static_cast<unsigned char>(code)) {
    return std::nullopt;
  }
  std::vector<double> out(doubles);
  for (size_t i = 0; i < doubles; ++i) {
    out[i] = DoubleAt(value, 1 + 8 * i);
  }
  return out;
}

// A double the scripts hold as a whole number (times, counts), as the C++ state keeps it.
int64_t Whole(double value) { return static_cast<int64_t>(value); }
uint64_t Count(double value) { return value > 0 ? static_cast<uint64_t>(value) : 0; }

}  // namespace

std::optional<AlgorithmState> DecodeStringState(const LimitParams& params,
                                                absl::string_view value, int64_t now_us) {
  switch (Engine(params.algorithm)) {
    case Algorithm::kFixedWindow: {
      // lua/fixed_window.lua: tonumber(old) or 0, and a count that is not above 0 is 0.
      double count = 0;
      if (!absl::SimpleAtod(value, &count)) {
        return std::nullopt;
      }
      FixedWindowState state;
      state.window_start_us = FixedWindowAt(params, now_us).start_us;
      state.count = Count(count);
      return state;
    }
    case Algorithm::kSlidingWindowCounter: {
      auto doubles = Record(value, Algorithm::kSlidingWindowCounter, 3);
      if (!doubles) {
        return std::nullopt;
      }
      return SlidingWindowCounterState{Whole((*doubles)[0]), Count((*doubles)[1]),
                                       Count((*doubles)[2])};
    }
    case Algorithm::kTokenBucket: {
      auto doubles = Record(value, Algorithm::kTokenBucket, 2);
      if (!doubles) {
        return std::nullopt;
      }
      return TokenBucketState{true, (*doubles)[0], Whole((*doubles)[1])};
    }
    case Algorithm::kLeakyBucket: {
      auto doubles = Record(value, Algorithm::kLeakyBucket, 2);
      if (!doubles) {
        return std::nullopt;
      }
      return LeakyBucketState{(*doubles)[0], Whole((*doubles)[1])};
    }
    case Algorithm::kGcra: {
      auto doubles = Record(value, Algorithm::kGcra, 1);
      if (!doubles) {
        return std::nullopt;
      }
      return GcraState{(*doubles)[0]};
    }
    case Algorithm::kSlidingWindowLog:
    case Algorithm::kConcurrency:
      break;
  }
  return std::nullopt;
}

std::optional<SlidingWindowLogState> DecodeLogState(
    absl::Span<const std::pair<std::string, std::string>> members_and_scores) {
  SlidingWindowLogState state;
  for (const auto& [member, score_text] : members_and_scores) {
    double score = 0;
    if (member.size() != 16 || !absl::SimpleAtod(score_text, &score)) {
      return std::nullopt;
    }
    const double ts = DoubleAt(member, 0);
    const double cum_after = DoubleAt(member, 8);
    if (!(cum_after >= score)) {
      return std::nullopt;
    }
    const uint64_t hits = Count(cum_after - score);
    state.entries.emplace_back(Whole(ts), hits);
    state.total += hits;
  }
  return state;
}

}  // namespace sluice
