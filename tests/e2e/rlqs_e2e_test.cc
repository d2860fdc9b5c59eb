// End-to-end: the Rate Limit Quota Service of the real build/bin/sluice, driven by Envoys as
// client/rlqs_emulator.h emulates them from Envoy's source (today's Envoy unless a test says
// otherwise: a 0 s first report per bucket, every bucket reported on every tick, the domain in
// every message, token buckets applied and compared as Envoy does), and by raw streams for what
// no Envoy sends (bad reports, a client that never reads). Ticks are 1 s instead of Envoy's
// 5 s where a test would otherwise take minutes: the server measures intervals itself.
#include <signal.h>

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/rls_client.h"
#include "client/rlqs_emulator.h"
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
using ::testing::Not;
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
  - key: rls
    rate_limit: {unit: minute, requests_per_unit: 100}
)";

// Many buckets of their own, for the flood below.
constexpr char kJunkConfig[] = R"(domain: junk
descriptors:
  - key: tenant
    rate_limit: {unit: second, requests_per_unit: 1000}
)";

// A raw stream: sends whatever report it is given, reads nothing unless asked.
class RawStream {
 public:
  explicit RawStream(const std::string& address,
                     const grpc::ChannelArguments& args = grpc::ChannelArguments())
      : stub_(rlqs::RateLimitQuotaService::NewStub(
            grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args))) {
    context_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    stream_ = stub_->StreamRateLimitQuotas(&context_);
  }
  ~RawStream() { context_.TryCancel(); }

  static rlqs::RateLimitQuotaUsageReports Report(const std::string& domain,
                                                 const RlqsBucket& bucket, uint64_t requests,
                                                 int64_t seconds) {
    rlqs::RateLimitQuotaUsageReports reports;
    reports.set_domain(domain);
    auto* usage = reports.add_bucket_quota_usages();
    for (const auto& [k, v] : bucket) {
      (*usage->mutable_bucket_id()->mutable_bucket())[k] = v;
    }
    usage->mutable_time_elapsed()->set_seconds(seconds);
    usage->set_num_requests_allowed(requests);
    return reports;
  }

  bool Write(const rlqs::RateLimitQuotaUsageReports& reports) { return stream_->Write(reports); }
  bool Read(rlqs::RateLimitQuotaResponse* response) { return stream_->Read(response); }
  // Ends this side and waits for the server's status (reading what is left).
  grpc::Status Finish() {
    stream_->WritesDone();
    rlqs::RateLimitQuotaResponse ignored;
    while (stream_->Read(&ignored)) {
    }
    return stream_->Finish();
  }

 private:
  std::unique_ptr<rlqs::RateLimitQuotaService::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<rlqs::RateLimitQuotaUsageReports,
                                           rlqs::RateLimitQuotaResponse>>
      stream_;
};

// An emulated Envoy of domain edge on `server`, reporting every `tick`.
std::unique_ptr<RlqsEmulatedEnvoy> NewEnvoy(
    const std::string& server, absl::Duration tick = absl::Seconds(1),
    EnvoyQuotaProfile profile = EnvoyQuotaProfile::kEnvoy) {
  RlqsEmulatedEnvoy::Options options;
  options.server = server;
  options.domain = "edge";
  options.profile = profile;
  options.report_interval = tick;
  options.settings.reporting_interval = tick;
  return std::make_unique<RlqsEmulatedEnvoy>(options);
}

// The rate of the token bucket `envoy` enforces for `bucket` now, tokens a second; -1 if none.
double HeldRate(RlqsEmulatedEnvoy& envoy, const RlqsBucket& bucket) {
  const std::optional<EnvoyBucketView> view = envoy.View(bucket);
  return view.has_value() && view->token_bucket.has_value() ? view->token_bucket->fill_rate : -1;
}

// Waits up to `timeout` for `envoy` to enforce a rate within `tolerance` of `rate` on `bucket`.
bool HoldsRate(RlqsEmulatedEnvoy& envoy, const RlqsBucket& bucket, double rate, double tolerance,
               absl::Duration timeout = absl::Seconds(10)) {
  return RlqsEmulatedEnvoy::WaitUntil(
      [&] { return std::abs(HeldRate(envoy, bucket) - rate) <= tolerance; }, timeout);
}

