#include "server/algorithm/fixed_window.h"

#include <algorithm>
#include <limits>

#include "server/algorithm/algorithm_internal.h"

namespace sluice {

using algorithm_internal::WindowStart;

namespace {

constexpr int64_t kMicrosPerDay = int64_t{86400} * 1000000;

// Days from 1970-01-01 to year-month-01 of the proleptic Gregorian calendar (month 1 to 12).
int64_t DaysFromCivil(int64_t year, int64_t month) {
  year -= month <= 2 ? 1 : 0;
  const int64_t era = (year >= 0 ? year : year - 399) / 400;
  const int64_t year_of_era = year - era * 400;
  const int64_t day_of_year = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5;
  const int64_t day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
  return era * 146097 + day_of_era - 719468;
}

// The month (months since January 1970) that holds day `days` (days since 1970-01-01).
int64_t MonthOfDay(int64_t days) {
  const int64_t z = days + 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t day_of_era = z - era * 146097;
  const int64_t year_of_era =
      (day_of_era - day_of_era / 1460 + day_of_era / 36524 - day_of_era / 146096) / 365;
  const int64_t day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
  const int64_t shifted_month = (5 * day_of_year + 2) / 153;  // 0 = March
  const int64_t month = shifted_month < 10 ? shifted_month + 3 : shifted_month - 9;
  const int64_t year = year_of_era + era * 400 + (month <= 2 ? 1 : 0);
  return (year - 1970) * 12 + (month - 1);
}

// The first microsecond of month `months` (months since January 1970).
int64_t MonthStartUs(int64_t months) {
  int64_t year = 1970 + months / 12;
  int64_t month = months % 12;
  if (month < 0) {
    month += 12;
    --year;
  }
  return DaysFromCivil(year, month + 1) * kMicrosPerDay;
}

}  // namespace

FixedWindowSpan FixedWindowAt(const LimitParams& params, int64_t now_us) {
  FixedWindowSpan span;
  if (!params.calendar_months) {
    span.start_us = WindowStart(now_us, params.period_us);
    span.end_us = span.start_us + params.period_us;
    span.index = span.start_us / params.period_us;
    return span;
  }
  const int64_t months = std::max<int64_t>(1, params.period_us / kMonthUs);
  const int64_t month = MonthOfDay(WindowStart(now_us, kMicrosPerDay) / kMicrosPerDay);
  span.index = WindowStart(month, months) / months;
  span.start_us = MonthStartUs(span.index * months);
  span.end_us = MonthStartUs((span.index + 1) * months);
  return span;
}

Decision EvaluateFixedWindow(const LimitParams& params, FixedWindowState& state, int64_t now_us,
                             uint64_t hits) {
  const uint64_t limit = params.limit;
  const FixedWindowSpan window = FixedWindowAt(params, now_us);
  const int64_t window_start = window.start_us;
  const int64_t window_end = window.end_us;
  uint64_t count = state.window_start_us == window_start ? state.count : 0;

  Decision decision;
  // Written so that nothing overflows; count may exceed limit after the limit was lowered.
  decision.allowed = hits <= limit && count <= limit - hits;
  if (decision.allowed || ChargesWhenDenied(params, hits)) {
    count = count > std::numeric_limits<uint64_t>::max() - hits
                ? std::numeric_limits<uint64_t>::max()
                : count + hits;
    state.window_start_us = window_start;
    state.count = count;
  }
  decision.remaining = count < limit ? limit - count : 0;
  decision.reset_after_us = count > 0 ? window_end - now_us : 0;
  if (!decision.allowed) {
    decision.retry_after_us = hits > limit ? decision.reset_after_us : window_end - now_us;
  }
  return decision;
}

void GiveBackFixedWindow(const LimitParams& params, FixedWindowState& state, int64_t now_us,
                         uint64_t hits) {
  if (state.window_start_us == FixedWindowAt(params, now_us).start_us) {
    state.count -= std::min(hits, state.count);
  }
}

}  // namespace sluice
