#include "server/trace/sampler.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/trace/id_generator.h"

namespace sluice {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr uint64_t kTwoTo63 = uint64_t{1} << 63;

// A trace id whose bytes 8..15 are `low`, big-endian, and whose first 8 bytes are `high_byte`
// (the sampler must not read them).
TraceId IdWithLow(uint64_t low, uint8_t high_byte = 0xff) {
  TraceId id;
  for (size_t i = 0; i < 8; ++i) {
    id[i] = high_byte;
    id[15 - i] = static_cast<uint8_t>(low >> (8 * i));
  }
  return id;
}

struct RatioCase {
  std::string name;
  TraceId trace_id;
  double ratio;
  bool sampled;
};

// Verifies the OpenTelemetry TraceIDRatioBased rule: bounds, NaN, the 0.5 boundary, byte order.
TEST(SamplerTest, SamplesByTraceIdRatio) {
  const std::vector<RatioCase> cases = {
      {"ratio 0, lowest id", IdWithLow(0), 0.0, false},
      {"negative ratio", IdWithLow(0), -0.5, false},
      {"NaN ratio", IdWithLow(0), kNaN, false},
      {"ratio 1, highest id", IdWithLow(UINT64_MAX), 1.0, true},
      {"ratio above 1", IdWithLow(UINT64_MAX), 2.0, true},
      {"infinite ratio", IdWithLow(UINT64_MAX), kInfinity, true},
      // 1e-18 * 2^63 = 9.2: the bound is 9, the product cut toward zero.
      {"bound 9, low 17", IdWithLow(17), 1e-18, true},
      {"bound 9, low 18", IdWithLow(18), 1e-18, false},
      // At 0.5 the bound is 2^62: sampled while low >> 1 < 2^62, that is low < 2^63.
      {"0.5, just under", IdWithLow(kTwoTo63 - 1), 0.5, true},
      {"0.5, at the bound", IdWithLow(kTwoTo63), 0.5, false},
      {"0.5, far over", IdWithLow(UINT64_MAX), 0.5, false},
      // Big-endian: byte 8 is the most significant.
      {"0.5, only byte 8 set", IdWithLow(uint64_t{0x80} << 56, 0), 0.5, false},
      {"0.5, only byte 15 set", IdWithLow(0x80, 0), 0.5, true},
      {"0.25, just under", IdWithLow(kTwoTo63 / 2 - 1), 0.25, true},
      {"0.25, at the bound", IdWithLow(kTwoTo63 / 2), 0.25, false},
  };
  for (const RatioCase& c : cases) {
    EXPECT_EQ(SampledByRatio(c.trace_id, c.ratio), c.sampled) << c.name;
  }
}

struct ParentCase {
  std::string name;
  std::optional<TraceContext> parent;
  TraceId trace_id;
  double ratio;
  bool sampled;
};

TraceContext Parent(bool sampled, bool deferred = false) {
  TraceContext parent;
  parent.trace_id = IdWithLow(kTwoTo63 - 1);
  parent.span_id = SpanId{1, 2, 3, 4, 5, 6, 7, 8};
  parent.sampled = sampled;
  parent.sampling_deferred = deferred;
  return parent;
}

// Verifies a parent's decision stands whatever the ratio, and a deferring parent or none leaves
// it to the ratio over the given trace id.
TEST(SamplerTest, FollowsParentUnlessItDefers) {
  const TraceId under_half = IdWithLow(kTwoTo63 - 1);
  const TraceId over_half = IdWithLow(kTwoTo63);
  const std::vector<ParentCase> cases = {
      {"sampled parent, ratio 0", Parent(true), over_half, 0.0, true},
      {"unsampled parent, ratio 1", Parent(false), under_half, 1.0, false},
      {"deferring parent, ratio 1", Parent(false, true), over_half, 1.0, true},
      {"deferring parent, ratio 0", Parent(true, true), under_half, 0.0, false},
      {"deferring parent, id under 0.5", Parent(false, true), under_half, 0.5, true},
      {"deferring parent, id over 0.5", Parent(true, true), over_half, 0.5, false},
      {"no parent, ratio 1", std::nullopt, over_half, 1.0, true},
      {"no parent, ratio 0", std::nullopt, under_half, 0.0, false},
      {"no parent, id under 0.5", std::nullopt, under_half, 0.5, true},
      {"no parent, id over 0.5", std::nullopt, over_half, 0.5, false},
      {"no parent, NaN", std::nullopt, under_half, kNaN, false},
  };
  for (const ParentCase& c : cases) {
    EXPECT_EQ(ShouldSample(c.parent, c.trace_id, c.ratio), c.sampled) << c.name;
  }
}

// Verifies random trace ids are sampled at the ratio's rate (20000 draws: 0.02 is over six
// standard deviations, so a correct sampler does not fail this by chance).
TEST(SamplerTest, SamplesRandomIdsAtTheRatio) {
  RandomIdGenerator ids;
  constexpr int kDraws = 20000;
  int sampled = 0;
  for (int i = 0; i < kDraws; ++i) {
    if (SampledByRatio(ids.NewTraceId(), 0.25)) {
      ++sampled;
    }
  }
  EXPECT_NEAR(static_cast<double>(sampled) / kDraws, 0.25, 0.02);
}

}  // namespace
}  // namespace sluice
