// The Redis backend's spans: one per call to a node, under the decision that sent it.
#include <algorithm>
#include <future>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/backend/redis_backend.h"
#include "server/common/clock.h"
#include "server/trace/tracer.h"
#include "tests/support/recording_span_sink.h"
#include "tests/support/redis_cluster.h"
#include "tests/support/redis_server.h"
#include "tests/support/unshared_status.h"

namespace sluice {
namespace {

using testing::IntAttribute;
using testing::RecordingSpanSink;
using testing::StringAttribute;

LimitParams Params(Algorithm algorithm, uint64_t limit) {
  return LimitParams{algorithm, limit, 60000000, limit};
}

class RedisBackendTraceTest : public ::testing::Test {
 protected:
  std::unique_ptr<RedisBackend> Make(RedisBackendOptions options) {
    options.use_caller_clock = true;
    auto backend = RedisBackend::Create(options, RealClock::Get());
    EXPECT_TRUE(backend.ok()) << backend.status();
    EXPECT_TRUE((*backend)->WaitUntilReady(absl::Seconds(10)));
    return std::move(*backend);
  }

  // Starts a traced Evaluate under a new decision span (ended at once: its children may end
  // later, as a real decision's may). Returns the decision's parent and the status to come.
  std::future<absl::Status> StartTraced(Backend& backend, std::vector<LimitCheck> checks,
                                        TraceParent* parent) {
    Span decision = tracer_.StartCall("decision", std::nullopt);
    *parent = decision.parent();
    auto promise = std::make_shared<std::promise<absl::Status>>();
    std::future<absl::Status> status = promise->get_future();
    backend.Evaluate(checks, *parent, [promise](absl::Status s, absl::Span<const Decision>) {
      promise->set_value(testing::UnsharedCopy(s));
    });
    return status;
  }

