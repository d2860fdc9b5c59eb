// What envoyproxy/ratelimit's own users reported, replayed against the real build/bin/sluice on
// a real Redis, each test named after its report; and a mixed fleet (an upstream replica beside a
// Sluice replica on one Redis, standalone and Redis Cluster) admitting the limit once.
//
// The upstream replica here is emulated from its source (envoyproxy/ratelimit, read at b7792693
// and at its newest commit, f2fb157): every rule of EmulatedUpstream cites the file and function
// it comes from. tests/e2e/upstream_side_by_side_e2e_test.cc runs the real upstream binary where
// it is built (docs/development.md); CI has none, and runs this.
#include <chrono>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/rls_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/process.h"
#include "tests/support/redis_cluster.h"
#include "tests/support/redis_server.h"
#include "tests/support/sluice_server.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using testing::ChildProcess;
using testing::FreePort;
using testing::RedisCluster;
using testing::RedisServer;
using testing::SluiceServer;
using testing::TempDir;
using testing::WaitForPort;

using Entries = std::vector<std::pair<std::string, std::string>>;

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Waits, if need be, until the current window of `period_s` seconds has at least `room_s` left:
// a test's requests then all fall in one window.
void WaitForWindowRoom(int64_t period_s, int64_t room_s) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const int64_t into_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now).count() % (period_s * 1000);
  if (period_s * 1000 - into_ms < room_s * 1000) {
    std::this_thread::sleep_for(std::chrono::milliseconds(period_s * 1000 - into_ms + 50));
  }
}

// Where an emulated upstream replica sends a command: a standalone Redis, or the master of the
// key's slot in a cluster (upstream's radix cluster client routes by slot).
class RedisTarget {
 public:
  explicit RedisTarget(RedisServer* redis) : redis_(redis) {}
  explicit RedisTarget(RedisCluster* cluster) : cluster_(cluster) {}

  absl::StatusOr<std::string> Command(const std::string& key,
                                      const std::vector<std::string>& args) {
    if (redis_ != nullptr) {
      return redis_->Command(args);
    }
    absl::StatusOr<int> slot = cluster_->KeySlot(key);
    if (!slot.ok()) {
      return slot.status();
    }
    absl::StatusOr<std::string> master = cluster_->MasterForSlot(*slot);
    if (!master.ok()) {
      return master.status();
    }
    return cluster_->Command(*master, args);
  }

 private:
  RedisServer* redis_ = nullptr;
  RedisCluster* cluster_ = nullptr;
};

// One envoyproxy/ratelimit replica's Redis fixed window, rule by rule from its source, for one
// descriptor and one limit (upstream has no other algorithm):
class EmulatedUpstream {
 public:
  EmulatedUpstream(RedisTarget target, std::string prefix)
      : target_(std::move(target)), prefix_(std::move(prefix)) {}

  struct Answer {
    bool ok = false;
    uint64_t remaining = 0;
  };

  // src/limiter/cache_key.go, GenerateCacheKey: prefix, domain, '_', each entry's key and value
  // each followed by '_', then (now / divider) * divider, divider = utils.UnitToDivider(unit).
  std::string Key(const std::string& domain, const Entries& entries, int64_t unit_s) const {
    std::string key = absl::StrCat(prefix_, domain, "_");
    for (const auto& [k, v] : entries) {
      absl::StrAppend(&key, k, "_", v, "_");
    }
    absl::StrAppend(&key, UnixSeconds() / unit_s * unit_s);
    return key;
  }

  // src/redis/fixed_cache_impl.go, DoLimit with stopCacheKeyIncrementWhenOverlimit false and no
  // local cache: pipelineAppend's INCRBY <key> <hits> then EXPIRE <key> <divider + jitter>
  // (jitter 0 here: EXPIRATION_JITTER_MAX_SECONDS=0); src/limiter/base_limiter.go,
  // GetResponseDescriptorStatus: over the limit when limitAfterIncrease > requests_per_unit,
  // else OK with requests_per_unit - limitAfterIncrease remaining.
  absl::StatusOr<Answer> ShouldRateLimit(const std::string& domain, const Entries& entries,
                                         uint32_t requests_per_unit, int64_t unit_s,
                                         uint64_t hits = 1) {
    const std::string key = Key(domain, entries, unit_s);
    absl::StatusOr<std::string> after = target_.Command(key, {"INCRBY", key, absl::StrCat(hits)});
    if (!after.ok()) {
      return after.status();
    }
    if (absl::StatusOr<std::string> expire =
            target_.Command(key, {"EXPIRE", key, absl::StrCat(unit_s)});
        !expire.ok()) {
      return expire.status();
    }
    uint64_t count = 0;
    if (!absl::SimpleAtoi(*after, &count)) {
      return absl::InternalError(absl::StrCat("INCRBY answered ", *after));
    }
    Answer answer;
    answer.ok = count <= requests_per_unit;
    answer.remaining = answer.ok ? requests_per_unit - count : 0;
    return answer;
  }

