#include "server/trace/trace_context.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

// The W3C specification's example ids.
constexpr char kTraceId[] = "4bf92f3577b34da6a3ce929d0e0e4736";
constexpr char kSpanId[] = "00f067aa0ba902b7";
constexpr char kOtherTraceId[] = "80f198ee56343ba864fe8b2a57d3eff7";
constexpr char kOtherSpanId[] = "e457b5a2e4d86bd1";
constexpr char kZeroTraceId[] = "00000000000000000000000000000000";
constexpr char kZeroSpanId[] = "0000000000000000";
constexpr char kShortTraceId[] = "a3ce929d0e0e4736";
constexpr char kPaddedShortTraceId[] = "0000000000000000a3ce929d0e0e4736";

std::string Traceparent(absl::string_view flags = "01", absl::string_view version = "00",
                        absl::string_view trace_id = kTraceId,
                        absl::string_view span_id = kSpanId) {
  return absl::StrCat(version, "-", trace_id, "-", span_id, "-", flags);
}

// A valid tracestate of exactly `bytes` bytes in three members. REQUIRES: 509 <= bytes <= 764.
std::string TraceStateOfBytes(size_t bytes) {
  return absl::StrCat("a=", std::string(250, 'x'), ",b=", std::string(250, 'x'),
                      ",c=", std::string(bytes - 508, 'x'));
}

// `count` members k0=v,k1=v,...
std::string TraceStateOfMembers(int count) {
  std::string state;
  for (int i = 0; i < count; ++i) {
    absl::StrAppend(&state, i == 0 ? "" : ",", "k", i, "=v");
  }
  return state;
}

enum class Sampling { kSampled, kNotSampled, kDeferred };

struct Expected {
  std::string trace_id;
  std::string span_id;
  Sampling sampling;
  std::string trace_state;
};

struct ExtractCase {
  std::string name;
  std::map<std::string, std::string> headers;
  // nullopt: no context.
  std::optional<Expected> want;
};

std::optional<TraceContext> Extract(const std::map<std::string, std::string>& headers) {
  return ExtractTraceContext(
      [&headers](absl::string_view name) -> std::optional<absl::string_view> {
        auto it = headers.find(std::string(name));
        if (it == headers.end()) {
          return std::nullopt;
        }
        return absl::string_view(it->second);
      });
}

void RunCases(const std::vector<ExtractCase>& cases) {
  for (const ExtractCase& c : cases) {
    SCOPED_TRACE(c.name);
    const std::optional<TraceContext> got = Extract(c.headers);
    if (!c.want.has_value()) {
      EXPECT_FALSE(got.has_value()) << "extracted trace " << ToHex(got->trace_id);
      continue;
    }
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(ToHex(got->trace_id), c.want->trace_id);
    EXPECT_EQ(ToHex(got->span_id), c.want->span_id);
    EXPECT_EQ(got->sampling_deferred, c.want->sampling == Sampling::kDeferred);
    if (c.want->sampling != Sampling::kDeferred) {
      EXPECT_EQ(got->sampled, c.want->sampling == Sampling::kSampled);
    }
    EXPECT_EQ(got->trace_state, c.want->trace_state);
  }
}

const Expected kSampled{kTraceId, kSpanId, Sampling::kSampled, ""};
const Expected kUnsampled{kTraceId, kSpanId, Sampling::kNotSampled, ""};