// The resident set of process `pid`, bytes (VmRSS).
int64_t ResidentBytes(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (absl::StartsWith(line, "VmRSS:")) {
      std::vector<std::string> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
      int64_t kib = 0;
      if (fields.size() >= 2 && absl::SimpleAtoi(fields[1], &kib)) {
        return kib << 10;
      }
    }
  }
  return -1;
}

class RlqsE2eTest : public ::testing::Test {
 protected:
  void Start(const std::vector<std::string>& flags = {"--rlqs_rebalance_interval=200ms"}) {
    dir_.WriteFile("config/edge.yaml", kConfig);
    auto started = SluiceServer::Start(dir_.path() + "/config", flags, dir_.path());
    ASSERT_TRUE(started.ok()) << started.status();
    sluice_ = std::move(*started);
  }

  // Two replicas on one backend (`backend_flags`), their Envoys asking 20 (on the first) and 150
  // and 300 (on the second) of one 100/s bucket: after a few rebalances the first holds 20 and
  // the others 40 each, the max-min shares of all three; once the second replica is gone with
  // its Envoys, their demand leaves the first's division within the exchange's TTL.
  void ExpectReplicasShareOneLimit(const std::vector<std::string>& backend_flags) {
    dir_.WriteFile("config/edge.yaml", kConfig);
    std::vector<std::string> flags = backend_flags;
    flags.push_back("--rlqs_rebalance_interval=200ms");
    std::vector<std::unique_ptr<SluiceServer>> replicas;
    for (int i = 0; i < 2; ++i) {
      auto started = SluiceServer::Start(dir_.path() + "/config", flags, dir_.path());
      ASSERT_TRUE(started.ok()) << started.status();
      replicas.push_back(std::move(*started));
    }
    const RlqsBucket shared = {{"route", "shared"}};
    auto a = NewEnvoy(replicas[0]->grpc_address());
    auto b = NewEnvoy(replicas[1]->grpc_address());
    auto c = NewEnvoy(replicas[1]->grpc_address());
    a->Start(shared, 20);
    b->Start(shared, 150);
    c->Start(shared, 300);
    EXPECT_TRUE(HoldsRate(*a, shared, 20, 2.5)) << HeldRate(*a, shared);
    EXPECT_TRUE(HoldsRate(*b, shared, 40, 4)) << HeldRate(*b, shared);
    EXPECT_TRUE(HoldsRate(*c, shared, 40, 4)) << HeldRate(*c, shared);
    // The second replica goes away with its Envoys: the first's Envoy may take the whole limit
    // once that replica's entry is older than 2.5 rebalances.
    b.reset();
    c.reset();
    replicas[1].reset();
    EXPECT_TRUE(HoldsRate(*a, shared, 100, 10)) << HeldRate(*a, shared);
    EXPECT_TRUE(a->ServerEndedStreams().empty());
  }

  TempDir dir_;
  std::unique_ptr<SluiceServer> sluice_;
};

