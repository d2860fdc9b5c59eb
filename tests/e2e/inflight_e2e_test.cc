// End-to-end: in-flight limits (`algorithm: concurrency`) driven as Envoy's rate-limit filter
// drives them (tests/support/envoy_ratelimit_filter.h): an acquisition when a request arrives, and
// a release (`is_negative_hits`, apply_on_stream_done) when it ends, for every request, the denied
// ones and those a failure mode let through included. The real build/bin/sluice, on the memory
// backend, a real redis-server and a real Redis Cluster; with outages (Redis killed and
// restarted) and two replicas.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/rls_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/envoy_ratelimit_filter.h"
#include "tests/support/process.h"
#include "tests/support/redis_cluster.h"
#include "tests/support/redis_server.h"
#include "tests/support/sluice_server.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using testing::EnvoyRateLimitFilter;
using testing::HttpGet;
using testing::RedisCluster;
using testing::RedisServer;
using testing::SluiceServer;
using testing::TempDir;

// docs/algorithms.md's in-flight example, with 3 in flight instead of 10; its `charge: if_admitted`
// twin; and a plain limit far above the load, whose answers say whether Redis decided (a failure
// mode's answer carries no remaining).
constexpr char kConfig[] = R"(domain: edge
descriptors:
  - key: user_inflight
    rate_limit: {algorithm: concurrency, unit: minute, unit_multiplier: 5, requests_per_unit: 3}
  - key: user_inflight_if_admitted
    rate_limit:
      algorithm: concurrency
      unit: minute
      unit_multiplier: 5
      requests_per_unit: 3
      charge: if_admitted
  - key: probe
    rate_limit: {unit: second, requests_per_unit: 1000000}
)";

// One request through Envoy's rate-limit filter, on that page's route:
//   rate_limits:
//     - actions: [{request_headers: {header_name: x-user, descriptor_key: user_inflight}}]
//     - actions: [{request_headers: {header_name: x-user, descriptor_key: user_inflight}}]
//       apply_on_stream_done: true
//       hits_addend: {number: 1, is_negative_hits: true}
class GatewayRequest {
 public:
  // The request arrives at a gateway whose calls go to `replica`: the filter sends the
  // acquisition and completes with Sluice's answer (an error: Envoy's failure mode, allow).
  GatewayRequest(RlsClient& replica, std::string key, std::string user)
      : filter_(EnvoyRateLimitFilter::Config{}), key_(std::move(key)), user_(std::move(user)) {
    EXPECT_TRUE(filter_.DecodeHeaders(/*has_request_descriptors=*/true));
    absl::StatusOr<RlsResponse> response = Call(replica, /*release=*/false);
    proceeds_ = filter_.Complete(!response.ok() ? EnvoyRateLimitFilter::LimitStatus::kError
                                 : response->overall_code() == RlsResponse::OK
                                     ? EnvoyRateLimitFilter::LimitStatus::kOk
                                     : EnvoyRateLimitFilter::LimitStatus::kOverLimit);
    answer_ = response.ok() ? *response : RlsResponse();
  }

  // Whether the request went upstream (else Envoy answered it 429 and it ends at once: End).
  bool proceeds() const { return proceeds_; }
  const RlsResponse& answer() const { return answer_; }

  // The request ends; Envoy's onDestroy sends the release through `replica`.
  void End(RlsClient& replica) {
    if (filter_.OnDestroy(/*has_stream_done_descriptors=*/true)) {
      absl::StatusOr<RlsResponse> response = Call(replica, /*release=*/true);
      ASSERT_TRUE(response.ok()) << response.status();
      EXPECT_EQ(response->overall_code(), RlsResponse::OK);  // a release is never denied
    }
  }

 private:
  absl::StatusOr<RlsResponse> Call(RlsClient& replica, bool release) {
    absl::StatusOr<RlsRequest> request =
        BuildRequest("edge", {absl::StrCat(key_, "=", user_)}, /*hits=*/0);
    EXPECT_TRUE(request.ok()) << request.status();
    if (release) {
      request->mutable_descriptors(0)->mutable_hits_addend()->set_value(1);
      request->mutable_descriptors(0)->set_is_negative_hits(true);
    }
    return replica.ShouldRateLimit(*request, absl::Seconds(5));
  }

  EnvoyRateLimitFilter filter_;
  const std::string key_;
  const std::string user_;
  bool proceeds_ = false;
  RlsResponse answer_;
};

enum class Store { kMemory, kRedis, kCluster };

class InFlightE2eTest : public ::testing::TestWithParam<Store> {
 protected:
  void StartStore(Store store) {
    if (store == Store::kRedis) {
      auto redis = RedisServer::Start();
      ASSERT_TRUE(redis.ok()) << redis.status();
      redis_ = std::move(*redis);
    } else if (store == Store::kCluster) {
      auto cluster = RedisCluster::Start();
      ASSERT_TRUE(cluster.ok()) << cluster.status();
      cluster_ = std::move(*cluster);
    }
  }

