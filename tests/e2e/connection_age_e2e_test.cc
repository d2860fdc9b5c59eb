// End-to-end: gRPC connections age out on the real build/bin/sluice as envoyproxy/ratelimit's
// do. Started with upstream's GRPC_MAX_CONNECTION_AGE=1s and GRPC_MAX_CONNECTION_AGE_GRACE=1s,
// Sluice sends each client connection a GOAWAY about a second after it opened; a client that
// keeps calling over one channel reconnects each time (its channel leaves READY and comes back),
// and not one of its calls fails.
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/rls_client.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/support/process.h"
#include "tests/support/sluice_server.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using testing::ChildProcess;
using testing::FreePort;
using testing::SluiceServer;
using testing::TempDir;
using testing::WaitForPort;

constexpr char kConfig[] =
    "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: "
    "1000000}\n";

// Verifies a channel calling for 4.5 s without pause, from four threads, against a connection
// age of 1 s and a grace of 1 s: the channel is drained and reconnected at least twice (about
// four times: the age is jittered by +/-10%), and every call is answered OK.
TEST(ConnectionAgeE2eTest, ConnectionsAreDrainedWithoutAFailedCall) {
  TempDir dir;
  const std::string config = dir.WriteFile("c.yaml", kConfig);
  const int grpc_port = FreePort();
  const int http_port = FreePort();
  ChildProcess sluice({SluiceServer::BinaryPath("sluice"), "--config=" + config},
                      dir.path() + "/sluice.log",
                      {"HOST=127.0.0.1", absl::StrCat("PORT=", http_port), "GRPC_HOST=127.0.0.1",
                       absl::StrCat("GRPC_PORT=", grpc_port), "DEBUG_HOST=127.0.0.1",
                       absl::StrCat("DEBUG_PORT=", FreePort()), "LOG_LEVEL=info",
                       "GRPC_MAX_CONNECTION_AGE=1s", "GRPC_MAX_CONNECTION_AGE_GRACE=1s",
                       "USE_STATSD=false"});
  ASSERT_TRUE(WaitForPort(grpc_port, std::chrono::seconds(20))) << sluice.ReadLog();
  EXPECT_THAT(sluice.ReadLog(), HasSubstr("gRPC connections sent GOAWAY at 1s of age"));

  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", grpc_port),
                                     grpc::InsecureChannelCredentials());
  ASSERT_TRUE(channel->WaitForConnected(std::chrono::system_clock::now() +
                                        std::chrono::seconds(10)));
  auto request = BuildRequest("d", {"k=v"}, 0);
  ASSERT_TRUE(request.ok());

  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(4500);
  std::atomic<int> answered{0};
  std::mutex mu;
  std::vector<std::string> failures;
  std::vector<std::thread> callers;
  for (int i = 0; i < 4; ++i) {
    callers.emplace_back([&] {
      RlsClient client(channel);
      while (std::chrono::steady_clock::now() < end) {
        absl::StatusOr<RlsResponse> response = client.ShouldRateLimit(*request, absl::Seconds(5));
        if (response.ok() &&
            response->overall_code() == envoy::service::ratelimit::v3::RateLimitResponse::OK) {
          answered.fetch_add(1);
          continue;
        }
        std::lock_guard<std::mutex> lock(mu);
        failures.push_back(response.ok() ? response->DebugString()
                                         : std::string(response.status().ToString()));
      }
    });
  }
  // The channel's state as it changes: each GOAWAY takes it out of READY, and the next call
  // makes it connect again.
  int left_ready = 0;
  grpc_connectivity_state state = channel->GetState(false);
  while (std::chrono::steady_clock::now() < end) {
    if (channel->WaitForStateChange(state, std::chrono::system_clock::now() +
                                               std::chrono::milliseconds(100))) {
      const grpc_connectivity_state next = channel->GetState(false);
      if (state == GRPC_CHANNEL_READY && next != GRPC_CHANNEL_READY) {
        ++left_ready;
      }
      state = next;
    }
  }
  for (std::thread& caller : callers) {
    caller.join();
  }
  EXPECT_THAT(failures, ::testing::IsEmpty());
  EXPECT_GE(left_ready, 2) << "the connection was not drained and replaced";
  EXPECT_GT(answered.load(), 100);
  // Still serving on the channel after the last drain.
  RlsClient client(channel);
  EXPECT_TRUE(client.ShouldRateLimit(*request, absl::Seconds(5)).ok());
}

}  // namespace
}  // namespace sluice