// Verifies the service on the RLS listener with two Envoys as they are: each gets a token bucket
// at once, and the rebalances split the limit 50/50 (as rates Envoy computes); the health service
// names RLQS; /metrics counts streams, assignments and the per-rule gauges; /rlqs lists the
// bucket with its value redacted, and nothing a client sends forges a line of it.
TEST_F(RlqsE2eTest, EnvoysShareABucketsLimit) {
  Start();
  const RlqsBucket checkout = {{"route", "checkout"}};
  auto a = NewEnvoy(sluice_->grpc_address());
  auto b = NewEnvoy(sluice_->grpc_address());
  a->Start(checkout, 300);
  b->Start(checkout, 300);
  EXPECT_TRUE(HoldsRate(*a, checkout, 50, 5)) << HeldRate(*a, checkout);
  EXPECT_TRUE(HoldsRate(*b, checkout, 50, 5)) << HeldRate(*b, checkout);
  const auto action = a->LastAction(checkout);
  ASSERT_TRUE(action.has_value());
  // Four report intervals, whole seconds, and never less than Envoy's 5 s reconnect and a
  // rebalance: 6 s once the server has measured the 1 s ticks (20 s, Envoy's 5 s times four,
  // for an assignment sent before).
  EXPECT_THAT(action->quota_assignment_action().assignment_time_to_live().seconds(),
              ::testing::AnyOf(6, 20));
  EXPECT_EQ(action->quota_assignment_action().assignment_time_to_live().nanos(), 0);
  const std::string serving("\x08\x01", 2);
  EXPECT_EQ(testing::GrpcHealthCheck(sluice_->grpc_address(),
                                     "envoy.service.rate_limit_quota.v3.RateLimitQuotaService"),
            serving);
  RawStream forger(sluice_->grpc_address());
  ASSERT_TRUE(forger.Write(RawStream::Report("edge", {{"route", "x\nedge route=forged: 1.0/s"}}, 1, 0)));
  rlqs::RateLimitQuotaResponse answer;
  ASSERT_TRUE(forger.Read(&answer));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // two rebalances: the page
  const std::string metrics = HttpGet(sluice_->http_port(), "/metrics");
  EXPECT_THAT(metrics, HasSubstr("sluice_rlqs_streams 3"));
  EXPECT_THAT(metrics, HasSubstr("sluice_rlqs_assignments_total{strategy=\"token_bucket\"}"));
  EXPECT_THAT(metrics, HasSubstr("sluice_rlqs_rule_share{key=\"edge.route\"}"));
  EXPECT_THAT(metrics, HasSubstr("sluice_rlqs_state_bytes "));
  const std::string live = HttpGet(sluice_->http_port(), "/rlqs");
  EXPECT_THAT(live, HasSubstr("rlqs: 3 streams, 2 buckets, 3 subscriptions"));
  EXPECT_THAT(live, HasSubstr("edge route=<redacted 8 bytes #"));
  EXPECT_THAT(live, HasSubstr(": 100.0/s; here 2 (demand "));
  EXPECT_THAT(live, Not(HasSubstr("checkout")));
  EXPECT_THAT(live, Not(HasSubstr("\nedge route=forged")));
  EXPECT_TRUE(a->ServerEndedStreams().empty());
}

// Verifies that nothing today's Envoy sends ends its stream, and idle buckets: an Envoy whose
// traffic moves to a new bucket every 1.5 s (each new bucket reported at once with 0 s, the old
// ones reported idle on every tick) keeps its stream, each idle bucket is abandoned within four
// ticks, and when traffic returns to one the new immediate report is answered at once. A client
// that follows the API text instead (domain only in a stream's first message, each bucket on its
// own interval, exact durations) is served too.
TEST_F(RlqsE2eTest, EnvoysStreamsLastAndIdleBucketsAreAbandoned) {
  Start();
  for (EnvoyQuotaProfile profile : {EnvoyQuotaProfile::kEnvoy, EnvoyQuotaProfile::kApiText}) {
    SCOPED_TRACE(EnvoyQuotaProfileName(profile));
    auto envoy = NewEnvoy(sluice_->grpc_address(), absl::Seconds(1), profile);
    const std::string prefix = EnvoyQuotaProfileName(profile);
    const RlqsBucket first = {{"route", prefix + "-0"}};
    envoy->Start(first, 20);
    for (int n = 1; n <= 5; ++n) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      envoy->SetTraffic({{"route", absl::StrCat(prefix, "-", n)}}, 20);
    }
    // Four ticks after the last move, every bucket idle since is abandoned (after 3 idle ticks)
    // and forgotten: the first five.
    std::this_thread::sleep_for(std::chrono::milliseconds(4200));
    EXPECT_FALSE(envoy->HasBucket(first));
    EXPECT_GE(envoy->abandons(), 5u);
    EXPECT_TRUE(envoy->HasBucket({{"route", prefix + "-5"}}));
    envoy->SetTraffic(first, 20);
    EXPECT_TRUE(RlqsEmulatedEnvoy::WaitUntil(
        [&] { return HeldRate(*envoy, first) > 0; }, absl::Seconds(1)));
    envoy->Stop();
    for (const auto& end : envoy->ServerEndedStreams()) {
      ADD_FAILURE() << "the server ended a stream: " << end.code << " " << end.message;
    }
    EXPECT_EQ(envoy->streams_opened(), 1u);
  }
  EXPECT_THAT(HttpGet(sluice_->http_port(), "/metrics"), HasSubstr("sluice_rlqs_refused_total 0"));
}

