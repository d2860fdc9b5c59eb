#include "server/common/logging.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

// Runs `log` with stderr sent to a temporary file; returns what was written.
template <typename Fn>
std::string CaptureStderr(Fn log) {
  char path[] = "/tmp/sluice_logging_test_XXXXXX";
  const int fd = mkstemp(path);
  const int saved = dup(STDERR_FILENO);
  dup2(fd, STDERR_FILENO);
  log();
  dup2(saved, STDERR_FILENO);
  close(saved);
  std::string out;
  char buffer[4096];
  lseek(fd, 0, SEEK_SET);
  for (ssize_t n; (n = read(fd, buffer, sizeof(buffer))) > 0;) {
    out.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  unlink(path);
  return out;
}

class LoggingTest : public ::testing::Test {
 protected:
  void TearDown() override { SetLogFormat(LogFormat::kText); }
};

// Verifies the text format: level letter, UTC time, file:line, message, one line.
TEST_F(LoggingTest, TextLine) {
  const std::string out = CaptureStderr([] { SLUICE_LOG(WARNING) << "disk " << 42; });
  EXPECT_THAT(out, MatchesRegex("W [0-9T:.-]+Z logging_test\\.cc:[0-9]+\\] disk 42\n"));
}

// Verifies the JSON format is one object a line, with upstream's field names, and that quotes,
// backslashes, newlines and control bytes in the message are escaped.
TEST_F(LoggingTest, JsonLine) {
  SetLogFormat(LogFormat::kJson);
  const std::string out =
      CaptureStderr([] { SLUICE_LOG(ERROR) << "say \"hi\"\\ now\nnext\x01"; });
  EXPECT_THAT(out, MatchesRegex("\\{\"@timestamp\":\"[0-9T:.-]+Z\",\"level\":\"error\","
                                "\"caller\":\"logging_test\\.cc:[0-9]+\",.*\\}\n"));
  EXPECT_THAT(out, HasSubstr("\"@message\":\"say \\\"hi\\\"\\\\ now\\nnext\\u0001\"}"));
  EXPECT_EQ(out.find('\n'), out.size() - 1);
}

// Verifies the names the flag takes.
TEST_F(LoggingTest, ParsesFormats) {
  LogFormat format = LogFormat::kText;
  EXPECT_TRUE(ParseLogFormat("json", &format));
  EXPECT_EQ(format, LogFormat::kJson);
  EXPECT_TRUE(ParseLogFormat("text", &format));
  EXPECT_EQ(format, LogFormat::kText);
  EXPECT_FALSE(ParseLogFormat("JSON", &format));
  EXPECT_FALSE(ParseLogFormat("logfmt", &format));
}

}  // namespace
}  // namespace sluice
