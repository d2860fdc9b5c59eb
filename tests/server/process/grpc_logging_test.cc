#include "server/process/grpc_logging.h"

#include <grpc/support/log.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "server/common/logging.h"
#include "tests/support/stderr_capture.h"

namespace sluice {
namespace {

using testing::StderrCapture;

std::vector<std::string> LinesWith(const std::string& log, absl::string_view part) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(log, '\n', absl::SkipEmpty())) {
    if (absl::StrContains(line, part)) lines.emplace_back(line);
  }
  return lines;
}

// Verifies gRPC's own error lines reach Sluice's log rate-limited (a peer that breaks off a
// thousand TLS handshakes a second writes a line a second, not a thousand), cut, and with the
// peer's bytes escaped.
TEST(GrpcLoggingTest, GrpcErrorsAreRateLimitedCutAndEscaped) {
  RouteGrpcLogs();
  const std::string hostile(4000, 'A');
  StderrCapture capture;
  for (int i = 0; i < 1000; ++i) {
    gpr_log(GPR_ERROR, "handshake failed from peer: \x07%s", hostile.c_str());
  }
  const std::string log = capture.Stop();
  const std::vector<std::string> lines = LinesWith(log, "handshake failed from peer");
  ASSERT_GE(lines.size(), 1u) << log;
  EXPECT_LE(lines.size(), 3u) << "not rate-limited:\n" << log.substr(0, 2000);
  for (const std::string& line : lines) {
    EXPECT_LT(line.size(), 800u) << "not cut: " << line.size() << " bytes";
    EXPECT_EQ(line.find('\x07'), std::string::npos) << "a raw control byte";
    EXPECT_TRUE(absl::StrContains(line, "grpc ")) << line;
  }
  EXPECT_TRUE(absl::StrContains(lines[0], "\\x07")) << lines[0];
}

// Verifies --log_level applies to gRPC's lines as to Sluice's own: at error, its info lines
// are dropped.
TEST(GrpcLoggingTest, LogLevelApplies) {
  RouteGrpcLogs();
  const LogLevel before = MinLogLevel();
  SetMinLogLevel(LogLevel::kError);
  gpr_set_log_verbosity(GPR_LOG_SEVERITY_DEBUG);
  // The error limiter may have admitted a line within the last second (the test above).
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  StderrCapture capture;
  gpr_log(GPR_INFO, "an info line from grpc");
  gpr_log(GPR_ERROR, "an error line from grpc");
  const std::string log = capture.Stop();
  SetMinLogLevel(before);
  gpr_set_log_verbosity(GPR_LOG_SEVERITY_ERROR);
  EXPECT_FALSE(absl::StrContains(log, "an info line from grpc")) << log;
  EXPECT_TRUE(absl::StrContains(log, "an error line from grpc")) << log;
}

}  // namespace
}  // namespace sluice
