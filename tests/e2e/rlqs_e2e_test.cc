// End-to-end: the Rate Limit Quota Service of the real build/bin/sluice, driven by clients that
// behave as Envoy's rate_limit_quota filter does (a first report as soon as a bucket sees
// traffic, then one per reporting interval with the requests its local token bucket allowed and
// denied), on the memory backend (one replica).
#include <signal.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "envoy/service/rate_limit_quota/v3/rlqs.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/e2e/grpc_health.h"
#include "tests/support/process.h"
#include "tests/support/redis_cluster.h"
#include "tests/support/redis_server.h"
#include "tests/support/sluice_server.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using testing::HttpGet;
using testing::RedisCluster;
using testing::RedisServer;
using testing::SluiceServer;
using testing::TempDir;
namespace rlqs = envoy::service::rate_limit_quota::v3;

constexpr char kConfig[] = R"(domain: edge
descriptors:
  - key: route
    rate_limit: {unit: second, requests_per_unit: 100}
)";

// One emulated Envoy: a stream, and what the server assigned per bucket value.
class Envoy {
 public:
  explicit Envoy(const std::string& address)
      : stub_(rlqs::RateLimitQuotaService::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))) {
    context_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    stream_ = stub_->StreamRateLimitQuotas(&context_);
    reader_ = std::thread([this] {
      rlqs::RateLimitQuotaResponse response;
      while (stream_->Read(&response)) {
        std::lock_guard<std::mutex> lock(mu_);
        for (const auto& action : response.bucket_action()) {
          actions_[action.bucket_id().bucket().at("route")].push_back(action);
        }
      }
    });
  }

  ~Envoy() {
    context_.TryCancel();
    reader_.join();
  }

  // A report of `requests` over `seconds` for bucket route=`value` of `domain`.
  bool Report(const std::string& value, uint64_t requests, int64_t seconds = 1,
              const std::string& domain = "edge") {
    rlqs::RateLimitQuotaUsageReports reports;
    reports.set_domain(domain);
    auto* usage = reports.add_bucket_quota_usages();
    (*usage->mutable_bucket_id()->mutable_bucket())["route"] = value;
    usage->mutable_time_elapsed()->set_seconds(seconds);
    usage->set_num_requests_allowed(requests);
    return stream_->Write(reports);
  }

  // Waits up to 5 s for at least `count` actions on bucket `value`; returns them.
  std::vector<rlqs::RateLimitQuotaResponse::BucketAction> Actions(const std::string& value,
                                                                  size_t count = 1) {
    for (int i = 0; i < 500; ++i) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (actions_[value].size() >= count) {
          return actions_[value];
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::lock_guard<std::mutex> lock(mu_);
    return actions_[value];
  }

  // The rate of the last token-bucket assignment of `value`, requests a second; -1 if none.
  double Rate(const std::string& value) {
    std::vector<rlqs::RateLimitQuotaResponse::BucketAction> actions = Actions(value);
    if (actions.empty() || !actions.back().quota_assignment_action().rate_limit_strategy()
                                .has_token_bucket()) {
      return -1;
    }
    const auto& bucket =
        actions.back().quota_assignment_action().rate_limit_strategy().token_bucket();
    return static_cast<double>(bucket.tokens_per_fill().value()) /
           static_cast<double>(bucket.fill_interval().seconds());
  }

  grpc::Status Finish() {
    stream_->WritesDone();
    reader_.join();
    reader_ = std::thread([] {});
    return stream_->Finish();
  }

 private:
  std::unique_ptr<rlqs::RateLimitQuotaService::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<rlqs::RateLimitQuotaUsageReports,
                                           rlqs::RateLimitQuotaResponse>>
      stream_;
  std::thread reader_;
  std::mutex mu_;
  std::map<std::string, std::vector<rlqs::RateLimitQuotaResponse::BucketAction>> actions_;
};

class RlqsE2eTest : public ::testing::Test {
 protected:
  void Start(const std::vector<std::string>& flags = {"--rlqs_rebalance_interval=200ms"}) {
    const std::string config = dir_.WriteFile("config/edge.yaml", kConfig);
    auto started = SluiceServer::Start(dir_.path() + "/config", flags, dir_.path());
    ASSERT_TRUE(started.ok()) << started.status();
    sluice_ = std::move(*started);
  }

