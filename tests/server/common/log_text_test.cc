#include "server/common/log_text.h"

#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "server/common/failure_reason.h"

namespace sluice {
namespace {

// Verifies that printable ASCII passes unchanged.
TEST(LogTextTest, KeepsPrintableText) {
  EXPECT_EQ(LogText("ERR unknown command 'FOO'"), "ERR unknown command 'FOO'");
}

// Verifies that control bytes, bytes past ASCII and backslashes cannot reach the log raw: a
// remote peer cannot end a line, ring a bell or pass an escape sequence to a terminal.
TEST(LogTextTest, EscapesWhatIsNotPrintable) {
  EXPECT_EQ(LogText(std::string("a\nb\x07\x1b[2J\\\xff", 10)), "a\\x0ab\\x07\\x1b[2J\\\\\\xff");
}

// Verifies that a long text is cut to the bound and says how long it was.
TEST(LogTextTest, CutsLongTextAndSaysHowLongItWas) {
  const std::string long_text(1 << 20, 'v');
  const std::string shown = LogText(long_text, 8);
  EXPECT_EQ(shown, "vvvvvvvv...(1048576 bytes)");
  EXPECT_EQ(LogText(long_text).size(), kLogTextMaxBytes + std::string("...(1048576 bytes)").size());
}

// Verifies a status reads as its code's name and its message, and that its payload never
// reaches the line: operator<< shows a failure reason as its byte, [sluice/failure_reason='\x07'].
TEST(LogTextTest, StatusShowsCodeAndMessageNeverThePayload) {
  const absl::Status status =
      WithFailureReason(absl::UnavailableError("redis 10.0.0.1:6379: connection refused"),
                        FailureReason::kCircuitOpen);
  std::ostringstream raw;
  raw << status;
  ASSERT_NE(raw.str().find("failure_reason='"), std::string::npos)
      << "the defect this guards against: " << raw.str();

  const std::string shown = LogStatus(status);
  EXPECT_EQ(shown, "UNAVAILABLE: redis 10.0.0.1:6379: connection refused");
  EXPECT_EQ(shown.find("failure_reason"), std::string::npos);
  for (char c : shown) {
    EXPECT_TRUE(c >= 0x20 && c < 0x7f) << static_cast<int>(c);
  }
  EXPECT_EQ(LogStatus(absl::OkStatus()), "OK");
}

// Verifies a status's message is escaped and cut like any remote text.
TEST(LogTextTest, StatusMessageIsEscapedAndCut) {
  const absl::Status status = absl::InternalError(std::string("ERR \x1b[31m\n", 10) +
                                                  std::string(1 << 20, 'x'));
  const std::string shown = LogStatus(status, 16);
  EXPECT_EQ(shown, "INTERNAL: ERR \\x1b[31m\\x0axxxxxx...(1048586 bytes)");
}

}  // namespace
}  // namespace sluice
