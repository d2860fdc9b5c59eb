#include "server/trace/tracer.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/fake_clock.h"

namespace sluice {
namespace {

// Keeps what it is given. The tests submit from one thread only, so it needs no lock.
class RecordingSink final : public SpanSink {
 public:
  void Submit(SpanData span) override { spans.push_back(std::move(span)); }

  std::vector<SpanData> spans;
};

// Trace ids 0x10, 0x11, ... and span ids 0x01, 0x02, ... (in the last byte), in order of use.
class CountingIdGenerator final : public IdGenerator {
 public:
  TraceId NewTraceId() override { return TraceIdEndingIn(next_trace_++); }
  SpanId NewSpanId() override { return SpanIdEndingIn(next_span_++); }

  static TraceId TraceIdEndingIn(uint8_t last) {
    TraceId id{};
    id[15] = last;
    return id;
  }
  static SpanId SpanIdEndingIn(uint8_t last) {
    SpanId id{};
    id[7] = last;
    return id;
  }

 private:
  uint8_t next_trace_ = 0x10;
  uint8_t next_span_ = 0x01;
};

constexpr int64_t kStartMicros = 1700000000000000;

TraceContext Caller(bool sampled, bool deferred = false) {
  TraceContext caller;
  caller.trace_id = TraceId{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6,
                            0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36};
  caller.span_id = SpanId{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7};
  caller.sampled = sampled;
  caller.sampling_deferred = deferred;
  caller.trace_state = "rojo=00f067aa0ba902b7";
  return caller;
}

class TracerTest : public ::testing::Test {
 protected:
  Tracer MakeTracer(double ratio) {
    TracerOptions options;
    options.sampling_ratio = ratio;
    return Tracer(sink_, clock_, ids_, options);
  }