// Verifies buckets born at every phase of Envoy's 5 s report timer (issue 56): two Envoys
// (Envoy's own 5 s ticks, timers out of step) each send 20/s to each of twelve tenants' 100/s
// buckets, every tenant's first request at a random moment of the first 10 s. No abandon reaches
// a bucket (each is busy throughout), Envoy rebuilds no token bucket for a renewal (a bucket of
// the same size and rate as the one it held), and each tenant is admitted what it asks. Over
// 30 s, since only Envoy's real timer shows the phases.
TEST_F(RlqsE2eTest, BucketsBornAtAnyPhaseOfEnvoysTimerAreKeptAndRenewedInPlace) {
  Start();
  RlqsEmulationOptions options;
  options.server = sluice_->grpc_address();
  options.domain = "edge";
  options.bucket = {{"route", "tenant"}};
  options.demands = {20, 20};
  options.tenants = 12;
  options.warmup_s = 12;
  options.duration_s = 18;
  options.seed = 56;
  auto result = RunRlqsEmulation(options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->busy_abandons, 0u);
  EXPECT_EQ(result->abandons, 0u);
  EXPECT_EQ(result->rebuilds.same_bucket, 0u);
  EXPECT_TRUE(result->server_ended.empty());
  ASSERT_EQ(result->tenants.size(), 12u);
  for (const RlqsTenant& tenant : result->tenants) {
    EXPECT_NEAR(tenant.admitted_per_s, 40, 2) << tenant.bucket;
  }
}

// Verifies the bad inputs no Envoy sends end their stream with INVALID_ARGUMENT saying what is
// wrong (a negative time_elapsed, a second domain), while a 0 s first report is answered.
TEST_F(RlqsE2eTest, BadReportsEndTheStream) {
  Start();
  RawStream bad(sluice_->grpc_address());
  rlqs::RateLimitQuotaUsageReports negative = RawStream::Report("edge", {{"route", "r"}}, 1, -3);
  ASSERT_TRUE(bad.Write(negative));
  grpc::Status status = bad.Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("time_elapsed must not be negative"));
  RawStream other(sluice_->grpc_address());
  ASSERT_TRUE(other.Write(RawStream::Report("edge", {{"route", "r"}}, 1, 0)));
  rlqs::RateLimitQuotaResponse response;
  ASSERT_TRUE(other.Read(&response));
  EXPECT_TRUE(response.bucket_action(0).quota_assignment_action().rate_limit_strategy()
                  .has_token_bucket());
  ASSERT_TRUE(other.Write(RawStream::Report("elsewhere", {{"route", "r"}}, 1, 1)));
  status = other.Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("differs from the stream's first report"));
}