// Verifies traceparent's syntax: version rules, lower-case hex, zero ids, flags, whitespace.
TEST(TraceContextTest, ReadsTraceparent) {
  RunCases({
      {"sampled", {{"traceparent", Traceparent("01")}}, kSampled},
      {"unsampled", {{"traceparent", Traceparent("00")}}, kUnsampled},
      {"only bit 0 samples: 02", {{"traceparent", Traceparent("02")}}, kUnsampled},
      {"other bits ignored: 03", {{"traceparent", Traceparent("03")}}, kSampled},
      {"surrounding whitespace", {{"traceparent", " \t" + Traceparent() + "\t "}}, kSampled},
      {"later version, exact length", {{"traceparent", Traceparent("01", "cc")}}, kSampled},
      {"later version, more fields",
       {{"traceparent", Traceparent("01", "01") + "-what-comes-next"}},
       kSampled},
      {"later version, no '-' after flags",
       {{"traceparent", Traceparent("01", "01") + "x"}},
       std::nullopt},
      {"version 00 with more fields", {{"traceparent", Traceparent() + "-00"}}, std::nullopt},
      {"version ff", {{"traceparent", Traceparent("01", "ff")}}, std::nullopt},
      {"version not hex", {{"traceparent", Traceparent("01", "0x")}}, std::nullopt},
      {"version upper case", {{"traceparent", Traceparent("01", "0A")}}, std::nullopt},
      {"trace id upper case",
       {{"traceparent", Traceparent("01", "00", "4BF92F3577B34DA6A3CE929D0E0E4736")}},
       std::nullopt},
      {"span id upper case",
       {{"traceparent", Traceparent("01", "00", kTraceId, "00F067AA0BA902B7")}},
       std::nullopt},
      {"flags upper case", {{"traceparent", Traceparent("0A")}}, std::nullopt},
      {"flags not hex", {{"traceparent", Traceparent("0g")}}, std::nullopt},
      {"span id not hex",
       {{"traceparent", Traceparent("01", "00", kTraceId, "00f067aa0ba902bz")}},
       std::nullopt},
      {"trace id all zeros",
       {{"traceparent", Traceparent("01", "00", kZeroTraceId)}},
       std::nullopt},
      {"span id all zeros",
       {{"traceparent", Traceparent("01", "00", kTraceId, kZeroSpanId)}},
       std::nullopt},
      {"trace id one digit short",
       {{"traceparent", Traceparent("01", "00", std::string(kTraceId).substr(1))}},
       std::nullopt},
      {"64-bit trace id", {{"traceparent", Traceparent("01", "00", kShortTraceId)}}, std::nullopt},
      {"wrong separator",
       {{"traceparent", absl::StrCat("00-", kTraceId, "_", kSpanId, "-01")}},
       std::nullopt},
      {"empty", {{"traceparent", ""}}, std::nullopt},
      {"no headers", {}, std::nullopt},
  });
}

// Verifies tracestate is kept, trimmed, when valid and dropped (context kept) when not.
TEST(TraceContextTest, KeepsOnlyValidTracestate) {
  auto with_state = [](std::string state) {
    return std::map<std::string, std::string>{{"traceparent", Traceparent()},
                                              {"tracestate", std::move(state)}};
  };
  auto kept = [](std::string state) {
    Expected want = kSampled;
    want.trace_state = std::move(state);
    return want;
  };
  const std::string at_512 = TraceStateOfBytes(512);
  const std::string at_32 = TraceStateOfMembers(32);
  RunCases({
      {"absent", {{"traceparent", Traceparent()}}, kSampled},
      {"two members", with_state("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"),
       kept("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")},
      {"trimmed", with_state(" \trojo=1 , congo=2\t "), kept("rojo=1 , congo=2")},
      {"multi-tenant keys", with_state("fw529a3039@dt=x,0tenant@sys_-*/1=y"),
       kept("fw529a3039@dt=x,0tenant@sys_-*/1=y")},
      {"key characters", with_state("a_-*/9=1"), kept("a_-*/9=1")},
      {"value with inner space and punctuation", with_state("a=x y!~"), kept("a=x y!~")},
      {"empty members", with_state("a=1,,b=2, ,"), kept("a=1,,b=2, ,")},
      {"empty header", with_state("  "), kSampled},
      {"512 bytes", with_state(at_512), kept(at_512)},
      {"513 bytes", with_state(TraceStateOfBytes(513)), kSampled},
      {"32 members", with_state(at_32), kept(at_32)},
      {"33 members", with_state(TraceStateOfMembers(33)), kSampled},
      {"256-byte value", with_state("a=" + std::string(256, 'v')),
       kept("a=" + std::string(256, 'v'))},
      {"257-byte value", with_state("a=" + std::string(257, 'v')), kSampled},
      {"upper-case key", with_state("Rojo=1"), kSampled},
      {"key starts with a digit", with_state("1a=1"), kSampled},
      {"key with a dot", with_state("a.b=1"), kSampled},
      {"no '='", with_state("rojo"), kSampled},
      {"empty key", with_state("=1"), kSampled},
      {"empty value", with_state("rojo="), kSampled},
      {"'=' in value", with_state("a=b=c"), kSampled},
      {"control character in value", with_state("a=b\x01"), kSampled},
      {"duplicate key", with_state("a=1,b=2,a=3"), kSampled},
      {"empty tenant", with_state("@sys=1"), kSampled},
      {"empty system", with_state("tenant@=1"), kSampled},
      {"system id 14 characters", with_state("t@abcdefghijklmn=1"), kept("t@abcdefghijklmn=1")},
      {"system id 15 characters", with_state("t@abcdefghijklmno=1"), kSampled},
      {"two '@'", with_state("a@b@c=1"), kSampled},
  });
}

