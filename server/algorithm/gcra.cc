#include "server/algorithm/gcra.h"

#include <algorithm>

#include "server/algorithm/algorithm_internal.h"

namespace sluice {

namespace {

using algorithm_internal::CeilMicros;
using algorithm_internal::FirstAdmittedTime;
using algorithm_internal::FloorRemaining;
using algorithm_internal::MostThatFits;

// How far the theoretical arrival time `tat_us` lies ahead of now_us (0 if in the past).
double Ahead(double tat_us, int64_t now_us) {
  const double now = static_cast<double>(now_us);
  return std::max(tat_us, now) - now;
}

}  // namespace

Decision EvaluateGcra(const LimitParams& params, GcraState& state, int64_t now_us, uint64_t hits) {
  const double interval = static_cast<double>(params.period_us) / static_cast<double>(params.limit);
  const double tolerance = interval * static_cast<double>(params.burst);
  const double cost = static_cast<double>(hits) * interval;

  Decision decision;
  decision.allowed = hits <= params.burst && Ahead(state.tat_us, now_us) + cost <= tolerance;
  if (decision.allowed || ChargesWhenDenied(params, hits)) {
    const double now = static_cast<double>(now_us);
    state.tat_us = std::max(state.tat_us, now) + cost;
    // A charge while denied moves the TAT past the tolerance, kept within one period beyond it
    // (never binding on an admission, which leaves the TAT within the tolerance).
    if (!decision.allowed) {
      state.tat_us =
          std::min(state.tat_us, now + (tolerance + static_cast<double>(params.period_us)));
    }
  }
  const double ahead_after = Ahead(state.tat_us, now_us);

  decision.remaining = MostThatFits(
      FloorRemaining((tolerance - ahead_after) / interval),
      [&](uint64_t n) { return ahead_after + static_cast<double>(n) * interval <= tolerance; });
  decision.reset_after_us = CeilMicros(ahead_after);
  if (!decision.allowed) {
    if (hits > params.burst) {
      decision.retry_after_us = decision.reset_after_us;
    } else {
      const int64_t guess = now_us + CeilMicros((ahead_after + cost) - tolerance);
      const double tat_us = state.tat_us;
      const auto admits = [&](int64_t t) { return Ahead(tat_us, t) + cost <= tolerance; };
      decision.retry_after_us = FirstAdmittedTime(now_us, guess, admits) - now_us;
    }
  }
  return decision;
}

void GiveBackGcra(const LimitParams& params, GcraState& state, int64_t now_us, uint64_t hits) {
  const double interval = static_cast<double>(params.period_us) / static_cast<double>(params.limit);
  const double now = static_cast<double>(now_us);
  state.tat_us = std::max(std::max(state.tat_us, now) - static_cast<double>(hits) * interval, now);
}

}  // namespace sluice