  // Starts a replica on the store started before.
  void StartReplica(std::vector<std::string> flags) {
    const std::string config = dir_.WriteFile("edge.yaml", kConfig);
    if (cluster_ != nullptr) {
      flags.push_back("--backend=redis_cluster");
      flags.push_back("--redis_addresses=" + absl::StrJoin(cluster_->SeedAddresses(), ","));
    } else if (redis_ != nullptr) {
      flags.push_back("--backend=redis");
      flags.push_back("--redis_addresses=" + redis_->address());
    }
    auto server = SluiceServer::Start(config, flags, dir_.path());
    ASSERT_TRUE(server.ok()) << server.status();
    clients_.push_back(std::make_unique<RlsClient>((*server)->grpc_address()));
    servers_.push_back(std::move(*server));
  }

  std::unique_ptr<GatewayRequest> Arrive(size_t replica, const std::string& key = "user_inflight",
                                         const std::string& user = "alice") {
    return std::make_unique<GatewayRequest>(*clients_[replica], key, user);
  }

  // Requests that arrive one after the other through `replica` until one is denied (which ends
  // at once, released): returns the ones admitted, still running.
  std::vector<std::unique_ptr<GatewayRequest>> ArriveUntilDenied(
      size_t replica, const std::string& key = "user_inflight") {
    std::vector<std::unique_ptr<GatewayRequest>> running;
    for (int i = 0; i < 10; ++i) {
      auto request = Arrive(replica, key);
      if (!request->proceeds()) {
        request->End(*clients_[replica]);
        break;
      }
      running.push_back(std::move(request));
    }
    return running;
  }

