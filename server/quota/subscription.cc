#include "server/quota/subscription.h"

#include <algorithm>
#include <limits>

#include "server/common/saturating.h"

namespace sluice::quota {
namespace {

// Two reports of one bucket closer than this are one measure (the immediate report of a new
// bucket and a tick that follows at once): the time between them says nothing of a rate.
constexpr int64_t kSameReportUs = 100'000;

}  // namespace

void Subscription::AddSample(uint64_t requests, int64_t elapsed_us) {
  if (sample_count_ == kSamples) {
    std::rotate(samples_.begin(), samples_.begin() + 1, samples_.end());
    --sample_count_;
  }
  const uint64_t total = SaturatingAdd(requests, carried_);
  carried_ = 0;
  samples_[sample_count_++] = {total, elapsed_us};
}

void Subscription::AddReport(uint64_t requests, int64_t reported_us, int64_t now_us) {
  idle_reports_ = requests == 0 ? std::min(idle_reports_ + 1, 1'000'000u) : 0;
  if (last_report_us_ < 0) {
    if (reported_us > 0) {
      // Whole seconds are Envoy's truncation: the time was up to a second longer.
      AddSample(requests, reported_us % 1'000'000 == 0 ? reported_us + 500'000 : reported_us);
    }
    after_immediate_ = reported_us == 0;
    last_report_us_ = now_us;
    return;
  }
  const int64_t measured = now_us - last_report_us_;
  if (measured < kSameReportUs) {
    // Counted with the measure that follows, whose time runs from the earlier report.
    carried_ = SaturatingAdd(carried_, requests);
    return;
  }
  AddSample(requests, measured);
  if (!after_immediate_) {
    if (gap_count_ == kSamples) {
      std::rotate(gaps_.begin(), gaps_.begin() + 1, gaps_.end());
      --gap_count_;
    }
    gaps_[gap_count_++] = measured;
    interval_us_ = std::clamp(*std::max_element(gaps_.begin(), gaps_.begin() + gap_count_),
                              kMinIntervalUs, kMaxIntervalUs);
  }
  after_immediate_ = false;
  last_report_us_ = now_us;
}

double Subscription::DivisionDemand() const {
  return measured() ? Demand() : std::numeric_limits<double>::infinity();
}

double Subscription::Demand() const {
  double requests = 0;
  double elapsed_us = 0;
  for (size_t i = 0; i < sample_count_; ++i) {
    requests += static_cast<double>(samples_[i].first);
    elapsed_us += static_cast<double>(samples_[i].second);
  }
  return elapsed_us > 0 ? requests * 1e6 / elapsed_us : 0.0;
}

}  // namespace sluice::quota