  // Two replicas on one backend (`backend_flags`), their Envoys asking 20 (on the first) and 150
  // and 300 (on the second) of one 100/s bucket: after a few rebalances the first holds 20 and
  // the others 40 each, the max-min shares of all three; once the second replica is gone, its
  // demand leaves the first's division within the exchange's TTL.
  void ExpectReplicasShareOneLimit(const std::vector<std::string>& backend_flags) {
    const std::string config = dir_.WriteFile("config/edge.yaml", kConfig);
    std::vector<std::string> flags = backend_flags;
    flags.push_back("--rlqs_rebalance_interval=200ms");
    std::vector<std::unique_ptr<SluiceServer>> replicas;
    for (int i = 0; i < 2; ++i) {
      auto started = SluiceServer::Start(dir_.path() + "/config", flags, dir_.path());
      ASSERT_TRUE(started.ok()) << started.status();
      replicas.push_back(std::move(*started));
    }
    Envoy a(replicas[0]->grpc_address());
    auto b = std::make_unique<Envoy>(replicas[1]->grpc_address());
    auto c = std::make_unique<Envoy>(replicas[1]->grpc_address());
    for (int i = 0; i < 8; ++i) {
      ASSERT_TRUE(a.Report("shared", 20));
      ASSERT_TRUE(b->Report("shared", 150));
      ASSERT_TRUE(c->Report("shared", 300));
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    EXPECT_NEAR(a.Rate("shared"), 20, 1);
    EXPECT_NEAR(b->Rate("shared"), 40, 1.5);
    EXPECT_NEAR(c->Rate("shared"), 40, 1.5);
    // The second replica goes away with its Envoys: the first's Envoy may take the whole limit
    // once that replica's entry is older than 2.5 rebalances.
    b.reset();
    c.reset();
    replicas[1].reset();
    for (int i = 0; i < 8; ++i) {
      ASSERT_TRUE(a.Report("shared", 20));
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    EXPECT_NEAR(a.Rate("shared"), 100, 3);
  }

  TempDir dir_;
  std::unique_ptr<SluiceServer> sluice_;
};

// Verifies the service on the RLS listener: a first report is answered at once with a local
// token bucket of the whole limit; a second Envoy on the bucket makes the next rebalance split
// it; the health service names RLQS; /metrics counts streams and assignments.
TEST_F(RlqsE2eTest, EnvoysShareABucketsLimit) {
  Start();
  Envoy a(sluice_->grpc_address());
  ASSERT_TRUE(a.Report("checkout", 300));
  EXPECT_NEAR(a.Rate("checkout"), 100, 1);
  Envoy b(sluice_->grpc_address());
  ASSERT_TRUE(b.Report("checkout", 300));
  EXPECT_GT(b.Rate("checkout"), 0);
  for (int i = 0; i < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ASSERT_TRUE(a.Report("checkout", 300));
    ASSERT_TRUE(b.Report("checkout", 300));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_NEAR(a.Rate("checkout"), 50, 1);
  EXPECT_NEAR(b.Rate("checkout"), 50, 1);
  const auto ttl = a.Actions("checkout").back().quota_assignment_action().assignment_time_to_live();
  EXPECT_EQ(ttl.seconds(), 3);
  const std::string serving("\x08\x01", 2);
  EXPECT_EQ(testing::GrpcHealthCheck(sluice_->grpc_address(),
                                     "envoy.service.rate_limit_quota.v3.RateLimitQuotaService"),
            serving);
  const std::string metrics = HttpGet(sluice_->http_port(), "/metrics");
  EXPECT_THAT(metrics, HasSubstr("sluice_rlqs_streams 2"));
  // The live buckets, for people.
  const std::string live = HttpGet(sluice_->http_port(), "/rlqs");
  EXPECT_THAT(live, HasSubstr("rlqs: 2 streams, 1 buckets, 2 subscriptions"));
  EXPECT_THAT(live, HasSubstr("edge route=checkout: 100.0/s; here 2 (demand 300.0, 300.0; sent"));
  EXPECT_THAT(metrics, HasSubstr("sluice_rlqs_assignments_total{strategy=\"token_bucket\"}"));
  EXPECT_THAT(metrics, HasSubstr("sluice_rlqs_rule_demand{key=\"edge.route\"} 600"));
  EXPECT_THAT(metrics, HasSubstr("sluice_rlqs_rule_share{key=\"edge.route\"} 100"));
}

// Verifies a bad report ends its stream with INVALID_ARGUMENT saying what is wrong, and a stream
// that names a second domain likewise, while other streams go on.
TEST_F(RlqsE2eTest, BadReportsEndTheStream) {
  Start();
  Envoy bad(sluice_->grpc_address());
  bad.Report("r", 1, 0);  // time_elapsed 0
  grpc::Status status = bad.Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("time_elapsed must be more than 0"));
  Envoy other(sluice_->grpc_address());
  ASSERT_TRUE(other.Report("r", 1));
  EXPECT_GT(other.Rate("r"), 0);
  other.Report("r", 1, 1, "elsewhere");
  status = other.Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("differs from the stream's first report"));
}

// Verifies the drain: on SIGTERM every subscribed bucket gets an assignment with TTL 0 before the
// stream ends; and --rlqs=false serves no RLQS at all.
TEST_F(RlqsE2eTest, ShutdownExpiresAssignmentsAndTheFlagTurnsItOff) {
  Start();
  Envoy a(sluice_->grpc_address());
  ASSERT_TRUE(a.Report("x", 10));
  ASSERT_EQ(a.Actions("x").size(), 1u);
  sluice_->process().Stop(SIGTERM, std::chrono::seconds(10));
  const auto actions = a.Actions("x", 2);
  ASSERT_EQ(actions.size(), 2u);
  EXPECT_TRUE(actions.back().quota_assignment_action().has_assignment_time_to_live());
  EXPECT_EQ(actions.back().quota_assignment_action().assignment_time_to_live().seconds(), 0);

  sluice_.reset();
  Start({"--rlqs=false"});
  Envoy off(sluice_->grpc_address());
  off.Report("x", 1);
  EXPECT_EQ(off.Finish().error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_THAT(HttpGet(sluice_->http_port(), "/rlqs"), HasSubstr("the quota service is off"));
}

// Verifies sluicectl quota: it reports on one bucket and prints the assignments (exit 0 when
// its duration runs out), and says why when the server ends the stream (exit 1).
TEST_F(RlqsE2eTest, SluicectlQuotaPrintsAssignments) {
  Start();
  const std::string base = absl::StrCat(SluiceServer::BinaryPath("sluicectl"),
                                        " --server=", sluice_->grpc_address(), " quota ");
  auto [status, out] = testing::RunCommand(base + "edge route=checkout --rate=40 --duration=1500ms");
  EXPECT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("token_bucket { max_tokens: 100 tokens_per_fill { value: 100 }"));
  auto [bad_status, bad_out] = testing::RunCommand(
      base + "edge " + std::string(2000, 'k') + "=v --duration=3s 2>&1");
  EXPECT_EQ(bad_status, 1) << bad_out;
  EXPECT_THAT(bad_out, HasSubstr("longer than 1024 bytes"));
}

// Verifies the division across two replicas sharing a standalone Redis.
TEST_F(RlqsE2eTest, ReplicasOnRedisShareOneLimit) {
  auto redis = RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  ExpectReplicasShareOneLimit({"--backend=redis", "--redis_addresses=" + (*redis)->address()});
}

// Verifies the same on a Redis Cluster.
TEST_F(RlqsE2eTest, ReplicasOnARedisClusterShareOneLimit) {
  auto cluster = RedisCluster::Start();
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ExpectReplicasShareOneLimit(
      {"--backend=redis_cluster",
       "--redis_addresses=" + absl::StrJoin((*cluster)->SeedAddresses(), ",")});
}

}  // namespace
}  // namespace sluice
