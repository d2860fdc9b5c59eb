// What one flush of the statsd sink sends: from upstream's statsd names and their values now
// (UpstreamStatsdSamples, read from Sluice's own counters), the lines for what changed since the
// last flush that reached the network, packed into payloads (statsd_lines.h), as
// envoyproxy/ratelimit's gostats store flushes:
//   - a counter sends its increase ("name:3|c"; gostats' counter.latch), and nothing when it
//     did not move; one read from another series than before, or below what was sent, started
//     again from 0 (a per-rule series dropped after --rule_metric_ttl and back) and sends its
//     whole value;
//   - a timer (ratelimit_server.ShouldRateLimit.response_time) sends its new observations in
//     whole milliseconds, as upstream's interceptor truncates them ("name:0|ms"). Upstream sends
//     one line per request as it ends; Sluice reads a histogram at flush time, so each of its
//     buckets stands for its observations: up to kTimerLinesPerBucket of them as that many
//     lines, more as one line with a sample rate ("name:7|ms|@0.00999..." for 100), which every
//     statsd server counts as that many. Their value is the bucket's middle in whole ms (the
//     mean of the flush's observations when one bucket holds them all).
// Gauges are sent as their value, every flush (gostats flushes every gauge).
//
// Not thread-safe: one flusher calls it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "server/common/metric_histogram.h"
#include "server/stats/statsd_lines.h"
#include "server/stats/statsd_mogrifier.h"
#include "server/stats/upstream_stats.h"

namespace sluice {

struct StatsdEncoderOptions {
  // DogStatsD (tags after "|#", mogrifiers) rather than plain statsd.
  bool dogstatsd = false;
  size_t max_payload_bytes = kStatsdUdpPayloadBytes;
  // EXTRA_TAGS, as given (GostatsTagSet applies gostats' rules).
  std::vector<StatsdTag> extra_tags;
  // DogStatsD: tags sent first on every line, as given ("env:prod"; datadog-go's global tags).
  std::vector<std::string> global_tags;
};

class StatsdEncoder {
 public:
  // Observations of one timer bucket sent as lines of their own; more make one sampled line.
  static constexpr uint64_t kTimerLinesPerBucket = 10;

  StatsdEncoder(StatsdEncoderOptions options, StatsdMogrifiers mogrifiers);

  // The payloads for what changed in `samples` since the last Commit (see above); none when
  // nothing changed.
  std::vector<std::string> Encode(const std::vector<StatsdSample>& samples);
  // What the last Encode sent becomes what the next one counts from. Without it (the payloads
  // did not leave), the next Encode sends those changes again with whatever came since.
  void Commit();

  // The name and DogStatsD tags `statsd_name` is sent under.
  void NameAndTags(absl::string_view statsd_name, std::string* name,
                   std::vector<std::string>* tags) const;

 private:
  struct SentCounter {
    uint64_t value = 0;
    std::shared_ptr<const void> series;
  };
  void AddLine(StatsdPayloads& payloads, absl::string_view statsd_name, absl::string_view value,
               StatsdLineType type, absl::string_view rate);
  void AddTimer(StatsdPayloads& payloads, const StatsdSample& sample);

  const StatsdEncoderOptions options_;
  const std::vector<StatsdTag> tag_set_;  // GostatsTagSet(options_.extra_tags)
  const StatsdMogrifiers mogrifiers_;
  std::string line_;  // scratch
  absl::flat_hash_map<std::string, SentCounter> counters_;
  absl::flat_hash_map<std::string, MetricHistogram::Snapshot> timers_;
  absl::flat_hash_map<std::string, SentCounter> next_counters_;
  absl::flat_hash_map<std::string, MetricHistogram::Snapshot> next_timers_;
};

// The whole milliseconds one observation of the histogram bucket `bucket` (an index of
// MetricHistogram::Snapshot::buckets) is sent as: the bucket's middle, or `mean_us` held within
// the bucket when it is given (>= 0).
uint64_t StatsdTimerBucketMs(size_t bucket, double mean_us);

}  // namespace sluice