 private:
  RedisTarget target_;
  const std::string prefix_;
};

class UpstreamReportsE2eTest : public ::testing::Test {
 protected:
  // Lays out RUNTIME_ROOT/ratelimit/config/config.yaml with `yaml`.
  std::string WriteConfig(const std::string& yaml) {
    dir_.WriteFile("runtime/ratelimit/config/config.yaml", yaml);
    return dir_.path() + "/runtime";
  }

  // Starts sluice with no flags and upstream's variables for `redis_url` (a cluster's nodes when
  // `cluster`), the config of WriteConfig, plus `extra`; as a team migrating would.
  void StartUpstreamEnvironment(const std::string& redis_url, bool cluster,
                                std::vector<std::string> extra = {}) {
    grpc_port_ = FreePort();
    const int http_port = FreePort();
    std::vector<std::string> env = {
        absl::StrCat("RUNTIME_ROOT=", dir_.path(), "/runtime"),
        "RUNTIME_SUBDIRECTORY=ratelimit",
        "RUNTIME_WATCH_ROOT=false",
        "HOST=127.0.0.1",
        absl::StrCat("PORT=", http_port),
        "GRPC_HOST=127.0.0.1",
        absl::StrCat("GRPC_PORT=", grpc_port_),
        "DEBUG_HOST=127.0.0.1",
        absl::StrCat("DEBUG_PORT=", FreePort()),
        "USE_STATSD=false",
        "LOG_LEVEL=info",
        "REDIS_SOCKET_TYPE=tcp",
        absl::StrCat("REDIS_URL=", redis_url),
        "EXPIRATION_JITTER_MAX_SECONDS=0",
        // Every answer here is Redis', none the failure policy's: on a loaded machine (the
        // sanitized suite, four tests at a time) a first call can miss the 10 ms default
        // budget and be answered OK without a key written.
        "SLUICE_REDIS_TIMEOUT=500ms",
    };
    if (cluster) {
      env.push_back("REDIS_TYPE=cluster");
    }
    env.insert(env.end(), extra.begin(), extra.end());
    process_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{SluiceServer::BinaryPath("sluice")},
        absl::StrCat(dir_.path(), "/sluice-", ++started_, ".log"), env);
    ASSERT_TRUE(WaitForPort(grpc_port_, std::chrono::seconds(20))) << process_->ReadLog();
    ASSERT_TRUE(WaitForPort(http_port, std::chrono::seconds(20))) << process_->ReadLog();
    client_ = std::make_unique<RlsClient>(absl::StrCat("127.0.0.1:", grpc_port_));
    WaitUntilServing();
  }

  // Starts sluice with Sluice's own flags: --config on the config of WriteConfig, Redis at
  // `redis_address`, and `extra`.
  void StartNative(const std::string& redis_address, std::vector<std::string> extra = {}) {
    std::vector<std::string> flags = {"--backend=redis",
                                      absl::StrCat("--redis_addresses=", redis_address),
                                      "--config_recursive"};
    flags.insert(flags.end(), extra.begin(), extra.end());
    auto server = SluiceServer::Start(dir_.path() + "/runtime/ratelimit/config", flags,
                                      dir_.path());
    ASSERT_TRUE(server.ok()) << server.status();
    native_ = std::move(*server);
    client_ = std::make_unique<RlsClient>(native_->grpc_address());
    WaitUntilServing();
  }

  // Health waits for Redis under upstream's variables; so does this.
  void WaitUntilServing() {
    for (int i = 0; i < 200; ++i) {
      auto request = BuildRequest("probe", {"k=v"}, 0);
      if (request.ok() && client_->ShouldRateLimit(*request, absl::Seconds(2)).ok()) {
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  std::string Log() const {
    return process_ != nullptr ? process_->ReadLog() : native_ != nullptr ? native_->ReadLog() : "";
  }

  // One request of `descriptors` ("k=v,k2=v2" each) in `domain`; `limits` (by index, when set):
  // a limit override of that many per `unit`.
  RlsResponse Check(const std::string& domain, const std::vector<std::string>& descriptors,
                    const std::vector<std::optional<uint32_t>>& limits = {},
                    envoy::type::v3::RateLimitUnit unit = envoy::type::v3::MINUTE) {
    auto request = BuildRequest(domain, descriptors, 0);
    EXPECT_TRUE(request.ok()) << request.status();
    for (size_t i = 0; i < limits.size(); ++i) {
      if (limits[i].has_value()) {
        auto* limit = request->mutable_descriptors(static_cast<int>(i))->mutable_limit();
        limit->set_requests_per_unit(*limits[i]);
        limit->set_unit(unit);
      }
    }
    auto response = client_->ShouldRateLimit(*request, absl::Seconds(5));
    EXPECT_TRUE(response.ok()) << response.status() << "\n" << Log();
    return response.ok() ? *response : RlsResponse();
  }

  static std::string Header(const RlsResponse& response, absl::string_view name) {
    for (const auto& header : response.response_headers_to_add()) {
      if (header.key() == name) {
        return header.value();
      }
    }
    return "absent";
  }

  // The value at `key` once it is `want` (give-backs are sent after the answer), or the last
  // value read.
  static std::string WaitForValue(RedisServer& redis, const std::string& key,
                                  const std::string& want) {
    std::string value;
    for (int i = 0; i < 200; ++i) {
      absl::StatusOr<std::string> read = redis.Command({"GET", key});
      value = read.ok() ? *read : "";
      if (value == want) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return value;
  }

  // Alternates 2 * limit requests for one descriptor between `upstream` and this Sluice (one
  // window): how many were admitted, and a line per answer for the failure message.
  std::pair<int, std::string> AlternateMixedFleet(EmulatedUpstream& upstream,
                                                  const std::string& tenant, uint32_t limit) {
    int admitted = 0;
    std::string trace;
    for (uint32_t i = 0; i < 2 * limit; ++i) {
      bool ok = false;
      if (i % 2 == 0) {
        absl::StatusOr<EmulatedUpstream::Answer> answer =
            upstream.ShouldRateLimit("mixed", {{"tenant", tenant}}, limit, 60);
        EXPECT_TRUE(answer.ok()) << answer.status();
        ok = answer.ok() && answer->ok;
        absl::StrAppend(&trace, "upstream ", ok ? "OK" : "OVER", "\n");
      } else {
        ok = Check("mixed", {"tenant=" + tenant}).overall_code() == RlsResponse::OK;
        absl::StrAppend(&trace, "sluice   ", ok ? "OK" : "OVER", "\n");
      }
      admitted += ok ? 1 : 0;
    }
    return {admitted, trace};
  }

  static constexpr char kMixedConfig[] = R"(domain: mixed
descriptors:
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 10}
)";

  TempDir dir_;
  int started_ = 0;
  int grpc_port_ = 0;
  std::unique_ptr<ChildProcess> process_;
  std::unique_ptr<SluiceServer> native_;
  std::unique_ptr<RlsClient> client_;
};

// Verifies a live migration holds the limit: an upstream replica and a Sluice replica under
// upstream's variables on one standalone Redis, requests alternating between them, admit a
// 10/minute limit 10 times (they counted 20 before Sluice kept upstream's keys), and both then
// deny; Sluice wrote upstream's key, with upstream's TTL.
TEST_F(UpstreamReportsE2eTest, MixedFleetOnOneRedisAdmitsTheLimitOnce) {
  auto redis = RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  WriteConfig(kMixedConfig);
  StartUpstreamEnvironment((*redis)->address(), /*cluster=*/false);
  EmulatedUpstream upstream(RedisTarget(redis->get()), "");
  WaitForWindowRoom(60, 10);
  const auto [admitted, trace] = AlternateMixedFleet(upstream, "t1", 10);
  EXPECT_EQ(admitted, 10) << trace;
  EXPECT_EQ(Check("mixed", {"tenant=t1"}).overall_code(), RlsResponse::OVER_LIMIT);
  const std::string key = upstream.Key("mixed", {{"tenant", "t1"}}, 60);
  auto ttl = (*redis)->Command({"TTL", key});
  ASSERT_TRUE(ttl.ok()) << ttl.status();
  EXPECT_GT(std::stoll(*ttl), 50);
  EXPECT_LE(std::stoll(*ttl), 60);
  auto sluice_keys = (*redis)->Command({"KEYS", "*{*"});
  ASSERT_TRUE(sluice_keys.ok());
  EXPECT_EQ(*sluice_keys, "") << "a key in Sluice's own layout";
}

// Verifies the same on a Redis Cluster: upstream's keys carry no hash tag, and each replica
// sends each to its slot's master.
TEST_F(UpstreamReportsE2eTest, MixedFleetOnOneClusterAdmitsTheLimitOnce) {
  auto cluster = RedisCluster::Start({.masters = 3, .replicas_per_master = 0});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  WriteConfig(kMixedConfig);
  StartUpstreamEnvironment(absl::StrJoin((*cluster)->SeedAddresses(), ","), /*cluster=*/true);
  EmulatedUpstream upstream(RedisTarget(cluster->get()), "");
  WaitForWindowRoom(60, 10);
  for (const char* tenant : {"t1", "t2", "t3"}) {  // keys on several slots
    const auto [admitted, trace] = AlternateMixedFleet(upstream, tenant, 10);
    EXPECT_EQ(admitted, 10) << tenant << "\n" << trace;
  }
}

// Verifies Sluice's own flags select upstream's keys too (--redis_key_layout=upstream, with
// CACHE_KEY_PREFIX's counterpart --redis_key_prefix), and that --redis_key_layout=sluice, the
// way back once the migration is over, keeps Sluice's keys, which upstream's replicas do not
// count.
TEST_F(UpstreamReportsE2eTest, NativeFlagSelectsUpstreamsKeys) {
  auto redis = RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  WriteConfig(kMixedConfig);
  StartNative((*redis)->address(), {"--redis_key_layout=upstream", "--redis_key_prefix=rl_",
                                    "--over_limit_cache_keys=0"});
  EmulatedUpstream upstream(RedisTarget(redis->get()), "rl_");
  WaitForWindowRoom(60, 10);
  const auto [admitted, trace] = AlternateMixedFleet(upstream, "n1", 10);
  EXPECT_EQ(admitted, 10) << trace;

  native_.reset();
  StartNative((*redis)->address(), {"--redis_key_layout=sluice", "--redis_key_prefix=rl_"});
  EXPECT_EQ(Check("mixed", {"tenant=n2"}).statuses(0).limit_remaining(), 9u);
  auto own = (*redis)->Command({"KEYS", "rl_{mixed|tenant=n2}*"});
  ASSERT_TRUE(own.ok());
  EXPECT_THAT(*own, HasSubstr("rl_{mixed|tenant=n2}fw:60:w"));
}

// Verifies envoyproxy/ratelimit#1077 is not repeated: a descriptor denied at a request's limit
// override of 2/minute is not denied from the over-limit cache when the next request says
// 100/minute (Sluice's flags, the cache on by default); and under upstream's variables, where
// upstream has no local cache unless LOCAL_CACHE_SIZE_IN_BYTES is set, a 12/minute override
// after a denial at 1/minute is answered as upstream answers it: OK, 9 remaining (its counter,
// shared by every limit, counted the denied hit too).
TEST_F(UpstreamReportsE2eTest, Issue1077OverLimitCacheHonoursTheLimitItCached) {
  auto redis = RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  WriteConfig("domain: o\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, "
              "requests_per_unit: 5}\n");
  StartNative((*redis)->address());
  WaitForWindowRoom(60, 10);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(Check("o", {"user=a"}, {2}).overall_code(), RlsResponse::OK);
  }
  EXPECT_EQ(Check("o", {"user=a"}, {2}).overall_code(), RlsResponse::OVER_LIMIT);
  EXPECT_EQ(Check("o", {"user=a"}, {2}).overall_code(), RlsResponse::OVER_LIMIT);  // cached
  RlsResponse raised = Check("o", {"user=a"}, {100});
  EXPECT_EQ(raised.overall_code(), RlsResponse::OK);
  EXPECT_EQ(raised.statuses(0).limit_remaining(), 99u);  // its own counter (erpc#1058)

  // Upstream's variables: its keys, where overrides of any limit share one counter.
  for (const char* cache : {"", "LOCAL_CACHE_SIZE_IN_BYTES=1048576"}) {
    SCOPED_TRACE(*cache == 0 ? "no local cache" : cache);
    const std::string user = *cache == 0 ? "user=b" : "user=c";
    native_.reset();
    process_.reset();
    std::vector<std::string> extra;
    if (*cache != 0) {
      extra.push_back(cache);
    }
    StartUpstreamEnvironment((*redis)->address(), /*cluster=*/false, extra);
    WaitForWindowRoom(60, 10);
    EXPECT_EQ(Check("o", {user}, {1}).overall_code(), RlsResponse::OK);
    EXPECT_EQ(Check("o", {user}, {1}).overall_code(), RlsResponse::OVER_LIMIT);
    RlsResponse upstreams = Check("o", {user}, {12});
    EXPECT_EQ(upstreams.overall_code(), RlsResponse::OK);
    EXPECT_EQ(upstreams.statuses(0).limit_remaining(), 9u);
  }
}

