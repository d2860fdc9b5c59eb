// Smoke test of the benchmark tooling, cheap enough for CI: runs the real build/bin/sluice-bench
// for about a second against the real build/bin/sluice-floor on a free loopback port, and checks
// the fields of its --json report that bench/run relies on.
#include <signal.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/support/process.h"
#include "tests/support/sluice_server.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using testing::ChildProcess;
using testing::SluiceServer;
using testing::TempDir;

struct CommandResult {
  int status = -1;
  std::string out;  // stdout only
};

CommandResult RunCommand(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    return result;
  }
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) {
    result.out.append(buf.data(), n);
  }
  const int status = pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

double Number(const google::protobuf::Struct& s, const std::string& field) {
  auto it = s.fields().find(field);
  EXPECT_NE(it, s.fields().end()) << "missing field " << field;
  return it == s.fields().end() ? -1 : it->second.number_value();
}

const google::protobuf::Struct& Object(const google::protobuf::Struct& s,
                                       const std::string& field) {
  auto it = s.fields().find(field);
  EXPECT_NE(it, s.fields().end()) << "missing field " << field;
  static const google::protobuf::Struct empty;
  return it == s.fields().end() ? empty : it->second.struct_value();
}

class SluiceBenchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = testing::FreePort();
    floor_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{SluiceServer::BinaryPath("sluice-floor"),
                                 absl::StrCat("--grpc_address=127.0.0.1:", port_)},
        dir_.path() + "/floor.log");
    ASSERT_TRUE(testing::WaitForPort(port_, std::chrono::seconds(10))) << floor_->ReadLog();
  }

  // Runs sluice-bench against the floor with `flags` and parses its JSON report.
  google::protobuf::Struct Bench(const std::string& flags) {
    const std::string command =
        absl::StrCat(SluiceServer::BinaryPath("sluice-bench"), " --server=127.0.0.1:", port_,
                     " --json ", flags, " 2>", dir_.path(), "/bench.err");
    CommandResult run = RunCommand(command);
    EXPECT_EQ(run.status, 0) << command << "\n" << run.out;
    google::protobuf::Struct report;
    auto parsed = google::protobuf::util::JsonStringToMessage(run.out, &report);
    EXPECT_TRUE(parsed.ok()) << parsed << "\n" << run.out;
    return report;
  }

  TempDir dir_;
  int port_ = 0;
  std::unique_ptr<ChildProcess> floor_;
};

// Verifies a closed-loop run: every request answered OK by the floor, decisions counted per
// descriptor, ordered latency percentiles, and the generator's own CPU reported.
TEST_F(SluiceBenchTest, ClosedLoopReportsEveryField) {
  auto r = Bench("--duration=1 --warmup=0.2 --concurrency=4 --channels=2 --descriptors=3");
  const double requests = Number(r, "requests");
  EXPECT_GT(requests, 0);
  EXPECT_EQ(Number(r, "ok"), requests);
  EXPECT_EQ(Number(r, "over_limit"), 0);
  EXPECT_EQ(Number(r, "errors"), 0);
  EXPECT_EQ(Number(r, "decisions"), 3 * requests);
  EXPECT_EQ(Number(r, "descriptors"), 3);
  EXPECT_EQ(Number(r, "concurrency"), 4);
  EXPECT_EQ(Number(r, "rate"), 0);
  EXPECT_EQ(Number(r, "duration_s"), 1);
  EXPECT_NEAR(Number(r, "rps"), requests, 0.1);
  const auto& latency = Object(r, "latency_ms");
  const double p50 = Number(latency, "p50");
  EXPECT_GT(p50, 0);
  EXPECT_LE(p50, Number(latency, "p90"));
  EXPECT_LE(Number(latency, "p90"), Number(latency, "p99"));
  EXPECT_LE(Number(latency, "p99"), Number(latency, "p999"));
  EXPECT_LE(Number(latency, "p999"), Number(latency, "max"));
  const auto& cpu = Object(r, "client_cpu");
  EXPECT_GT(Number(cpu, "user_s") + Number(cpu, "sys_s"), 0);
  EXPECT_GT(Number(cpu, "us_per_request"), 0);
}

// Verifies that an open-loop run sends exactly the scheduled requests of the measured interval
// (rate x duration), and reports how late the generator sent them.
TEST_F(SluiceBenchTest, OpenLoopSendsTheScheduledRequests) {
  auto r = Bench("--duration=1 --warmup=0.2 --rate=300 --concurrency=50");
  EXPECT_EQ(Number(r, "requests") + Number(r, "unsent"), 300);
  EXPECT_EQ(Number(r, "errors"), 0);
  EXPECT_EQ(Number(r, "rate"), 300);
  EXPECT_GE(Number(Object(r, "send_lag_ms"), "max"), 0);
  EXPECT_GT(Number(Object(r, "latency_ms"), "p50"), 0);
}

// Verifies the coordinated-omission correction: while the server is frozen for 300 ms, the
// calls the schedule wanted sent meanwhile (about 150) count their whole wait from their
// intended send time, although at most 4 were in flight and the rest were sent late; measured
// from the actual send, only those 4 would show the stall.
TEST_F(SluiceBenchTest, OpenLoopLatencyCountsAServerStall) {
  std::thread freezer([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    kill(floor_->pid(), SIGSTOP);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    kill(floor_->pid(), SIGCONT);
  });
  auto r = Bench("--duration=1.5 --warmup=0.2 --rate=500 --concurrency=4");
  freezer.join();
  EXPECT_EQ(Number(r, "errors"), 0);
  const auto& latency = Object(r, "latency_ms");
  EXPECT_GE(Number(latency, "max"), 200);
  EXPECT_GE(Number(latency, "p90"), 50);
  EXPECT_LT(Number(latency, "p50"), 50);
}

// Verifies that a server that does not answer is a clear failure (exit 1), not a report of zeros.
TEST_F(SluiceBenchTest, UnreachableServerFails) {
  const int closed_port = testing::FreePort();
  const std::string command =
      absl::StrCat(SluiceServer::BinaryPath("sluice-bench"), " --server=127.0.0.1:", closed_port,
                   " --json --duration=1 --connect_timeout=0.5 2>&1");
  CommandResult run = RunCommand(command);
  EXPECT_EQ(run.status, 1);
  EXPECT_THAT(run.out, HasSubstr("cannot connect"));
}

}  // namespace
}  // namespace sluice