// Verifies the single b3 header: ids, sampling states, 64-bit trace ids, malformed forms.
TEST(TraceContextTest, ReadsB3SingleHeader) {
  auto b3 = [](std::string value) { return std::map<std::string, std::string>{{"b3", value}}; };
  const Expected deferred{kTraceId, kSpanId, Sampling::kDeferred, ""};
  const std::string ids = absl::StrCat(kTraceId, "-", kSpanId);
  RunCases({
      {"sampled", b3(ids + "-1"), kSampled},
      {"debug", b3(ids + "-d"), kSampled},
      {"not sampled", b3(ids + "-0"), kUnsampled},
      {"no sampling state: deferred", b3(ids), deferred},
      {"with parent span id", b3(ids + "-1-" + kOtherSpanId), kSampled},
      {"surrounding whitespace", b3(" " + ids + "-1\t"), kSampled},
      {"64-bit trace id padded", b3(absl::StrCat(kShortTraceId, "-", kSpanId, "-1")),
       Expected{kPaddedShortTraceId, kSpanId, Sampling::kSampled, ""}},
      {"sampling only: 1", b3("1"), std::nullopt},
      {"sampling only: 0", b3("0"), std::nullopt},
      {"sampling only: d", b3("d"), std::nullopt},
      {"unknown sampling state", b3(ids + "-2"), std::nullopt},
      {"sampling state 'true'", b3(ids + "-true"), std::nullopt},
      {"empty sampling state", b3(ids + "-"), std::nullopt},
      {"five fields", b3(ids + "-1-" + kOtherSpanId + "-1"), std::nullopt},
      {"malformed parent span id", b3(ids + "-1-xyz"), std::nullopt},
      {"upper-case trace id", b3(absl::StrCat("4BF92F3577B34DA6A3CE929D0E0E4736-", kSpanId)),
       std::nullopt},
      {"upper-case span id", b3(absl::StrCat(kTraceId, "-00F067AA0BA902B7")), std::nullopt},
      {"trace id of 20 digits", b3(absl::StrCat("a3ce929d0e0e47361234-", kSpanId)), std::nullopt},
      {"span id of 15 digits", b3(absl::StrCat(kTraceId, "-00f067aa0ba902b")), std::nullopt},
      {"zero trace id", b3(absl::StrCat(kZeroTraceId, "-", kSpanId, "-1")), std::nullopt},
      {"zero 64-bit trace id", b3(absl::StrCat(kZeroSpanId, "-", kSpanId, "-1")), std::nullopt},
      {"zero span id", b3(absl::StrCat(kTraceId, "-", kZeroSpanId, "-1")), std::nullopt},
      {"empty", b3(""), std::nullopt},
  });
}

