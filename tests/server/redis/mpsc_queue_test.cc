#include "server/redis/mpsc_queue.h"

#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

struct Node {
  int producer = 0;
  int sequence = 0;
  Node* next = nullptr;
};
using Queue = MpscQueue<Node, &Node::next>;

// Verifies the consumer gets nodes oldest first and only the first push reports an empty queue.
TEST(MpscQueueTest, TakesInPushOrder) {
  Queue queue;
  Node a{0, 1}, b{0, 2}, c{0, 3};
  EXPECT_EQ(queue.Push(&a), Queue::PushResult::kWasEmpty);
  EXPECT_EQ(queue.Push(&b), Queue::PushResult::kQueued);
  EXPECT_EQ(queue.Push(&c), Queue::PushResult::kQueued);
  Node* list = queue.TakeAll();
  ASSERT_EQ(list, &a);
  ASSERT_EQ(list->next, &b);
  ASSERT_EQ(list->next->next, &c);
  EXPECT_EQ(c.next, nullptr);
  EXPECT_EQ(queue.TakeAll(), nullptr);
  EXPECT_EQ(queue.Push(&a), Queue::PushResult::kWasEmpty);
}

// Verifies Close hands back what was queued and refuses later pushes.
TEST(MpscQueueTest, CloseRefusesLaterPushes) {
  Queue queue;
  Node a, b;
  queue.Push(&a);
  EXPECT_EQ(queue.Close(), &a);
  EXPECT_TRUE(queue.closed());
  EXPECT_EQ(queue.Push(&b), Queue::PushResult::kClosed);
  EXPECT_EQ(queue.TakeAll(), nullptr);
  EXPECT_EQ(queue.Close(), nullptr);
}

// Verifies that with concurrent producers nothing is lost or duplicated and each producer's
// nodes come out in its own order.
TEST(MpscQueueTest, ConcurrentProducersKeepTheirOrder) {
  constexpr int kProducers = 4;
  constexpr int kPerProducer = 20000;
  Queue queue;
  std::vector<std::vector<Node>> nodes(kProducers, std::vector<Node>(kPerProducer));
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (int i = 0; i < kPerProducer; ++i) {
        nodes[p][i].producer = p;
        nodes[p][i].sequence = i;
        queue.Push(&nodes[p][i]);
      }
    });
  }
  std::vector<int> next_expected(kProducers, 0);
  int taken = 0;
  while (taken < kProducers * kPerProducer) {
    for (Node* node = queue.TakeAll(); node != nullptr; node = node->next) {
      ASSERT_EQ(node->sequence, next_expected[node->producer]);
      ++next_expected[node->producer];
      ++taken;
    }
  }
  for (std::thread& producer : producers) {
    producer.join();
  }
  EXPECT_EQ(queue.TakeAll(), nullptr);
}

}  // namespace
}  // namespace sluice