// Verifies a rolling restart as Envoy lives it (Envoy's own 5 s reports): on SIGTERM the stream
// ends, and the Envoy keeps enforcing the token bucket it holds (not its no-assignment
// behaviour) for the TTL, long enough to reconnect elsewhere; --rlqs=false serves no RLQS.
TEST_F(RlqsE2eTest, ShutdownEndsStreamsAndLeavesAssignmentsInForce) {
  Start();
  const RlqsBucket x = {{"route", "x"}};
  RlqsEmulatedEnvoy::Options options;
  options.server = sluice_->grpc_address();
  options.domain = "edge";
  RlqsEmulatedEnvoy envoy(options);
  envoy.Start(x, 10);
  ASSERT_TRUE(HoldsRate(envoy, x, 100, 1));
  sluice_->process().Stop(SIGTERM, std::chrono::seconds(10));
  ASSERT_TRUE(RlqsEmulatedEnvoy::WaitUntil([&] { return !envoy.stream_open(); },
                                           absl::Seconds(5)));
  const auto view = envoy.View(x);
  ASSERT_TRUE(view.has_value());
  EXPECT_EQ(view->mode, EnvoyBucketView::Mode::kAssigned);
  EXPECT_NEAR(HeldRate(envoy, x), 100, 1);
  EXPECT_GE(view->expires_at - absl::Now(), absl::Seconds(10));  // 20 s from its last renewal
  envoy.Stop();

  sluice_.reset();
  Start({"--rlqs=false"});
  RawStream off(sluice_->grpc_address());
  off.Write(RawStream::Report("edge", {{"route", "x"}}, 1, 0));
  EXPECT_EQ(off.Finish().error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_THAT(HttpGet(sluice_->http_port(), "/rlqs"), HasSubstr("the quota service is off"));
}

// Verifies the first finding of issue 47 end to end: a client that reports and never reads is
// cancelled once its responses waiting pass --rlqs_max_pending_kib, Sluice's memory stays
// bounded, and meanwhile /healthcheck answers and an Envoy is served.
TEST_F(RlqsE2eTest, AClientThatNeverReadsIsCancelledNotFed) {
  Start({"--rlqs_rebalance_interval=200ms", "--rlqs_max_pending_kib=256"});
  RawStream deaf(sluice_->grpc_address());
  const std::string pad(200, 'p');
  int written = 0;
  const auto started = std::chrono::steady_clock::now();
  for (; written < 10000; ++written) {
    RlqsBucket bucket;
    for (int p = 0; p < 8; ++p) {
      bucket.emplace_back(absl::StrCat("k", p), absl::StrCat(written, pad));
    }
    if (!deaf.Write(RawStream::Report("edge", bucket, 1, 0))) {
      break;
    }
  }
  EXPECT_LT(written, 10000) << "never cancelled";
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20));
  EXPECT_LT(ResidentBytes(sluice_->process().pid()), int64_t{200} << 20);
  EXPECT_THAT(HttpGet(sluice_->http_port(), "/healthcheck"), HasSubstr("OK"));
  const RlqsBucket real = {{"route", "real"}};
  auto envoy = NewEnvoy(sluice_->grpc_address());
  envoy->Start(real, 10);
  EXPECT_TRUE(HoldsRate(*envoy, real, 100, 1));
  EXPECT_THAT(HttpGet(sluice_->http_port(), "/metrics"), HasSubstr("sluice_rlqs_streams 1\n"));
}

// A report of `count` new buckets of three pairs (an Envoy reconnecting with all it holds).
rlqs::RateLimitQuotaUsageReports ManyBuckets(int count, const std::string& prefix) {
  rlqs::RateLimitQuotaUsageReports reports;
  reports.set_domain("edge");
  for (int i = 0; i < count; ++i) {
    auto* usage = reports.add_bucket_quota_usages();
    auto& pairs = *usage->mutable_bucket_id()->mutable_bucket();
    pairs["route"] = absl::StrCat(prefix, i);
    pairs["tenant"] = std::string(32, 't');
    pairs["zone"] = "zone-a";
    usage->set_num_requests_allowed(1);
  }
  return reports;
}