// Verifies erpc#1058 is not repeated: two descriptors with the same entries but different limit
// overrides, [user=u limit 10/minute] and [user=u limit 1000/minute] in one request, keep two
// counters: the 10/minute one denies at its 11th request, not its 6th.
TEST_F(UpstreamReportsE2eTest, Erpc1058OverridesOfDifferentLimitsKeepTheirOwnCounters) {
  auto redis = RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  WriteConfig("domain: o\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, "
              "requests_per_unit: 5}\n");
  StartNative((*redis)->address());
  WaitForWindowRoom(60, 10);
  for (int i = 1; i <= 10; ++i) {
    RlsResponse r = Check("o", {"user=u", "user=u"}, {10, 1000});
    ASSERT_EQ(r.overall_code(), RlsResponse::OK) << "request " << i;
    EXPECT_EQ(r.statuses(0).limit_remaining(), static_cast<uint32_t>(10 - i));
    EXPECT_EQ(r.statuses(1).limit_remaining(), static_cast<uint32_t>(1000 - i));
  }
  RlsResponse eleventh = Check("o", {"user=u", "user=u"}, {10, 1000});
  EXPECT_EQ(eleventh.statuses(0).code(), RlsResponse::OVER_LIMIT);
  EXPECT_EQ(eleventh.statuses(1).code(), RlsResponse::OK);
}

