#include "server/quota/quota_view.h"

#include <algorithm>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/quota/bucket_key.h"

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

}  // namespace
}  // namespace sluice::quota
