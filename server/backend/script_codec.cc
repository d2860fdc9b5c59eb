#include "server/backend/script_codec.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "server/algorithm/fixed_window.h"

namespace sluice {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the scripts read little-endian doubles (struct.unpack \"<d\")");

constexpr double kTwo53 = 9007199254740992.0;
// A capacity the scripts take (below 2^53) leaves room for Capacity + 1; a larger one is
// refused by the scripts whatever the hits.
constexpr uint64_t kMaxWireCapacity = (uint64_t{1} << 53) - 1;

void AppendDouble(double value, std::string* out) {
  char bytes[sizeof(double)];
  std::memcpy(bytes, &value, sizeof(double));
  out->append(bytes, sizeof(double));
}

// Values at or above 2^53 become doubles >= 2^53, which the scripts reject: never a rounded
// limit silently.
double AsDouble(uint64_t value) { return static_cast<double>(value); }

double ReadDouble(const char* at) {
  double value;
  std::memcpy(&value, at, sizeof(double));
  return value;
}

// True if `value` is an integer in [min, 2^53], stored to *out.
bool ToInteger(double value, double min, int64_t* out) {
  if (!(value >= min && value <= kTwo53 && std::floor(value) == value)) {
    return false;
  }
  *out = static_cast<int64_t>(value);
  return true;
}

// A record's last two fields: hits and charge.
void AppendRecordTail(const LimitParams& params, uint64_t hits, bool refund, std::string* out) {
  if (refund) {
    AppendDouble(AsDouble(std::min(hits, kMaxChargedHits)), out);
    AppendDouble(kRefundCharge, out);
    return;
  }
  AppendDouble(AsDouble(WireHits(params, hits)), out);
  AppendDouble(static_cast<double>(params.charge), out);
}

}  // namespace

uint64_t WireHits(const LimitParams& params, uint64_t hits) {
  if (params.charge == Charge::kAlways) {
    return std::min(hits, kMaxChargedHits);
  }
  const uint64_t capacity = Capacity(params);
  return hits > capacity && capacity < kMaxWireCapacity ? capacity + 1 : hits;
}

void AppendSingleScriptArgs(int64_t now_us, const LimitParams& params, uint64_t hits,
                            std::string* out, bool refund) {
  AppendDouble(static_cast<double>(now_us), out);
  AppendDouble(AsDouble(params.limit), out);
  AppendDouble(static_cast<double>(params.period_us), out);
  AppendDouble(AsDouble(params.burst), out);
  AppendRecordTail(params, hits, refund, out);
}

void AppendGroupScriptNow(int64_t now_us, std::string* out) {
  AppendDouble(static_cast<double>(now_us), out);
}

void AppendGroupScriptCheck(int64_t now_us, const LimitParams& params, uint64_t hits,
                            std::string* out, bool refund) {
  AppendDouble(static_cast<double>(Engine(params.algorithm)), out);
  AppendDouble(AsDouble(params.limit), out);
  AppendDouble(static_cast<double>(params.period_us), out);
  if (params.algorithm == Algorithm::kFixedWindow) {
    // A window has no burst: the slot carries the rest of the window that holds now, which the
    // script cannot work out for calendar months.
    AppendDouble(static_cast<double>(FixedWindowAt(params, now_us).end_us - now_us), out);
  } else {
    AppendDouble(AsDouble(params.burst), out);
  }
  AppendRecordTail(params, hits, refund, out);
}

absl::Status DecodeScriptDecisions(absl::string_view reply, size_t count,
                                   std::vector<Decision>* decisions) {
  return DecodeScriptDecisions(reply, count,
                               [decisions](size_t, const Decision& d) { decisions->push_back(d); });
}

absl::Status DecodeScriptDecisions(absl::string_view reply, size_t count,
                                   absl::FunctionRef<void(size_t i, const Decision&)> store) {
  if (reply.size() != count * kScriptDecisionBytes) {
    return absl::InternalError(absl::StrCat("redis: script reply of ", reply.size(),
                                            " bytes, expected ", count * kScriptDecisionBytes));
  }
  for (size_t i = 0; i < count; ++i) {
    const char* at = reply.data() + i * kScriptDecisionBytes;
    int64_t fields[5];
    for (int k = 0; k < 5; ++k) {
      const double value = ReadDouble(at + k * sizeof(double));
      if (!ToInteger(value, k == 0 ? 0 : -kTwo53, &fields[k]) || (k == 0 && fields[k] > 1)) {
        return absl::InternalError(absl::StrCat("redis: script reply field ", k, " of decision ",
                                                i, " is not valid: ", value));
      }
    }
    Decision d;
    d.allowed = fields[0] == 1;
    d.remaining = static_cast<uint64_t>(std::max<int64_t>(0, fields[1]));
    d.retry_after_us = fields[2];
    d.reset_after_us = fields[3];
    d.delay_us = fields[4];
    store(i, d);
  }
  return absl::OkStatus();
}

void AppendPackedDoubles(absl::Span<const double> values, std::string* out) {
  for (double value : values) {
    AppendDouble(value, out);
  }
}

std::vector<double> ReadPackedDoubles(absl::string_view packed) {
  std::vector<double> values(packed.size() / sizeof(double));
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = ReadDouble(packed.data() + i * sizeof(double));
  }
  return values;
}

int64_t FixedWindowTtlMs(const LimitParams& params, int64_t now_us) {
  const int64_t rest = FixedWindowAt(params, now_us).end_us - now_us;
  return std::max<int64_t>(1, (rest + 999) / 1000);
}

Decision FixedWindowDecision(const LimitParams& params, int64_t now_us, uint64_t hits,
                             int64_t count_after) {
  FixedWindowState state;
  state.window_start_us = FixedWindowAt(params, now_us).start_us;
  // count_after - hits, without overflow; negative (hits given back to an expired key) is 0.
  const uint64_t after = count_after > 0 ? static_cast<uint64_t>(count_after) : 0;
  state.count = after > hits ? after - hits : 0;
  return EvaluateFixedWindow(params, state, now_us, hits);
}

int64_t WindowGiveBacks::Adjusted(std::string_view key, int64_t count_after) const {
  for (const auto& [pending_key, hits] : pending_) {
    if (pending_key == key) {
      count_after -= static_cast<int64_t>(std::min<uint64_t>(hits, kMaxChargedHits));
    }
  }
  return count_after;
}

void WindowGiveBacks::Add(std::string_view key, uint64_t hits) {
  pending_.emplace_back(key, hits);
}

Decision FixedWindowRefundDecision(const LimitParams& params, int64_t now_us,
                                   int64_t count_after) {
  FixedWindowState window;
  window.window_start_us = FixedWindowAt(params, now_us).start_us;
  window.count = count_after > 0 ? static_cast<uint64_t>(count_after) : 0;
  AlgorithmState state = window;
  return Refund(params, state, now_us, 0);
}

}  // namespace sluice