// Verifies that the bound on responses waiting never ends a client that reads: an Envoy that
// (re)connects with 7,000 buckets in one report gets all their answers in one message, whatever
// --rlqs_max_pending_kib (here its least); and that one that does not read is ended once a write
// has waited --rlqs_write_timeout.
TEST_F(RlqsE2eTest, OnlyClientsThatDoNotReadAreEnded) {
  Start({"--rlqs_rebalance_interval=200ms", "--rlqs_max_pending_kib=64",
         "--rlqs_write_timeout=1s"});
  RawStream reader(sluice_->grpc_address());
  ASSERT_TRUE(reader.Write(ManyBuckets(7000, "r")));
  rlqs::RateLimitQuotaResponse response;
  int answered = 0;
  while (answered < 7000 && reader.Read(&response)) {
    answered += response.bucket_action_size();
  }
  EXPECT_EQ(answered, 7000);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_THAT(HttpGet(sluice_->http_port(), "/metrics"), HasSubstr("sluice_rlqs_refused_total 0\n"));

  // A client that does not read: its answers fill HTTP/2's windows, a write stays in flight, and
  // after --rlqs_write_timeout the stream is ended (the cap on what waits is out of the way).
  sluice_.reset();
  Start({"--rlqs_rebalance_interval=200ms", "--rlqs_write_timeout=1s"});
  RawStream deaf(sluice_->grpc_address());
  const auto started = std::chrono::steady_clock::now();
  bool ended = false;
  for (int i = 0; i < 200 && !ended; ++i) {
    ended = !deaf.Write(ManyBuckets(500, absl::StrCat("d", i, "-", std::string(200, 'p'))));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(ended) << "a stream that does not read was never ended";
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(8));
  const grpc::Status status = deaf.Finish();
  EXPECT_NE(status.error_code(), grpc::StatusCode::OK);
  EXPECT_THAT(HttpGet(sluice_->http_port(), "/metrics"), HasSubstr("sluice_rlqs_streams 0\n"));
}

// A report of `count` new buckets of domain edge whose ids are about 1 KiB (route=<prefix><i>,
// padded): its answer is about `count` KiB on the wire, and counts 2 to 3 KiB a bucket against the
// bounds on responses waiting (server/quota/response_queue.cc estimates what it holds in memory).
rlqs::RateLimitQuotaUsageReports LargeBuckets(int count, const std::string& prefix) {
  rlqs::RateLimitQuotaUsageReports reports;
  reports.set_domain("edge");
  for (int i = 0; i < count; ++i) {
    auto* usage = reports.add_bucket_quota_usages();
    (*usage->mutable_bucket_id()->mutable_bucket())["route"] =
        absl::StrCat(prefix, i, "-", std::string(960, 'p'));
    usage->set_num_requests_allowed(1);
  }
  return reports;
}

// A client's channel whose HTTP/2 windows stay at 64 KiB: no BDP probing (with it, gRPC's client
// grows its windows and takes in a whole answer of hundreds of KiB unread), and a connection of
// its own. A stream of it that does not read leaves a larger answer in flight on the server.
grpc::ChannelArguments SmallWindows() {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return args;
}

// Verifies the bound on responses waiting in all streams together (--rlqs_max_pending_mib, here
// its least, 1 MiB, with --rlqs_max_pending_kib and --rlqs_write_timeout out of the way): while a
// client that does not read holds an answer of about 0.7 MiB (as counted) in flight, another
// client's answer of as much, which would go at once, is refused, and its stream ended
// RESOURCE_EXHAUSTED naming the flag; /healthcheck answers meanwhile; once the first's write has
// waited a second, more queued for it (past the bound) ends its stream; then an Envoy is served.
TEST_F(RlqsE2eTest, ResponsesWaitingInAllStreamsAreBounded) {
  Start({"--rlqs_rebalance_interval=200ms", "--rlqs_max_pending_mib=1",
         "--rlqs_max_pending_kib=65536", "--rlqs_write_timeout=60s"});
  RawStream deaf(sluice_->grpc_address(), SmallWindows());
  ASSERT_TRUE(deaf.Write(LargeBuckets(300, "a")));
  ASSERT_TRUE(RlqsEmulatedEnvoy::WaitUntil(  // answered: the answer goes, and sticks
      [&] {
        return absl::StrContains(HttpGet(sluice_->http_port(), "/metrics"),
                                 "sluice_rlqs_buckets 300\n");
      },
      absl::Seconds(5)));
  RawStream other(sluice_->grpc_address(), SmallWindows());
  ASSERT_TRUE(other.Write(LargeBuckets(300, "b")));
  const grpc::Status refused = other.Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_THAT(refused.error_message(), HasSubstr("at their bound (1 MiB, --rlqs_max_pending_mib)"));
  EXPECT_THAT(HttpGet(sluice_->http_port(), "/healthcheck"), HasSubstr("OK"));

  // The first client has still read nothing: its stream is ended by the server (cancelled, its
  // write in flight) once more is queued for it.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  deaf.Write(LargeBuckets(300, "c"));
  EXPECT_TRUE(RlqsEmulatedEnvoy::WaitUntil(
      [&] {
        return absl::StrContains(HttpGet(sluice_->http_port(), "/metrics"),
                                 "sluice_rlqs_streams 0\n");
      },
      absl::Seconds(5)));
  const grpc::Status ended = deaf.Finish();
  EXPECT_EQ(ended.error_code(), grpc::StatusCode::CANCELLED) << ended.error_message();
  const RlqsBucket real = {{"route", "real"}};
  auto envoy = NewEnvoy(sluice_->grpc_address());
  envoy->Start(real, 10);
  EXPECT_TRUE(HoldsRate(*envoy, real, 100, 1));
  EXPECT_TRUE(envoy->ServerEndedStreams().empty());
}