// Verifies a limit override in a domain the server has no config for (Envoy's static limit
// overrides, envoyproxy/envoy#45622: the limit is written in Envoy's config, the rate-limit
// server knows nothing of it) is enforced, where upstream ignores it: OK, then OVER_LIMIT at
// 1/minute, counted per domain.
TEST_F(UpstreamReportsE2eTest, Envoy45622StaticOverrideInAnUnknownDomainIsEnforced) {
  auto redis = RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  WriteConfig("domain: configured\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, "
              "requests_per_unit: 5}\n");
  StartNative((*redis)->address());
  WaitForWindowRoom(60, 10);
  RlsResponse first = Check("envoy_only", {"client=c"}, {1});
  EXPECT_EQ(first.overall_code(), RlsResponse::OK);
  EXPECT_EQ(first.statuses(0).current_limit().requests_per_unit(), 1u);
  EXPECT_EQ(Check("envoy_only", {"client=c"}, {1}).overall_code(), RlsResponse::OVER_LIMIT);
  EXPECT_EQ(Check("other_domain", {"client=c"}, {1}).overall_code(), RlsResponse::OK);
  // Without an override, an unknown domain still limits nothing.
  EXPECT_EQ(Check("envoy_only", {"client=c"}).overall_code(), RlsResponse::OK);
}

