#include "server/common/log_text.h"

#include <string>

#include "gtest/gtest.h"

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

}  // namespace
}  // namespace sluice
