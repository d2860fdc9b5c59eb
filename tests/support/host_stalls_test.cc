#include "tests/support/host_stalls.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace sluice::testing {
namespace {

absl::Duration Ms(int64_t ms) { return absl::Milliseconds(ms); }

// Verifies that overlapping and touching stalls merge into one, within a CPU and across CPUs,
// and keep their order.
TEST(HostStallsTest, MergesOverlappingStalls) {
  HostStalls stalls({{{Ms(50), Ms(60)}, {Ms(10), Ms(20)}, {Ms(15), Ms(30)}}, {{Ms(30), Ms(35)}}});
  ASSERT_EQ(stalls.count(), 2);
  EXPECT_EQ(stalls.intervals()[0], std::make_pair(Ms(10), Ms(35)));
  EXPECT_EQ(stalls.intervals()[1], std::make_pair(Ms(50), Ms(60)));
  EXPECT_EQ(stalls.total(), Ms(35));
  EXPECT_EQ(stalls.longest(), Ms(25));
  EXPECT_EQ(stalls.Describe(), "2 (35 ms, longest 25 ms)");
  EXPECT_EQ(HostStalls().Describe(), "none");
  EXPECT_EQ(HostStalls({{}, {}}).Describe(), "none");
}

// Verifies that the calls exposed to a stall are those sent within the lead before it or during
// it, at the rate given, with windows that overlap counted once, and that a stall of one CPU of
// two exposes half of them.
TEST(HostStallsTest, CountsTheCallsAStallCanMakeLate) {
  EXPECT_EQ(HostStalls().CallsExposed(1000, Ms(10)), 0u);
  EXPECT_EQ(HostStalls(std::vector<HostStalls::Intervals>(1)).CallsExposed(1000, Ms(10)), 0u);
  // 20 ms of stall and 10 ms before it, at one call per millisecond.
  EXPECT_EQ(HostStalls({{{Ms(100), Ms(120)}}}).CallsExposed(1000, Ms(10)), 30u);
  // The second window starts 5 ms inside the first stall's: [90, 120] and [115, 130].
  EXPECT_EQ(HostStalls({{{Ms(100), Ms(120)}, {Ms(125), Ms(130)}}}).CallsExposed(1000, Ms(10)),
            40u);
  // Apart: [90, 120] and [190, 200].
  EXPECT_EQ(HostStalls({{{Ms(100), Ms(120)}, {Ms(200), Ms(200)}}}).CallsExposed(600, Ms(10)),
            24u);
  // One CPU of two, then both.
  EXPECT_EQ(HostStalls({{{Ms(100), Ms(120)}}, {}}).CallsExposed(1000, Ms(10)), 15u);
  EXPECT_EQ(HostStalls({{{Ms(100), Ms(120)}}, {{Ms(100), Ms(120)}}}).CallsExposed(1000, Ms(10)),
            30u);
}

// Verifies that a process stopped for a while (as a hypervisor stops a virtual CPU, or a quota
// a container) sees that stall, about as long as it was stopped.
TEST(HostStallProbeTest, SeesTheProcessStopped) {
  int to_child[2];
  int to_parent[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(to_parent), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    HostStallProbe probe(Ms(5));
    char byte = 'r';
    (void)!write(to_parent[1], &byte, 1);
    (void)!read(to_child[0], &byte, 1);
    const HostStalls stalls = probe.Stop();
    const int64_t reply[2] = {stalls.count(), absl::ToInt64Milliseconds(stalls.longest())};
    (void)!write(to_parent[1], reply, sizeof(reply));
    _exit(0);
  }
  char byte = 0;
  ASSERT_EQ(read(to_parent[0], &byte, 1), 1);
  absl::SleepFor(Ms(20));
  ASSERT_EQ(kill(child, SIGSTOP), 0);
  absl::SleepFor(Ms(100));
  ASSERT_EQ(kill(child, SIGCONT), 0);
  absl::SleepFor(Ms(20));
  ASSERT_EQ(write(to_child[1], &byte, 1), 1);
  int64_t reply[2] = {0, 0};
  ASSERT_EQ(read(to_parent[0], reply, sizeof(reply)), static_cast<ssize_t>(sizeof(reply)));
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::printf("stalls seen: %lld, longest %lld ms\n", static_cast<long long>(reply[0]),
              static_cast<long long>(reply[1]));
  // Every CPU's thread was stopped: their stalls merge into one of about 100 ms (the parent may
  // itself be late to send SIGCONT, never early).
  EXPECT_GE(reply[0], 1);
  EXPECT_GE(reply[1], 90);
  EXPECT_LT(reply[1], 5000);
}

}  // namespace
}  // namespace sluice::testing