// Verifies USE_CALENDAR_MONTH_RATE_LIMIT=true (envoyproxy/ratelimit PR#1206): a month rule's
// window is the calendar month, UTC; its key is stamped with the month's first second, lives
// until the month ends, and the answer's reset is the month's end.
TEST_F(UpstreamReportsE2eTest, Pr1206CalendarMonthEndsAtTheMonthsEnd) {
  auto redis = RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  WriteConfig("domain: m\ndescriptors:\n  - key: plan\n    rate_limit: {unit: month, "
              "requests_per_unit: 1000}\n");
  StartUpstreamEnvironment((*redis)->address(), false, {"USE_CALENDAR_MONTH_RATE_LIMIT=true"});
  // The month that holds now, from the civil calendar (UTC).
  const std::time_t now = static_cast<std::time_t>(UnixSeconds());
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::tm first = utc;
  first.tm_mday = 1, first.tm_hour = 0, first.tm_min = 0, first.tm_sec = 0;
  const int64_t month_start = timegm(&first);
  std::tm next = first;
  next.tm_mon += 1;
  const int64_t month_end = timegm(&next);
  RlsResponse r = Check("m", {"plan=gold"});
  ASSERT_EQ(r.overall_code(), RlsResponse::OK);
  const int64_t reset = r.statuses(0).duration_until_reset().seconds();
  const int64_t left = month_end - UnixSeconds();
  EXPECT_GE(reset, left - 2);
  EXPECT_LE(reset, left + 2);
  const std::string key = absl::StrCat("m_plan_gold_", month_start);
  auto count = (*redis)->Command({"GET", key});
  ASSERT_TRUE(count.ok()) << count.status() << "\n" << Log();
  EXPECT_EQ(*count, "1");
  auto ttl = (*redis)->Command({"TTL", key});
  ASSERT_TRUE(ttl.ok());
  EXPECT_GE(std::stoll(*ttl), left - 2);
  EXPECT_LE(std::stoll(*ttl), left + 2);
}