  RecordingSink sink_;
  FakeClock clock_{kStartMicros};
  CountingIdGenerator ids_;
};

// Verifies a sampled caller's trace is continued under the caller's span, whatever the ratio.
TEST_F(TracerTest, ContinuesSampledCallersTrace) {
  Tracer tracer = MakeTracer(0.0);
  const TraceContext caller = Caller(/*sampled=*/true);
  Span span = tracer.StartCall("ShouldRateLimit", caller);
  ASSERT_TRUE(span.active());
  clock_.AdvanceMicros(250);
  span.End();

  ASSERT_EQ(sink_.spans.size(), 1u);
  const SpanData& data = sink_.spans[0];
  EXPECT_EQ(data.trace_id, caller.trace_id);
  EXPECT_EQ(data.parent_span_id, caller.span_id);
  EXPECT_EQ(data.span_id, CountingIdGenerator::SpanIdEndingIn(0x01));
  EXPECT_TRUE(data.remote_parent);
  EXPECT_EQ(data.trace_state, "rojo=00f067aa0ba902b7");
  EXPECT_EQ(data.name, "ShouldRateLimit");
  EXPECT_EQ(data.kind, SpanKind::kServer);
  EXPECT_EQ(data.trace_flags, 1);
  EXPECT_EQ(data.start_unix_nanos, kStartMicros * 1000);
  EXPECT_EQ(data.end_unix_nanos, (kStartMicros + 250) * 1000);
}

// Verifies an unsampled caller gets an inactive span on which everything does nothing.
TEST_F(TracerTest, DoesNotTraceUnsampledCaller) {
  Tracer tracer = MakeTracer(1.0);
  {
    Span span = tracer.StartCall("ShouldRateLimit", Caller(/*sampled=*/false));
    EXPECT_FALSE(span.active());
    EXPECT_FALSE(span.parent().active());
    span.Add("key", "value");
    span.Add("hits", int64_t{3});
    span.SetError("ignored");
    EXPECT_FALSE(Tracer::StartChild(span.parent(), "redis", SpanKind::kClient).active());
    span.End();
  }
  EXPECT_TRUE(sink_.spans.empty());
}

// Verifies a caller that left the decision to us is sampled by the ratio over its trace id.
TEST_F(TracerTest, DecidesForDeferringCallerByRatio) {
  Tracer always = MakeTracer(1.0);
  Span traced = always.StartCall("call", Caller(/*sampled=*/false, /*deferred=*/true));
  ASSERT_TRUE(traced.active());
  EXPECT_EQ(traced.data().trace_id, Caller(false).trace_id);
  EXPECT_EQ(traced.data().parent_span_id, Caller(false).span_id);

  Tracer never = MakeTracer(0.0);
  EXPECT_FALSE(never.StartCall("call", Caller(/*sampled=*/true, /*deferred=*/true)).active());
}

// Verifies a call without a caller context at ratio 1 is the root of a new trace.
TEST_F(TracerTest, StartsRootWithoutCaller) {
  Tracer tracer = MakeTracer(1.0);
  tracer.StartCall("ShouldRateLimit", std::nullopt).End();

  ASSERT_EQ(sink_.spans.size(), 1u);
  const SpanData& data = sink_.spans[0];
  EXPECT_EQ(data.trace_id, CountingIdGenerator::TraceIdEndingIn(0x10));
  EXPECT_EQ(data.span_id, CountingIdGenerator::SpanIdEndingIn(0x01));
  EXPECT_FALSE(IsValid(data.parent_span_id));
  EXPECT_FALSE(data.remote_parent);
  EXPECT_TRUE(data.trace_state.empty());
}

// Verifies ratio 0 traces no call without a caller context.
TEST_F(TracerTest, RatioZeroTracesNothing) {
  Tracer tracer = MakeTracer(0.0);
  for (int i = 0; i < 100; ++i) {
    EXPECT_FALSE(tracer.StartCall("call", std::nullopt).active());
  }
  EXPECT_TRUE(sink_.spans.empty());
}

// Verifies children share the trace, name their parent's span, and may end after it.
TEST_F(TracerTest, ChildrenContinueParentsTrace) {
  Tracer tracer = MakeTracer(1.0);
  Span call = tracer.StartCall("call", Caller(/*sampled=*/true));
  const TraceParent parent = call.parent();
  ASSERT_TRUE(parent.active());
  clock_.AdvanceMicros(10);
  Span redis = Tracer::StartChild(parent, "redis EVALSHA", SpanKind::kClient);
  Span cache = Tracer::StartChildAt(parent, "over-limit cache", SpanKind::kInternal, 12345);
  Span grandchild = Tracer::StartChild(redis.parent(), "retry", SpanKind::kClient);
  call.End();
  cache.End();
  grandchild.End();
  redis.End();

  ASSERT_EQ(sink_.spans.size(), 4u);
  const SpanData& call_data = sink_.spans[0];
  const SpanData& cache_data = sink_.spans[1];
  const SpanData& grandchild_data = sink_.spans[2];
  const SpanData& redis_data = sink_.spans[3];
  for (const SpanData& child : {cache_data, grandchild_data, redis_data}) {
    EXPECT_EQ(child.trace_id, call_data.trace_id) << child.name;
    EXPECT_TRUE(child.trace_state.empty()) << child.name;
    EXPECT_FALSE(child.remote_parent) << child.name;
  }
  EXPECT_EQ(redis_data.parent_span_id, call_data.span_id);
  EXPECT_EQ(cache_data.parent_span_id, call_data.span_id);
  EXPECT_EQ(grandchild_data.parent_span_id, redis_data.span_id);
  EXPECT_NE(redis_data.span_id, call_data.span_id);
  EXPECT_NE(cache_data.span_id, redis_data.span_id);
  EXPECT_EQ(redis_data.kind, SpanKind::kClient);
  EXPECT_EQ(cache_data.kind, SpanKind::kInternal);
  EXPECT_EQ(redis_data.start_unix_nanos, (kStartMicros + 10) * 1000);
  EXPECT_EQ(cache_data.start_unix_nanos, int64_t{12345} * 1000);
}

// Verifies End stamps the end time and submits once; later Ends and destruction do nothing.
TEST_F(TracerTest, EndsOnce) {
  Tracer tracer = MakeTracer(1.0);
  {
    Span span = tracer.StartCall("call", std::nullopt);
    clock_.AdvanceMicros(100);
    span.End();
    EXPECT_FALSE(span.active());
    clock_.AdvanceMicros(100);
    span.End();
  }
  ASSERT_EQ(sink_.spans.size(), 1u);
  EXPECT_EQ(sink_.spans[0].end_unix_nanos, (kStartMicros + 100) * 1000);
}

// Verifies an active span that goes out of scope is ended and submitted.
TEST_F(TracerTest, SubmitsOnDestruction) {
  Tracer tracer = MakeTracer(1.0);
  {
    Span span = tracer.StartCall("call", std::nullopt);
    clock_.AdvanceMicros(40);
    EXPECT_TRUE(sink_.spans.empty());
  }
  ASSERT_EQ(sink_.spans.size(), 1u);
  EXPECT_EQ(sink_.spans[0].end_unix_nanos, (kStartMicros + 40) * 1000);
}

// Verifies moving a span hands over the one submission: the moved-from span is inactive, and
// move assignment ends the span it overwrites.
TEST_F(TracerTest, MovesHandOverTheSpan) {
  Tracer tracer = MakeTracer(1.0);
  Span first = tracer.StartCall("first", std::nullopt);
  Span moved(std::move(first));
  EXPECT_FALSE(first.active());  // NOLINT(bugprone-use-after-move): its state is specified.
  ASSERT_TRUE(moved.active());
  EXPECT_TRUE(sink_.spans.empty());

  Span second = tracer.StartCall("second", std::nullopt);
  clock_.AdvanceMicros(5);
  moved = std::move(second);
  ASSERT_EQ(sink_.spans.size(), 1u);
  EXPECT_EQ(sink_.spans[0].name, "first");
  EXPECT_EQ(sink_.spans[0].end_unix_nanos, (kStartMicros + 5) * 1000);
  EXPECT_FALSE(second.active());  // NOLINT(bugprone-use-after-move)

  clock_.AdvanceMicros(5);
  moved.End();
  first.End();
  second.End();
  ASSERT_EQ(sink_.spans.size(), 2u);
  EXPECT_EQ(sink_.spans[1].name, "second");
  EXPECT_EQ(sink_.spans[1].end_unix_nanos, (kStartMicros + 10) * 1000);
}

// Verifies a long value is cut to kMaxSpanValueBytes without splitting a UTF-8 character, and
// one that fits is kept whole.
TEST_F(TracerTest, CutsLongValuesAtCharacterBoundary) {
  Tracer tracer = MakeTracer(1.0);
  Span span = tracer.StartCall("call", std::nullopt);
  // The cut falls at byte 253, inside the two-byte "é" at 252..253: it is dropped whole.
  const std::string long_value = std::string(252, 'a') + "\xc3\xa9" + std::string(50, 'b');
  const std::string fitting = std::string(kMaxSpanValueBytes, 'c');
  span.Add("long", long_value);
  span.Add("fitting", fitting);
  span.SetError(long_value);
  span.End();

  ASSERT_EQ(sink_.spans.size(), 1u);
  const SpanData& data = sink_.spans[0];
  const SpanAttribute* cut = data.Find("long");
  ASSERT_NE(cut, nullptr);
  EXPECT_EQ(std::get<std::string>(cut->value), std::string(252, 'a') + "...");
  const SpanAttribute* whole = data.Find("fitting");
  ASSERT_NE(whole, nullptr);
  EXPECT_EQ(std::get<std::string>(whole->value), fitting);
  EXPECT_EQ(data.status_message, std::string(252, 'a') + "...");
}

// Verifies attributes past kMaxSpanAttributes are counted as dropped, whatever their type.
TEST_F(TracerTest, CountsAttributesPastTheLimit) {
  Tracer tracer = MakeTracer(1.0);
  Span span = tracer.StartCall("call", std::nullopt);
  for (size_t i = 0; i < kMaxSpanAttributes; ++i) {
    span.Add("n", static_cast<int64_t>(i));  // keys are literals; one may repeat
  }
  span.Add("string", "x");
  span.Add("bool", true);
  span.Add("double", 0.5);
  span.Add("int", int64_t{7});
  span.End();

  ASSERT_EQ(sink_.spans.size(), 1u);
  const SpanData& data = sink_.spans[0];
  EXPECT_EQ(data.attributes.size(), kMaxSpanAttributes);
  EXPECT_EQ(data.dropped_attributes, 4u);
  EXPECT_EQ(data.Find("string"), nullptr);
  EXPECT_EQ(std::get<int64_t>(data.attributes.back().value), 31);
}

// Verifies attributes keep their types and SetError sets the error status and message.
TEST_F(TracerTest, RecordsAttributesAndError) {
  Tracer tracer = MakeTracer(1.0);
  Span span = tracer.StartCall("call", std::nullopt);
  EXPECT_EQ(span.data().status, SpanStatus::kUnset);
  span.Add("domain", "edge");
  span.Add("hits", int64_t{2});
  span.Add("over_limit", true);
  span.Add("ratio", 0.75);
  span.SetError("redis unavailable");
  span.End();

  ASSERT_EQ(sink_.spans.size(), 1u);
  const SpanData& data = sink_.spans[0];
  EXPECT_EQ(data.status, SpanStatus::kError);
  EXPECT_EQ(data.status_message, "redis unavailable");
  ASSERT_NE(data.Find("domain"), nullptr);
  EXPECT_EQ(std::get<std::string>(data.Find("domain")->value), "edge");
  ASSERT_NE(data.Find("hits"), nullptr);
  EXPECT_EQ(std::get<int64_t>(data.Find("hits")->value), 2);
  ASSERT_NE(data.Find("over_limit"), nullptr);
  EXPECT_EQ(std::get<bool>(data.Find("over_limit")->value), true);
  ASSERT_NE(data.Find("ratio"), nullptr);
  EXPECT_EQ(std::get<double>(data.Find("ratio")->value), 0.75);
  EXPECT_EQ(data.Find("missing"), nullptr);
}

struct TruncatedCase {
  std::string text;
  size_t max_bytes;
  std::string want;
};

// Verifies Truncated's bound, ellipsis and UTF-8 boundaries, down to bounds too small for "...".
TEST(TruncatedTest, CutsAtCharacterBoundaryWithinBound) {
  const std::vector<TruncatedCase> cases = {
      {"", 0, ""},
      {"abc", 3, "abc"},
      {"abcd", 4, "abcd"},
      {"abcde", 4, "a..."},
      {"abcdef", 3, "..."},
      {"abcdef", 2, ".."},
      {"abcdef", 0, ""},
      {"a\xc3\xa9z", 4, "a\xc3\xa9z"},                         // fits: not cut
      {"ab\xc3\xa9zzz", 5, "ab..."},                           // cut just before "é"
      {"ab\xc3\xa9zzz", 6, "ab..."},                           // cut inside "é": backs off
      {"a\xe2\x82\xac\xe2\x82\xaczz", 7, "a\xe2\x82\xac..."},  // first "€" kept whole
      {"a\xe2\x82\xac\xe2\x82\xaczz", 6, "a..."},              // last byte of "€": backs off
  };
  for (const TruncatedCase& c : cases) {
    const std::string got = Truncated(c.text, c.max_bytes);
    EXPECT_EQ(got, c.want) << "text '" << c.text << "' max " << c.max_bytes;
    EXPECT_LE(got.size(), c.max_bytes);
  }
}

}  // namespace
}  // namespace sluice
