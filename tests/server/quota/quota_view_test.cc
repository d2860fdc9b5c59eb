#include "server/quota/quota_view.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config/config_loader.h"
#include "server/quota/bucket_key.h"
#include "server/quota/quota_server.h"

namespace sluice::quota {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

QuotaView ViewOf(const std::string& value) {
  BucketId id;
  (*id.mutable_bucket())["api_key"] = value;
  QuotaView view;
  view.streams = 1;
  view.buckets = 1;
  QuotaView::Line& line = view.lines.emplace_back();
  line.domain = "edge";
  line.bucket = BucketKey(id);
  line.kind = QuotaRule::Kind::kShare;
  line.rate = 100;
  line.demands = {20};
  line.sent = {100};
  return view;
}

// Verifies that by default no descriptor value reaches the page: it is shown as its length and
// a hash, the same value the same hash, another value another.
TEST(QuotaViewTest, ValuesAreRedactedByDefault) {
  const std::string page = DescribeQuotaView(ViewOf("secret-key-123"), false);
  EXPECT_THAT(page, Not(HasSubstr("secret-key-123")));
  EXPECT_THAT(page, HasSubstr("api_key=<redacted 14 bytes #"));
  EXPECT_THAT(page, HasSubstr("edge"));
  EXPECT_THAT(page, HasSubstr("100.0/s; here 1 (demand 20.0; sent 100.0)"));
  EXPECT_EQ(page, DescribeQuotaView(ViewOf("secret-key-123"), false));
  EXPECT_NE(page, DescribeQuotaView(ViewOf("secret-key-124"), false));
  EXPECT_THAT(DescribeQuotaView(ViewOf("secret-key-123"), true), HasSubstr("api_key=secret-key-123"));
}

// Verifies that no byte a client sent can forge a line or a control sequence: a newline, a
// carriage return, an escape byte and non-ASCII are written \xNN, a backslash too, and long
// values are cut.
TEST(QuotaViewTest, ControlBytesAreEscapedAndLongTextCut) {
  const std::string page =
      DescribeQuotaView(ViewOf("a\nedge forged=1: 9999/s\r\x1b[2J\\\xc3\xa9"), true);
  EXPECT_EQ(std::count(page.begin(), page.end(), '\n'), 2);  // the summary and one bucket
  EXPECT_THAT(page, HasSubstr("a\\x0aedge forged=1: 9999/s\\x0d\\x1b[2J\\x5c\\xc3\\xa9"));
  EXPECT_EQ(PageText(std::string(100, 'v')), std::string(kShownBytes, 'v') + "...");
}

// Verifies the page's bound on lines (QuotaOptions::page_buckets, the cap on what a client's
// many buckets can make GET /rlqs print): of six buckets a stream reports, at 10 to 60 requests a
// second, a cap of 3 lists only the three most demanded, most demanded first, and says that 3
// less demanded are left out; the summary still counts all six.
TEST(QuotaViewTest, PageListsOnlyTheMostDemandedBucketsUpToItsCap) {
  auto config = LoadConfigText("q.yaml", R"(domain: q
descriptors:
  - key: route
    rate_limit: {unit: second, requests_per_unit: 1000}
)");
  ASSERT_TRUE(config.ok()) << config.status();
  ConfigStore store(std::shared_ptr<const Config>(std::move(*config)));
  QuotaOptions options;
  options.page_buckets = 3;
  options.page_values = true;
  QuotaServer server(store, options);
  auto id = server.Open([](QuotaResponse) {});
  ASSERT_TRUE(id.ok()) << id.status();
  constexpr int64_t kSecond = 1'000'000;
  int64_t now_us = 1000 * kSecond;
  // Envoy's immediate report of each new bucket (0 s: it measures nothing), then a tick of 1 s
  // with 10 * i requests for bucket b<i>.
  for (bool first : {true, false}) {
    Reports reports;
    reports.set_domain("q");
    for (int i = 1; i <= 6; ++i) {
      auto* usage = reports.add_bucket_quota_usages();
      (*usage->mutable_bucket_id()->mutable_bucket())["route"] = absl::StrCat("b", i);
      usage->mutable_time_elapsed()->set_seconds(first ? 0 : 1);
      usage->set_num_requests_allowed(first ? 1 : 10 * i);
    }
    ASSERT_TRUE(server.Report(*id, reports, now_us).ok());
    now_us += kSecond;
  }
  server.Tick(now_us);

  const std::string page = server.Describe();
  EXPECT_THAT(page, HasSubstr("1 streams, 6 buckets, 6 subscriptions")) << page;
  const size_t b6 = page.find("q route=b6: 1000.0/s; here 1 (demand 60.0");
  const size_t b5 = page.find("q route=b5: 1000.0/s; here 1 (demand 50.0");
  const size_t b4 = page.find("q route=b4: 1000.0/s; here 1 (demand 40.0");
  ASSERT_NE(b6, std::string::npos) << page;
  ASSERT_NE(b5, std::string::npos) << page;
  ASSERT_NE(b4, std::string::npos) << page;
  EXPECT_LT(b6, b5) << page;
  EXPECT_LT(b5, b4) << page;
  for (const char* left_out : {"route=b3", "route=b2", "route=b1"}) {
    EXPECT_THAT(page, Not(HasSubstr(left_out))) << page;
  }
  EXPECT_THAT(page, HasSubstr("\n... and 3 buckets less demanded\n")) << page;
  EXPECT_EQ(std::count(page.begin(), page.end(), '\n'), 5) << page;  // summary, 3 lines, the rest
}

}  // namespace
}  // namespace sluice::quota