  // Waits until every replica's answers come from Redis again (after a restart).
  void AwaitRedis() {
    for (size_t replica = 0; replica < clients_.size(); ++replica) {
      bool decided = false;
      for (int i = 0; i < 400 && !decided; ++i) {
        auto request = BuildRequest("edge", {absl::StrCat("probe=", replica, "-", i)}, 0);
        ASSERT_TRUE(request.ok());
        auto response = clients_[replica]->ShouldRateLimit(*request, absl::Seconds(5));
        decided = response.ok() && response->statuses(0).limit_remaining() > 0;
        if (!decided) {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      }
      ASSERT_TRUE(decided) << "replica " << replica << " never decided by Redis again";
    }
  }

  std::string Metrics(size_t replica) {
    return HttpGet(servers_[replica]->http_port(), "/metrics");
  }

  TempDir dir_;
  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<RedisCluster> cluster_;
  std::vector<std::unique_ptr<SluiceServer>> servers_;
  std::vector<std::unique_ptr<RlsClient>> clients_;
};

// Verifies, as Envoy calls: 3 running on a limit of 3, a 4th denied (answered 429, its release
// sent as it ends), and the next acquisition is denied too; when a running request ends, one
// more is admitted. An explicit `charge: if_admitted` behaves as before: the denial's release
// frees a running request's lease and a 4th runs.
TEST_P(InFlightE2eTest, ThreeRunningOneDeniedAndItsReleaseTheNextIsDenied) {
  StartStore(GetParam());
  StartReplica({"--redis_timeout=2s"});
  std::vector<std::unique_ptr<GatewayRequest>> running;
  for (int i = 0; i < 3; ++i) {
    running.push_back(Arrive(0));
    ASSERT_TRUE(running.back()->proceeds()) << i;
  }
  auto fourth = Arrive(0);
  EXPECT_FALSE(fourth->proceeds());
  fourth->End(*clients_[0]);
  auto fifth = Arrive(0);
  EXPECT_FALSE(fifth->proceeds()) << "4 in flight against a limit of 3";
  fifth->End(*clients_[0]);
  running.front()->End(*clients_[0]);
  running.erase(running.begin());
  auto sixth = Arrive(0);
  EXPECT_TRUE(sixth->proceeds());
  EXPECT_TRUE(ArriveUntilDenied(0).empty());

  auto old = ArriveUntilDenied(0, "user_inflight_if_admitted");
  EXPECT_EQ(old.size(), 3u);
  auto fourth_old = Arrive(0, "user_inflight_if_admitted");
  EXPECT_TRUE(fourth_old->proceeds()) << "if_admitted: the denial's release freed a lease";
}

INSTANTIATE_TEST_SUITE_P(Stores, InFlightE2eTest,
                         ::testing::Values(Store::kMemory, Store::kRedis, Store::kCluster),
                         [](const ::testing::TestParamInfo<Store>& info) {
                           switch (info.param) {
                             case Store::kMemory:
                               return "Memory";
                             case Store::kRedis:
                               return "Redis";
                             case Store::kCluster:
                               return "Cluster";
                           }
                           return "Unknown";
                         });

class InFlightOutageE2eTest : public InFlightE2eTest {};

// Verifies a request that Sluice's failure mode (allow) let through while Redis was down holds
// no lease, and its release once Redis is back (with 3 requests running there meanwhile) leaves
// the running ones' leases alone: the next acquisition is denied. Counted in
// sluice_unbacked_acquisitions_released_total. A request that failure mode deny answered 429
// ends at once, released during the outage, and leaves nothing behind either.
TEST_F(InFlightOutageE2eTest, ReleaseAfterAnOutageLeavesTheRunningLeases) {
  StartStore(Store::kRedis);
  StartReplica({"--redis_timeout=500ms", "--failure_mode=allow"});
  StartReplica({"--redis_timeout=500ms", "--failure_mode=deny"});
  AwaitRedis();
  redis_->Kill();
  auto during = Arrive(0);
  ASSERT_TRUE(during->proceeds());  // Sluice's failure mode
  EXPECT_EQ(during->answer().statuses(0).limit_remaining(), 0u);  // no state: not Redis' answer
  auto refused = Arrive(1, "user_inflight", "bob");
  EXPECT_FALSE(refused->proceeds());
  refused->End(*clients_[1]);
  const std::string deny_metrics = Metrics(1);
  EXPECT_THAT(deny_metrics, HasSubstr("sluice_unbacked_acquisitions_recorded_total 1\n"));
  EXPECT_THAT(deny_metrics, HasSubstr("sluice_unbacked_acquisitions_released_total 1\n"));
  EXPECT_THAT(deny_metrics, HasSubstr("sluice_unbacked_acquisitions_keys 0\n"));
  ASSERT_TRUE(redis_->Restart().ok());
  AwaitRedis();
  std::vector<std::unique_ptr<GatewayRequest>> running;
  for (int i = 0; i < 3; ++i) {
    running.push_back(Arrive(0));
    ASSERT_TRUE(running.back()->proceeds()) << i;
  }
  during->End(*clients_[0]);
  auto denied = Arrive(0);
  EXPECT_FALSE(denied->proceeds()) << "the outage's release freed a running request's lease";
  denied->End(*clients_[0]);
  EXPECT_THAT(Metrics(0), HasSubstr("sluice_unbacked_acquisitions_released_total 1\n"));
  running.front()->End(*clients_[0]);
  EXPECT_TRUE(Arrive(0)->proceeds());
}

// Measures the error that a replica cannot see: two replicas on one Redis; while Redis is down,
// replica A lets 4 requests through (failure mode allow); Redis is back and 3 requests run; the
// 4 end, 2 released through A, 2 through B (as gateways whose connection moved would). B's two
// releases free running requests' leases: 2 admitted too many (5 running on a limit of 3). A's
// two records left take the next two releases of the key through A, and then Redis' count is
// what really runs again.
TEST_F(InFlightOutageE2eTest, ReleasesThroughAnotherReplicaOverAdmitByAsMany) {
  StartStore(Store::kRedis);
  StartReplica({"--redis_timeout=500ms", "--failure_mode=allow"});
  StartReplica({"--redis_timeout=500ms", "--failure_mode=allow"});
  AwaitRedis();
  redis_->Kill();
  std::vector<std::unique_ptr<GatewayRequest>> during;
  for (int i = 0; i < 4; ++i) {
    during.push_back(Arrive(0));
    ASSERT_TRUE(during.back()->proceeds()) << i;
  }
  ASSERT_TRUE(redis_->Restart().ok());
  AwaitRedis();
  std::vector<std::unique_ptr<GatewayRequest>> running;
  for (int i = 0; i < 3; ++i) {
    running.push_back(Arrive(0));
    ASSERT_TRUE(running.back()->proceeds()) << i;
  }
  during[0]->End(*clients_[0]);
  during[1]->End(*clients_[0]);
  during[2]->End(*clients_[1]);
  during[3]->End(*clients_[1]);
  // New requests through B (the denied one's release too).
  auto extra = ArriveUntilDenied(1);
  const size_t over_admitted = extra.size();
  EXPECT_EQ(over_admitted, 2u);
  std::printf("in-flight limit 3, 3 running; 4 outage requests released 2 through A, 2 through "
              "B: %zu admitted over the limit\n",
              over_admitted);
  // Two of the running requests end through A: A's records take their releases (their leases
  // stay in Redis), and Redis' count of 3 is again what runs: running[2] and the two extra.
  running[0]->End(*clients_[0]);
  running[1]->End(*clients_[0]);
  EXPECT_THAT(Metrics(0), HasSubstr("sluice_unbacked_acquisitions_keys 0\n"));
  EXPECT_TRUE(ArriveUntilDenied(1).empty());
  extra[0]->End(*clients_[1]);
  EXPECT_EQ(ArriveUntilDenied(1).size(), 1u);
}

}  // namespace
}  // namespace sluice