// Verifies STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true means what upstream's users set it for
// (envoyproxy/ratelimit#427, fixed upstream in #430 and #443): [group=bar] + [special=s] sent 5
// times over special's 3/minute leaves group's 10/minute with 7, not 5: a request denied by one
// descriptor consumes nothing from the others. The same natively with --request_all_or_nothing.
TEST_F(UpstreamReportsE2eTest, Issue427DeniedRequestConsumesNothingFromTheOthers) {
  auto redis = RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  WriteConfig(R"(domain: g
descriptors:
  - key: group
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: special
    rate_limit: {unit: minute, requests_per_unit: 3}
)");
  for (bool native : {false, true}) {
    SCOPED_TRACE(native ? "--request_all_or_nothing" : "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT");
    const std::string group = native ? "bar-native" : "bar";
    process_.reset();
    native_.reset();
    if (native) {
      StartNative((*redis)->address(), {"--request_all_or_nothing"});
    } else {
      StartUpstreamEnvironment((*redis)->address(), false,
                               {"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true"});
    }
    WaitForWindowRoom(60, 10);
    // The group's counter: upstream's key under its variables, Sluice's natively.
    const int64_t now_s = UnixSeconds();
    const std::string counter =
        native ? absl::StrCat("sluice:{g|group=", group, "}fw:60:w", now_s / 60)
               : absl::StrCat("g_group_", group, "_", now_s / 60 * 60);
    int admitted = 0;
    for (int i = 0; i < 5; ++i) {
      RlsResponse r = Check("g", {"group=" + group, "special=s-" + group});
      admitted += r.overall_code() == RlsResponse::OK ? 1 : 0;
      // A denied request's give-back goes to Redis after its answer: the next request waits
      // for it, as a client a round trip later would find it.
      ASSERT_EQ(WaitForValue(**redis, counter, absl::StrCat(admitted)), absl::StrCat(admitted));
      if (i >= 3) {
        EXPECT_EQ(r.overall_code(), RlsResponse::OVER_LIMIT);
        // The group's status says what it keeps: nothing was taken from it.
        EXPECT_EQ(r.statuses(0).code(), RlsResponse::OK);
        EXPECT_EQ(r.statuses(0).limit_remaining(), 7u);
      }
    }
    EXPECT_EQ(admitted, 3);
    RlsResponse alone = Check("g", {"group=" + group});
    EXPECT_EQ(alone.overall_code(), RlsResponse::OK);
    EXPECT_EQ(alone.statuses(0).limit_remaining(), 6u) << Log();
  }
}

