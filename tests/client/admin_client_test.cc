#include "client/admin_client.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/process.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

// Verifies the request is the /json body of the descriptors given, each with the limit
// override when one is given, and a bad override is refused naming --limit.
TEST(AdminClientTest, BuildsTheRequestJson) {
  auto plain = AdminRequestJson("d", {"user=alice,plan=free"}, "");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(*plain,
            R"({"domain":"d","descriptors":[{"entries":[{"key":"user","value":"alice"},)"
            R"({"key":"plan","value":"free"}]}]})");
  auto limited = AdminRequestJson("d", {"user=alice", "user=bob"}, "100/Minute");
  ASSERT_TRUE(limited.ok()) << limited.status();
  EXPECT_THAT(*limited, HasSubstr(R"("limit":{"requestsPerUnit":100,"unit":"MINUTE"})"));
  for (const char* bad : {"100", "x/minute", "100/fortnight", "-1/second"}) {
    auto refused = AdminRequestJson("d", {"user=alice"}, bad);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_THAT(refused.status().message(), HasSubstr("--limit=")) << bad;
  }
}

// Verifies an inspect answer reads as a table per rule: the rule, its keys, state, the check
// of 0 hits and the cache entry.
TEST(AdminClientTest, FormatsAnInspectAnswer) {
  const std::string json = R"({"domain":"d","backend":"redis","descriptors":[
    {"entries":[{"key":"user","value":"alice"}],"matched":true,"stat_key":"d.user","rules":[
      {"algorithm":"fixed_window","limit":2,"unit":"minute","unit_multiplier":1,
       "period_us":60000000,"charge":"if_admitted","storage_key":"sluice:{d|user=alice}fw:60",
       "now_us":1796174916710431,
       "keys":[{"key":"sluice:{d|user=alice}fw:60:w29936248","role":"window","exists":true,
                "ttl_ms":23290,"readable":true}],
       "state":{"window_start_us":1796174880000000,"count":2},
       "check_of_0_hits":{"allowed":true,"remaining":0,"retry_after_us":0,
                          "reset_after_us":23289569},
       "over_limit_cache":{"denies_for_us":23287247,"min_hits":1,"limit":2}}]},
    {"entries":[{"key":"free","value":"x"}],"matched":true,"unlimited":true,"rules":[]},
    {"entries":[{"key":"tb","value":"x"}],"matched":true,"rules":[
      {"algorithm":"token_bucket","limit":5,"unit":"second","unit_multiplier":1,"burst":10,
       "charge":"if_admitted","storage_key":"k",
       "keys":[{"key":"k","role":"state","exists":false}],"state":{"fresh":true},
       "check_of_0_hits":{"allowed":true,"remaining":10,"retry_after_us":0,"reset_after_us":0},
       "over_limit_cache":"off"}]}]})";
  auto text = FormatInspectAnswer(json);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("domain d, backend redis\n"));
  EXPECT_THAT(*text, HasSubstr("user=alice  fixed_window 2/minute (charge if_admitted)\n"));
  EXPECT_THAT(*text, HasSubstr("  storage key  sluice:{d|user=alice}fw:60\n"));
  EXPECT_THAT(*text, HasSubstr("  window       sluice:{d|user=alice}fw:60:w29936248  "
                               "(ttl 23.290s)\n"));
  EXPECT_THAT(*text, HasSubstr("  state        count=2 window_start_us=1796174880000000\n"));
  EXPECT_THAT(*text, HasSubstr("  0 hits now   allowed, remaining 0, reset in 23.290s\n"));
  EXPECT_THAT(*text, HasSubstr("  cache here   denies >= 1 hits for 23.287s (limit 2)\n"));
  EXPECT_THAT(*text, HasSubstr("free=x  unlimited: no limit applies\n"));
  EXPECT_THAT(*text, HasSubstr("tb=x  token_bucket 5/second burst 10 (charge if_admitted)\n"));
  EXPECT_THAT(*text, HasSubstr("  key          k  (missing)\n"));
  EXPECT_THAT(*text, HasSubstr("  cache here   off\n"));
  EXPECT_FALSE(FormatInspectAnswer("not json").ok());
}

// Verifies a reset answer reads as the keys deleted and what else happened.
TEST(AdminClientTest, FormatsAResetAnswer) {
  auto text = FormatResetAnswer(R"({"domain":"d","backend":"redis","descriptors":[
    {"entries":[{"key":"user","value":"alice"}],"matched":true,"rules":[]}],
    "deleted":["k1"],"forgotten_here":1,"other_replicas":"told","result":"ok"})");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text,
            "reset d user=alice: 1 key deleted\n"
            "  k1\n"
            "  cache here      1 entry forgotten\n"
            "  other replicas  told\n"
            "  result          ok\n");
}

// Verifies a call to an address nothing listens on is kUnavailable naming it.
TEST(AdminClientTest, ReportsAnUnreachableServer) {
  const int port = testing::FreePort();
  auto answer = AdminPost(absl::StrCat("127.0.0.1:", port), "/admin/inspect", "{}", "",
                          absl::Seconds(2));
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(answer.status().message(), HasSubstr(absl::StrCat("127.0.0.1:", port)));
}

}  // namespace
}  // namespace sluice
