// The text envoyproxy/ratelimit's statsd sinks send, as pure functions, and the packing of lines
// into payloads:
//   - plain statsd is lyft/gostats' net sink (net_sink.go): "name:value|c\n", "|g", "|ms", with
//     a scope's tags (EXTRA_TAGS) serialized into the name as gostats does
//     (internal/tags/tags.go): "name.__key=value.__key2=value2", keys sorted;
//   - DogStatsD is godogstats (src/godogstats/dogstatsd_sink.go) over datadog-go v5.5.0
//     (statsd/format.go): the serialized tags split back out of the name (separateTags), the
//     mogrifiers applied to what is left, and "name:value|c|#tag1,tag2\n" with datadog-go's
//     global tags first, then the ones from the name, then the mogrifier's.
// Both pack whole lines into payloads of at most 1432 bytes over UDP (gostats'
// defaultBufferSizeUDP, datadog-go's OptimalUDPPayloadSize), 64 KiB over TCP (gostats'
// defaultBufferSizeTCP); a line longer than that goes alone.
//
// One difference, for safety: a stat key holds request values (detailed_metric,
// value_to_metric), and a newline in one would end the line and start a forged one, so a
// newline in a name is sent as '_' (upstream sends it as is); in a tag it is dropped, as
// datadog-go drops it.
//
// Thread-safe (pure functions; StatsdPayloads is one caller's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace sluice {

// Payload bounds, as upstream's clients use them.
inline constexpr size_t kStatsdUdpPayloadBytes = 1432;
inline constexpr size_t kStatsdTcpPayloadBytes = 64 << 10;

using StatsdTag = std::pair<std::string, std::string>;

// EXTRA_TAGS as a gostats scope holds them (tags.NewTagSet): a pair with an empty key or value
// dropped, the last of a repeated key kept, '.', ':' and '|' in values replaced by '_'
// (ReplaceChars; keys are kept as given), sorted by key (bytes).
std::vector<StatsdTag> GostatsTagSet(const std::vector<StatsdTag>& tags);

// `name` with `tags` (a GostatsTagSet) serialized into it, as gostats' TagSet.Serialize:
// ".__key=value" for each tag.
std::string GostatsTaggedName(absl::string_view name, const std::vector<StatsdTag>& tags);

// godogstats' separateTags: the name before the first ".__", and each "key=value" after it
// (split at every ".__") as "key:value"; an item without '=' is dropped.
struct SeparatedName {
  std::string name;
  std::vector<std::string> tags;
};
SeparatedName SeparateGostatsTags(absl::string_view serialized);

enum class StatsdLineType { kCounter, kGauge, kTimer };

// Appends one line and its '\n' to `out`: name:value|type, then "|@rate" unless `rate` is
// empty, then "|#tag,tag" unless `tags` is empty (DogStatsD).
void AppendStatsdLine(std::string* out, absl::string_view name, absl::string_view value,
                      StatsdLineType type, absl::string_view rate,
                      const std::vector<std::string>& tags);

// The sample rate that makes one line stand for `count` observations, as every statsd server
// reads "|@rate" (etsy statsd and datadog's agent count 1/rate, statsd_exporter repeats the
// observation int(1/rate) times): a shade below 1/count, so that 1/rate is never read as less
// than `count`. REQUIRES: count >= 2.
std::string StatsdSampleRate(uint64_t count);

// Lines packed into payloads in order, each payload whole lines of at most `max_bytes` (a line
// longer than that alone).
class StatsdPayloads {
 public:
  explicit StatsdPayloads(size_t max_bytes) : max_bytes_(max_bytes) {}

  // REQUIRES: `line` is one whole line, its '\n' included.
  void Add(absl::string_view line);
  // The payloads so far; the packer starts again empty.
  std::vector<std::string> Take();

 private:
  const size_t max_bytes_;
  std::vector<std::string> payloads_;
  std::string current_;
};

}  // namespace sluice