// Verifies limit_remaining is what the counter leaves, in either order, under
// STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true: with 2 counted on m=b, [m=b limit 2/minute] +
// [m=b] (a 4/minute rule, the same upstream key) is OVER_LIMIT (the override's 3 > 2), consumes
// nothing, and the 4/minute descriptor says 2 remaining, as Redis holds 2; reversed, the same
// (it once said 0 in one order and 1 in the other).
TEST_F(UpstreamReportsE2eTest, LimitRemainingIsWhatTheCounterLeavesInEitherOrder) {
  auto redis = RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  WriteConfig("domain: r\ndescriptors:\n  - key: m\n    rate_limit: {unit: minute, "
              "requests_per_unit: 4}\n");
  StartUpstreamEnvironment((*redis)->address(), false,
                           {"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true"});
  WaitForWindowRoom(60, 10);
  for (const char* value : {"b", "c"}) {
    const bool reversed = std::string(value) == "c";
    SCOPED_TRACE(reversed ? "rule first" : "override first");
    const std::string entry = absl::StrCat("m=", value);
    EXPECT_EQ(Check("r", {entry}).overall_code(), RlsResponse::OK);
    EXPECT_EQ(Check("r", {entry}).overall_code(), RlsResponse::OK);
    const std::string key = absl::StrCat("r_m_", value, "_", UnixSeconds() / 60 * 60);
    ASSERT_EQ(WaitForValue(**redis, key, "2"), "2");
    RlsResponse r = reversed ? Check("r", {entry, entry}, {std::nullopt, 2})
                             : Check("r", {entry, entry}, {2});
    EXPECT_EQ(r.overall_code(), RlsResponse::OVER_LIMIT);
    const auto& rule = r.statuses(reversed ? 0 : 1);
    EXPECT_EQ(rule.code(), RlsResponse::OK);
    EXPECT_EQ(WaitForValue(**redis, key, "2"), "2");
    EXPECT_EQ(rule.limit_remaining(), 2u);
  }
}

// Verifies a limit of 0 (an override of 0, or a rule without requests_per_unit) is answered as
// the docs say: OVER_LIMIT, no retry-after (no wait lets it pass), duration_until_reset the
// window's end as upstream answers it, and nothing counted in Redis.
TEST_F(UpstreamReportsE2eTest, LimitZeroIsNeverAdmittedUntilTheWindowsEnd) {
  auto redis = RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  WriteConfig("domain: z\ndescriptors:\n  - key: blocked\n    rate_limit: {unit: minute}\n");
  StartUpstreamEnvironment((*redis)->address(), false);
  for (const RlsResponse& r :
       {Check("z", {"blocked=x"}), Check("z", {"user=u"}, {0})}) {
    EXPECT_EQ(r.overall_code(), RlsResponse::OVER_LIMIT);
    EXPECT_EQ(Header(r, "retry-after"), "absent");
    const int64_t left = 60 - UnixSeconds() % 60;
    EXPECT_GE(r.statuses(0).duration_until_reset().seconds(), left - 2);
    EXPECT_LE(r.statuses(0).duration_until_reset().seconds(), left + 1);
  }
  auto keys = (*redis)->Command({"DBSIZE"});
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(*keys, "0");
}

// Verifies a config holding what upstream refuses (a float, an integer past int64 in a string
// field) stops the start with the file, line and field, as upstream refuses the file.
TEST_F(UpstreamReportsE2eTest, ConfigValuesUpstreamRefusesStopTheStart) {
  for (const char* line : {"    value: 1.5\n", "    value: 99999999999999999999\n"}) {
    const std::string runtime = WriteConfig(absl::StrCat(
        "domain: f\ndescriptors:\n  - key: k\n", line,
        "    rate_limit: {unit: minute, requests_per_unit: 1}\n"));
    auto [status, out] = testing::RunCommand(absl::StrCat(
        SluiceServer::BinaryPath("sluice"), " --check_config --config_recursive --config=",
        runtime, "/ratelimit/config 2>&1"));
    EXPECT_NE(status, 0) << out;
    EXPECT_THAT(out, HasSubstr("config.yaml:4: descriptors[0].value: expected a string"));
    EXPECT_THAT(out, HasSubstr("quote it"));
  }
}

}  // namespace
}  // namespace sluice