  RecordingSpanSink sink_;
  RandomIdGenerator ids_;
  Tracer tracer_{sink_, RealClock::Get(), ids_, TracerOptions{}};
};

// Verifies that a traced decision on a standalone Redis gets one client span for its one
// pipelined call, a child of the decision's span, naming the node and counting commands and
// keys; an untraced decision records nothing.
TEST_F(RedisBackendTraceTest, OneSpanPerCallUnderTheDecision) {
  auto redis = testing::RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  RedisBackendOptions options;
  options.client.address = (*redis)->address();
  auto backend = Make(options);
  const std::vector<LimitCheck> checks = {
      {"{t}a", Params(Algorithm::kTokenBucket, 5), 1, 0},
      {"{t}b", Params(Algorithm::kTokenBucket, 5), 1, 1},
      {"{t}c", Params(Algorithm::kFixedWindow, 5), 1, 2},
  };
  TraceParent parent;
  ASSERT_TRUE(StartTraced(*backend, checks, &parent).get().ok());
  ASSERT_TRUE(sink_.WaitFor(2, absl::Seconds(5)));
  const std::vector<SpanData> calls = sink_.Named("redis");
  ASSERT_EQ(calls.size(), 1u);
  const SpanData& call = calls[0];
  EXPECT_EQ(call.trace_id, parent.trace_id);
  EXPECT_EQ(call.parent_span_id, parent.span_id);
  EXPECT_EQ(call.kind, SpanKind::kClient);
  EXPECT_EQ(StringAttribute(call, "server.address"), (*redis)->address());
  // The token buckets' batch script (two keys), the fixed window's INCRBY and PEXPIRE.
  EXPECT_EQ(IntAttribute(call, "db.operation.batch.size"), 3);
  EXPECT_EQ(IntAttribute(call, "sluice.redis.keys"), 4);
  EXPECT_EQ(call.status, SpanStatus::kUnset);
  EXPECT_LE(call.start_unix_nanos, call.end_unix_nanos);

  sink_.Clear();
  std::promise<absl::Status> untraced;
  backend->Evaluate(checks, [&](absl::Status s, absl::Span<const Decision>) {
    untraced.set_value(testing::UnsharedCopy(s));
  });
  ASSERT_TRUE(untraced.get_future().get().ok());
  EXPECT_TRUE(sink_.Spans().empty());
}

// Verifies that a lane call carrying the checks of several traced decisions gives each of them
// its own span of that call: twelve decisions on a paused Redis make three calls, and every
// decision has exactly one span, under its own decision span.
TEST_F(RedisBackendTraceTest, LaneCallIsTracedForEveryDecisionItCarries) {
  auto redis = testing::RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  RedisBackendOptions options;
  options.client.address = (*redis)->address();
  options.client.io_threads = 1;
  options.client.connections_per_thread = 1;
  options.timeout = absl::Seconds(10);
  auto backend = Make(options);
  (*redis)->Pause();
  std::vector<std::future<absl::Status>> outcomes;
  std::vector<TraceParent> parents(12);
  for (size_t i = 0; i < parents.size(); ++i) {
    outcomes.push_back(StartTraced(
        *backend, {LimitCheck{"{lane}hot", Params(Algorithm::kTokenBucket, 3), 1, 0}},
        &parents[i]));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  (*redis)->Resume();
  for (auto& outcome : outcomes) {
    ASSERT_TRUE(outcome.get().ok());
  }
  ASSERT_TRUE(sink_.WaitFor(24, absl::Seconds(5)));
  const std::vector<SpanData> calls = sink_.Named("redis");
  ASSERT_EQ(calls.size(), 12u);
  std::set<std::string> parents_seen;
  for (const SpanData& call : calls) {
    parents_seen.insert(ToHex(call.parent_span_id));
  }
  for (const TraceParent& parent : parents) {
    EXPECT_EQ(parents_seen.count(ToHex(parent.span_id)), 1u);
  }
}

// Verifies that on a Redis Cluster a decision whose keys live on three masters gets three
// spans, one per node call, each naming its master; and that a call that misses its budget
// ends its span in error with the failure's reason.
TEST_F(RedisBackendTraceTest, ClusterDecisionGetsASpanPerNode) {
  testing::RedisClusterOptions cluster_options;
  cluster_options.replicas_per_master = 0;
  auto cluster = testing::RedisCluster::Start(cluster_options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto masters = (*cluster)->Masters();
  ASSERT_TRUE(masters.ok()) << masters.status();
  ASSERT_EQ(masters->size(), 3u);
  // One key per master, found by asking the cluster where candidate keys live.
  std::vector<std::string> keys(3);
  for (int i = 0; std::count(keys.begin(), keys.end(), "") > 0 && i < 1000; ++i) {
    const std::string key = absl::StrCat("{k", i, "}");
    auto slot = (*cluster)->KeySlot(key);
    ASSERT_TRUE(slot.ok());
    auto owner = (*cluster)->MasterForSlot(*slot);
    ASSERT_TRUE(owner.ok());
    const size_t index = static_cast<size_t>(
        std::find(masters->begin(), masters->end(), *owner) - masters->begin());
    if (index < keys.size() && keys[index].empty()) {
      keys[index] = key;
    }
  }
  RedisBackendOptions options;
  options.cluster = true;
  options.cluster_seeds = (*cluster)->SeedAddresses();
  options.timeout = absl::Seconds(2);
  auto backend = Make(options);
  std::vector<LimitCheck> checks;
  for (size_t i = 0; i < keys.size(); ++i) {
    checks.push_back({keys[i], Params(Algorithm::kGcra, 5), 1, static_cast<uint32_t>(i)});
  }
  TraceParent parent;
  ASSERT_TRUE(StartTraced(*backend, checks, &parent).get().ok());
  ASSERT_TRUE(sink_.WaitFor(4, absl::Seconds(5)));
  std::set<std::string> nodes;
  for (const SpanData& call : sink_.Named("redis")) {
    EXPECT_EQ(call.parent_span_id, parent.span_id);
    EXPECT_EQ(IntAttribute(call, "sluice.redis.keys"), 1);
    nodes.insert(StringAttribute(call, "server.address"));
  }
  EXPECT_EQ(sink_.Named("redis").size(), 3u);
  EXPECT_EQ(nodes, std::set<std::string>(masters->begin(), masters->end()));

  // A hung master: its call ends in error at the budget, with the reason.
  sink_.Clear();
  testing::RedisServer* hung = (*cluster)->ServerAt((*masters)[0]);
  ASSERT_NE(hung, nullptr);
  options.timeout = absl::Milliseconds(50);
  auto fast = Make(options);
  hung->Pause();
  absl::Status status = StartTraced(*fast, {checks[0]}, &parent).get();
  hung->Resume();
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  ASSERT_TRUE(sink_.WaitFor(2, absl::Seconds(5)));
  const std::vector<SpanData> failed = sink_.Named("redis");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].status, SpanStatus::kError);
  EXPECT_EQ(StringAttribute(failed[0], "sluice.failure_reason"), "timeout_in_flight");
  EXPECT_EQ(StringAttribute(failed[0], "server.address"), (*masters)[0]);
}

}  // namespace
}  // namespace sluice