// Verifies the x-b3-* headers: both ids required, sampled values, debug flag, deferral.
TEST(TraceContextTest, ReadsB3MultipleHeaders) {
  auto multi = [](std::map<std::string, std::string> more) {
    more.emplace("x-b3-traceid", kTraceId);
    more.emplace("x-b3-spanid", kSpanId);
    return more;
  };
  const Expected deferred{kTraceId, kSpanId, Sampling::kDeferred, ""};
  RunCases({
      {"sampled 1", multi({{"x-b3-sampled", "1"}}), kSampled},
      {"sampled true", multi({{"x-b3-sampled", "true"}}), kSampled},
      {"sampled 0", multi({{"x-b3-sampled", "0"}}), kUnsampled},
      {"sampled false", multi({{"x-b3-sampled", "false"}}), kUnsampled},
      {"no sampled: deferred", multi({}), deferred},
      {"unknown sampled value: as if absent", multi({{"x-b3-sampled", "yes"}}), deferred},
      {"debug flag", multi({{"x-b3-flags", "1"}}), kSampled},
      {"debug flag beats sampled 0", multi({{"x-b3-sampled", "0"}, {"x-b3-flags", "1"}}), kSampled},
      {"other flags ignored", multi({{"x-b3-sampled", "0"}, {"x-b3-flags", "0"}}), kUnsampled},
      {"parent span id ignored", multi({{"x-b3-sampled", "1"}, {"x-b3-parentspanid", "zz"}}),
       kSampled},
      {"whitespace trimmed",
       {{"x-b3-traceid", absl::StrCat(" ", kTraceId)},
        {"x-b3-spanid", absl::StrCat(kSpanId, "\t")},
        {"x-b3-sampled", " 1 "}},
       kSampled},
      {"64-bit trace id padded",
       {{"x-b3-traceid", kShortTraceId}, {"x-b3-spanid", kSpanId}, {"x-b3-sampled", "1"}},
       Expected{kPaddedShortTraceId, kSpanId, Sampling::kSampled, ""}},
      {"no span id", {{"x-b3-traceid", kTraceId}, {"x-b3-sampled", "1"}}, std::nullopt},
      {"no trace id", {{"x-b3-spanid", kSpanId}, {"x-b3-sampled", "1"}}, std::nullopt},
      {"sampled alone", {{"x-b3-sampled", "1"}}, std::nullopt},
      {"upper-case trace id",
       {{"x-b3-traceid", "4BF92F3577B34DA6A3CE929D0E0E4736"}, {"x-b3-spanid", kSpanId}},
       std::nullopt},
      {"zero span id", {{"x-b3-traceid", kTraceId}, {"x-b3-spanid", kZeroSpanId}}, std::nullopt},
  });
}

// Verifies a valid traceparent wins over b3, b3 over x-b3-*, and a malformed or id-less header
// gives way to the next format.
TEST(TraceContextTest, PrefersTraceparentThenB3SingleThenMultiple) {
  const std::string b3_other = absl::StrCat(kOtherTraceId, "-", kOtherSpanId, "-0");
  const Expected other{kOtherTraceId, kOtherSpanId, Sampling::kNotSampled, ""};
  const Expected multi_other{kOtherTraceId, kOtherSpanId, Sampling::kSampled, ""};
  RunCases({
      {"traceparent over b3 and x-b3",
       {{"traceparent", Traceparent()},
        {"tracestate", "a=1"},
        {"b3", b3_other},
        {"x-b3-traceid", kOtherTraceId},
        {"x-b3-spanid", kOtherSpanId}},
       Expected{kTraceId, kSpanId, Sampling::kSampled, "a=1"}},
      {"invalid traceparent gives way to b3, its tracestate dropped",
       {{"traceparent", Traceparent("01", "ff")}, {"tracestate", "a=1"}, {"b3", b3_other}},
       other},
      {"b3 over x-b3",
       {{"b3", b3_other}, {"x-b3-traceid", kTraceId}, {"x-b3-spanid", kSpanId}},
       other},
      {"malformed b3 gives way to x-b3",
       {{"b3", "garbage"},
        {"x-b3-traceid", kOtherTraceId},
        {"x-b3-spanid", kOtherSpanId},
        {"x-b3-sampled", "1"}},
       multi_other},
      {"sampling-only b3 gives way to x-b3",
       {{"b3", "0"},
        {"x-b3-traceid", kOtherTraceId},
        {"x-b3-spanid", kOtherSpanId},
        {"x-b3-sampled", "1"}},
       multi_other},
      {"invalid everything",
       {{"traceparent", "x"}, {"b3", "1"}, {"x-b3-traceid", kTraceId}},
       std::nullopt},
  });
}

}  // namespace
}  // namespace sluice
