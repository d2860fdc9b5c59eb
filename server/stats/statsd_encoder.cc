#include "server/stats/statsd_encoder.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace sluice {
namespace {

constexpr auto& kBounds = MetricHistogram::kBoundsUs;

}  // namespace

uint64_t StatsdTimerBucketMs(size_t bucket, double mean_us) {
  const double lo = bucket == 0 ? 0.0 : static_cast<double>(kBounds[bucket - 1]);
  const double hi =
      bucket < kBounds.size() ? static_cast<double>(kBounds[bucket]) : static_cast<double>(lo);
  const double us = mean_us >= 0 ? std::clamp(mean_us, lo, hi) : (lo + hi) / 2;
  return static_cast<uint64_t>(std::floor(us / 1000));
}

StatsdEncoder::StatsdEncoder(StatsdEncoderOptions options, StatsdMogrifiers mogrifiers)
    : options_(std::move(options)),
      tag_set_(GostatsTagSet(options_.extra_tags)),
      mogrifiers_(std::move(mogrifiers)) {}

void StatsdEncoder::NameAndTags(absl::string_view statsd_name, std::string* name,
                                std::vector<std::string>* tags) const {
  std::string tagged = GostatsTaggedName(statsd_name, tag_set_);
  tags->clear();
  if (!options_.dogstatsd) {
    *name = std::move(tagged);
    return;
  }
  SeparatedName separated = SeparateGostatsTags(tagged);
  StatsdMogrifiers::Result mogrified = mogrifiers_.Mogrify(separated.name);
  *name = std::move(mogrified.name);
  tags->insert(tags->end(), options_.global_tags.begin(), options_.global_tags.end());
  tags->insert(tags->end(), separated.tags.begin(), separated.tags.end());
  tags->insert(tags->end(), mogrified.tags.begin(), mogrified.tags.end());
}

void StatsdEncoder::AddLine(StatsdPayloads& payloads, absl::string_view statsd_name,
                            absl::string_view value, StatsdLineType type, absl::string_view rate) {
  std::string name;
  std::vector<std::string> tags;
  NameAndTags(statsd_name, &name, &tags);
  line_.clear();
  AppendStatsdLine(&line_, name, value, type, rate, tags);
  payloads.Add(line_);
}

void StatsdEncoder::AddTimer(StatsdPayloads& payloads, const StatsdSample& sample) {
  const MetricHistogram::Snapshot& now = sample.observations;
  next_timers_[sample.name] = now;
  MetricHistogram::Snapshot before;
  if (auto it = timers_.find(sample.name); it != timers_.end()) {
    before = it->second;
  }
  std::array<uint64_t, kBounds.size() + 1> counts{};
  size_t filled = 0;
  size_t last = 0;
  for (size_t b = 0; b < counts.size(); ++b) {
    counts[b] = now.buckets[b] > before.buckets[b] ? now.buckets[b] - before.buckets[b] : 0;
    if (counts[b] > 0) {
      ++filled;
      last = b;
    }
  }
  if (filled == 0) {
    return;
  }
  const double mean_us =
      filled == 1 && now.sum_us >= before.sum_us
          ? static_cast<double>(now.sum_us - before.sum_us) / static_cast<double>(counts[last])
          : -1;
  for (size_t b = 0; b < counts.size(); ++b) {
    if (counts[b] == 0) {
      continue;
    }
    const std::string value = absl::StrCat(StatsdTimerBucketMs(b, mean_us));
    if (counts[b] <= kTimerLinesPerBucket) {
      for (uint64_t i = 0; i < counts[b]; ++i) {
        AddLine(payloads, sample.name, value, StatsdLineType::kTimer, "");
      }
    } else {
      AddLine(payloads, sample.name, value, StatsdLineType::kTimer, StatsdSampleRate(counts[b]));
    }
  }
}

std::vector<std::string> StatsdEncoder::Encode(const std::vector<StatsdSample>& samples) {
  StatsdPayloads payloads(options_.max_payload_bytes);
  next_counters_.clear();
  next_timers_.clear();
  for (const StatsdSample& sample : samples) {
    switch (sample.type) {
      case StatsdType::kCounter: {
        uint64_t increase = sample.value;
        if (auto it = counters_.find(sample.name);
            it != counters_.end() && it->second.series == sample.series &&
            it->second.value <= sample.value) {
          increase = sample.value - it->second.value;
        }
        next_counters_[sample.name] = SentCounter{sample.value, sample.series};
        if (increase > 0) {
          AddLine(payloads, sample.name, absl::StrCat(increase), StatsdLineType::kCounter, "");
        }
        break;
      }
      case StatsdType::kGauge:
        AddLine(payloads, sample.name, absl::StrCat(sample.value), StatsdLineType::kGauge, "");
        break;
      case StatsdType::kObserver:
        AddTimer(payloads, sample);
        break;
    }
  }
  return payloads.Take();
}

void StatsdEncoder::Commit() {
  counters_.swap(next_counters_);
  timers_.swap(next_timers_);
  next_counters_.clear();
  next_timers_.clear();
}

}  // namespace sluice
