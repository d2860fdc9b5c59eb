#include "server/quota/response_queue.h"

#include <string>

#include "gtest/gtest.h"

namespace sluice::quota {
namespace {

QuotaResponse Action(const std::string& value, int64_t ttl_s, size_t pad = 0) {
  QuotaResponse response;
  auto* action = response.add_bucket_action();
  (*action->mutable_bucket_id()->mutable_bucket())["k"] = value + std::string(pad, 'x');
  action->mutable_quota_assignment_action()->mutable_assignment_time_to_live()->set_seconds(ttl_s);
  return response;
}

// Verifies that only the newest action per bucket waits, in the place its bucket first took,
// and that taking empties the queue.
TEST(ResponseQueueTest, ANewerActionReplacesTheOneWaiting) {
  ResponseQueue queue(1 << 20);
  ASSERT_TRUE(queue.Add(Action("a", 1)));
  ASSERT_TRUE(queue.Add(Action("b", 1)));
  const size_t two = queue.bytes();
  for (int64_t ttl = 2; ttl < 1000; ++ttl) {
    ASSERT_TRUE(queue.Add(Action("a", ttl)));
  }
  EXPECT_LE(queue.bytes(), two + 4);  // a longer TTL encodes in one byte more
  const QuotaResponse taken = queue.Take();
  ASSERT_EQ(taken.bucket_action_size(), 2);
  EXPECT_EQ(taken.bucket_action(0).bucket_id().bucket().at("k"), "a");
  EXPECT_EQ(taken.bucket_action(0).quota_assignment_action().assignment_time_to_live().seconds(),
            999);
  EXPECT_EQ(taken.bucket_action(1).bucket_id().bucket().at("k"), "b");
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(queue.bytes(), 0u);
}

// Verifies the cap: an add that would pass it is refused whole, and what waits is unchanged.
TEST(ResponseQueueTest, AddsPastTheCapAreRefused) {
  ResponseQueue queue(64 << 10);
  size_t added = 0;
  while (queue.Add(Action("v" + std::to_string(added), 1, 1000))) {
    ++added;
  }
  EXPECT_GT(added, 3u);
  EXPECT_LE(queue.bytes(), size_t{64} << 10);
  const size_t before = queue.bytes();
  EXPECT_FALSE(queue.Add(Action("another", 1, 1000)));
  EXPECT_EQ(queue.bytes(), before);
  size_t would_be = 0;
  EXPECT_FALSE(queue.Add(Action("more", 1, 1000), &would_be));
  EXPECT_GT(would_be, size_t{64} << 10);
  EXPECT_EQ(queue.Take().bucket_action_size(), static_cast<int>(added));
  // A message written at once is not queued (RlqsGrpcService writes it whatever its size,
  // rlqs_e2e_test): MessageBytes counts it as the queue would have.
  const QuotaResponse huge = Action("huge", 1, 100000);
  EXPECT_GT(ResponseQueue::MessageBytes(huge), size_t{64} << 10);
  EXPECT_FALSE(queue.Add(huge));
}

}  // namespace
}  // namespace sluice::quota
