#include "server/redis/cluster/delay_queue.h"

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/common/clock.h"

namespace sluice {
namespace {

using ::testing::ElementsAre;

// Collects which tasks ran, in order, and whether cancelled; lets the test wait for a count.
class Recorder {
 public:
  DelayQueue::Task Task(int id) {
    return [this, id](bool cancelled) {
      std::lock_guard<std::mutex> lock(mu_);
      ran_.push_back(cancelled ? -id : id);
      threads_.push_back(std::this_thread::get_id());
      cv_.notify_all();
    };
  }
  bool WaitFor(size_t count) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return ran_.size() >= count; });
  }
  std::vector<int> ran() {
    std::lock_guard<std::mutex> lock(mu_);
    return ran_;
  }
  std::vector<std::thread::id> threads() {
    std::lock_guard<std::mutex> lock(mu_);
    return threads_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int> ran_;
  std::vector<std::thread::id> threads_;
};

// Verifies tasks run in due order (ties in schedule order), on the queue's thread, not early.
TEST(DelayQueueTest, RunsTasksInDueOrderWhenDue) {
  RealClock& clock = RealClock::Get();
  DelayQueue queue(clock, "test-delay");
  Recorder recorder;
  int64_t now = clock.MonotonicMicros();
  queue.Schedule(now + 30000, recorder.Task(3));
  queue.Schedule(now + 10000, recorder.Task(1));
  queue.Schedule(now + 10000, recorder.Task(2));
  queue.Schedule(now - 1000, recorder.Task(0));
  ASSERT_TRUE(recorder.WaitFor(4));
  EXPECT_GE(clock.MonotonicMicros(), now + 30000);
  EXPECT_THAT(recorder.ran(), ElementsAre(0, 1, 2, 3));
  for (std::thread::id id : recorder.threads()) {
    EXPECT_NE(id, std::this_thread::get_id());
  }
}

// Verifies Stop runs every pending task once, cancelled, and later tasks run inline cancelled.
TEST(DelayQueueTest, StopCancelsPendingTasksExactlyOnce) {
  RealClock& clock = RealClock::Get();
  DelayQueue queue(clock, "test-delay");
  Recorder recorder;
  int64_t far = clock.MonotonicMicros() + 3600LL * 1000000;
  queue.Schedule(far + 2, recorder.Task(2));
  queue.Schedule(far + 1, recorder.Task(1));
  EXPECT_EQ(queue.pending(), 2u);
  queue.Stop();
  EXPECT_THAT(recorder.ran(), ElementsAre(-1, -2));
  queue.Schedule(0, recorder.Task(3));
  EXPECT_THAT(recorder.ran(), ElementsAre(-1, -2, -3));
  EXPECT_EQ(recorder.threads().back(), std::this_thread::get_id());
  queue.Stop();  // idempotent
  EXPECT_EQ(recorder.ran().size(), 3u);
}

// Verifies tasks scheduled from many threads, and from tasks, all run once.
TEST(DelayQueueTest, AcceptsTasksFromManyThreadsAndFromTasks) {
  RealClock& clock = RealClock::Get();
  DelayQueue queue(clock, "test-delay");
  Recorder recorder;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        int id = t * 1000 + i + 1;
        queue.Schedule(clock.MonotonicMicros() + (i % 7) * 100,
                       [&, id](bool cancelled) { queue.Schedule(0, recorder.Task(id)); });
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  ASSERT_TRUE(recorder.WaitFor(400));
  std::vector<int> ran = recorder.ran();
  std::sort(ran.begin(), ran.end());
  EXPECT_EQ(std::unique(ran.begin(), ran.end()), ran.end());
  EXPECT_EQ(ran.size(), 400u);
  EXPECT_GT(ran.front(), 0);
}

}  // namespace
}  // namespace sluice