// Verifies sluicectl quota: it reports on one bucket and prints the assignments (exit 0 when
// its duration runs out), and says why when the server ends the stream (exit 1).
TEST_F(RlqsE2eTest, SluicectlQuotaPrintsAssignments) {
  Start();
  const std::string base = absl::StrCat(SluiceServer::BinaryPath("sluicectl"),
                                        " --server=", sluice_->grpc_address(), " quota ");
  auto [status, out] = testing::RunCommand(base + "edge route=checkout --rate=40 --duration=1500ms");
  EXPECT_EQ(status, 0) << out;
  // The whole limit, with a tenth of a second of burst until the bucket settled.
  EXPECT_THAT(out, HasSubstr("token_bucket { max_tokens: 10 tokens_per_fill { value: 100 }"));
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

// Verifies the last finding of issue 47 on Redis: a flood of one domain's buckets (20,000 of a
// wildcard rule, from one client) leaves another domain's Envoy on its token bucket (never the
// failure mode's ALLOW_ALL), and RLS decisions on the same Redis hold their limit meanwhile (100
// a minute: at most 200 admitted of 300, across a minute's boundary).
TEST_F(RlqsE2eTest, AFloodedDomainLeavesOtherDomainsShares) {
  auto redis = RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  dir_.WriteFile("config/junk.yaml", kJunkConfig);
  Start({"--rlqs_rebalance_interval=500ms", "--backend=redis",
         "--redis_addresses=" + (*redis)->address()});
  const RlqsBucket route = {{"route", "steady"}};
  auto envoy = NewEnvoy(sluice_->grpc_address());
  envoy->Start(route, 300);
  ASSERT_TRUE(HoldsRate(*envoy, route, 100, 1));
  std::vector<std::unique_ptr<RawStream>> flood;
  for (int s = 0; s < 2; ++s) {
    auto stream = std::make_unique<RawStream>(sluice_->grpc_address());
    rlqs::RateLimitQuotaUsageReports reports;
    reports.set_domain("junk");
    for (int i = 0; i < 10000; ++i) {
      auto* usage = reports.add_bucket_quota_usages();
      (*usage->mutable_bucket_id()->mutable_bucket())["tenant"] = absl::StrCat(s, "-", i);
      usage->set_num_requests_allowed(5);
    }
    ASSERT_TRUE(stream->Write(reports));
    flood.push_back(std::move(stream));
  }
  RlsClient rls(sluice_->grpc_address());
  auto request = BuildRequest("edge", {"rls=one"}, 0);
  ASSERT_TRUE(request.ok());
  int admitted = 0;
  bool always_a_bucket = true;
  for (int i = 0; i < 300; ++i) {
    auto answer = rls.ShouldRateLimit(*request, absl::Seconds(2));
    ASSERT_TRUE(answer.ok()) << answer.status();
    admitted += answer->overall_code() == envoy::service::ratelimit::v3::RateLimitResponse::OK;
    always_a_bucket &= HeldRate(*envoy, route) > 99;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_LE(admitted, 200);
  EXPECT_TRUE(always_a_bucket);
  EXPECT_THAT(HttpGet(sluice_->http_port(), "/rlqs"), HasSubstr("rlqs: 3 streams, 20001 buckets"));
  EXPECT_TRUE(envoy->ServerEndedStreams().empty());
}

}  // namespace
}  // namespace sluice
