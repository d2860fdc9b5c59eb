#include "server/stats/process_metrics.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

// The value of the sample line of `name` in `text`, or -1.
double Value(const std::string& text, const std::string& name) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, name + " ")) {
      double value = 0;
      if (absl::SimpleAtod(line.substr(name.size() + 1), &value)) {
        return value;
      }
    }
  }
  return -1;
}

// Verifies the six standard process series, each with its type, and values that fit this very
// process: memory in use, descriptors open, a start time in the past hour.
TEST(ProcessMetricsTest, ReportsThisProcess) {
  std::vector<char> ballast(64 << 20, 1);  // 64 MiB resident
  const std::string text = ProcessMetricsText();
  EXPECT_THAT(text, ::testing::HasSubstr("# TYPE process_cpu_seconds_total counter\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("# TYPE process_resident_memory_bytes gauge\n"));
  EXPECT_GE(Value(text, "process_resident_memory_bytes"), 64 << 20);
  EXPECT_GE(Value(text, "process_virtual_memory_bytes"),
            Value(text, "process_resident_memory_bytes"));
  EXPECT_GE(Value(text, "process_open_fds"), 3);  // stdin, stdout, stderr at least
  EXPECT_GE(Value(text, "process_max_fds"), Value(text, "process_open_fds"));
  EXPECT_GE(Value(text, "process_cpu_seconds_total"), 0);
  const double now = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
  EXPECT_LE(Value(text, "process_start_time_seconds"), now + 1);
  EXPECT_GE(Value(text, "process_start_time_seconds"), now - 3600);
  EXPECT_EQ(ballast[ballast.size() - 1], 1);
}

}  // namespace
}  // namespace sluice
