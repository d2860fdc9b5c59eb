#include "server/config/config_reloader.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/common/mutex.h"
#include "tests/support/notification.h"

namespace sluice {
namespace {

using testing::Notification;

// A load the test controls: each call records its `force`, tells the test it started, and waits
// for the test to release it; its Apply records that it ran.
class ScriptedLoad {
 public:
  ConfigReloader::Load AsLoad() {
    return [this](bool force) -> ConfigReloader::Apply {
      const int now = concurrent_.fetch_add(1) + 1;
      int seen = max_concurrent_.load();
      while (now > seen && !max_concurrent_.compare_exchange_weak(seen, now)) {
      }
      const int call = Started(force);
      release_[call].WaitForNotification();
      concurrent_.fetch_sub(1);
      return [this, call, token = std::make_shared<DropWitness>(&dropped_[call])] {
        MutexLock lock(mu_);
        applied_.push_back(call);
      };
    };
  }

  // Waits until load number `call` (0-based) has started.
  bool WaitStarted(int call) {
    return started_[call].WaitForNotificationWithTimeout(absl::Seconds(10));
  }
  void Release(int call) { release_[call].Notify(); }
  // Waits until the Apply of `call` has been destroyed, run or not.
  bool WaitDropped(int call) {
    return dropped_[call].WaitForNotificationWithTimeout(absl::Seconds(10));
  }

  std::vector<bool> forces() {
    MutexLock lock(mu_);
    return forces_;
  }
  std::vector<int> applied() {
    MutexLock lock(mu_);
    return applied_;
  }
  int max_concurrent() const { return max_concurrent_.load(); }

 private:
  static constexpr int kCalls = 4;

  // Notifies when the Apply that holds it is destroyed.
  struct DropWitness {
    explicit DropWitness(Notification* n) : notification(n) {}
    ~DropWitness() { notification->Notify(); }
    Notification* notification;
  };

  int Started(bool force) {
    int call = 0;
    {
      MutexLock lock(mu_);
      call = static_cast<int>(forces_.size());
      forces_.push_back(force);
    }
    started_[call].Notify();
    return call;
  }

  Mutex mu_;
  std::vector<bool> forces_ ABSL_GUARDED_BY(mu_);
  std::vector<int> applied_ ABSL_GUARDED_BY(mu_);
  std::atomic<int> concurrent_{0};  // loads between their start and their release
  std::atomic<int> max_concurrent_{0};
  Notification started_[kCalls];
  Notification release_[kCalls];
  Notification dropped_[kCalls];
};

class ConfigReloaderTest : public ::testing::Test {
 protected:
  // Declared first: outlives a reloader thread left to finish a load.
  ScriptedLoad load_;
};

// Verifies a request runs a load on the reloader's thread and applies its result there.
TEST_F(ConfigReloaderTest, RunsLoadAndAppliesResult) {
  ConfigReloader reloader(load_.AsLoad());
  reloader.Request(/*force=*/true);
  ASSERT_TRUE(load_.WaitStarted(0));
  load_.Release(0);
  ASSERT_TRUE(load_.WaitDropped(0));
  EXPECT_THAT(load_.forces(), ::testing::ElementsAre(true));
  EXPECT_THAT(load_.applied(), ::testing::ElementsAre(0));
  EXPECT_TRUE(reloader.Stop());
}

// Verifies requests made while a load runs are coalesced into one more load after it, forced
// if any of them was, and that loads never overlap.
TEST_F(ConfigReloaderTest, CoalescesRequestsWhileLoading) {
  ConfigReloader reloader(load_.AsLoad());
  reloader.Request(/*force=*/false);
  ASSERT_TRUE(load_.WaitStarted(0));
  reloader.Request(/*force=*/false);
  reloader.Request(/*force=*/true);
  reloader.Request(/*force=*/false);
  load_.Release(0);
  ASSERT_TRUE(load_.WaitStarted(1));
  load_.Release(1);
  ASSERT_TRUE(load_.WaitDropped(1));
  EXPECT_TRUE(reloader.Stop());  // joined: nothing else was pending
  EXPECT_THAT(load_.forces(), ::testing::ElementsAre(false, true));
  EXPECT_THAT(load_.applied(), ::testing::ElementsAre(0, 1));
  EXPECT_EQ(load_.max_concurrent(), 1);
}

// Verifies Stop returns while a load is still running, without waiting for it, and that the
// load's result is dropped, never applied, when it finishes.
TEST_F(ConfigReloaderTest, StopDoesNotWaitForLoadAndDropsItsResult) {
  auto reloader = std::make_unique<ConfigReloader>(load_.AsLoad());
  reloader->Request(/*force=*/false);
  ASSERT_TRUE(load_.WaitStarted(0));
  Notification stopped;
  bool joined = true;
  std::thread stopper([&] {
    joined = reloader->Stop();
    reloader.reset();  // the reloader may go too: the thread keeps what it needs
    stopped.Notify();
  });
  const bool returned = stopped.WaitForNotificationWithTimeout(absl::Seconds(10));
  load_.Release(0);  // lets the load end, whether Stop waited for it or not
  stopper.join();
  ASSERT_TRUE(returned) << "Stop waited for the load";
  EXPECT_FALSE(joined);
  ASSERT_TRUE(load_.WaitDropped(0));
  EXPECT_THAT(load_.applied(), ::testing::IsEmpty());
}

// Verifies requests after Stop start nothing.
TEST_F(ConfigReloaderTest, IgnoresRequestsAfterStop) {
  ConfigReloader reloader(load_.AsLoad());
  EXPECT_TRUE(reloader.Stop());
  reloader.Request(/*force=*/true);
  EXPECT_TRUE(reloader.Stop());
  EXPECT_THAT(load_.forces(), ::testing::IsEmpty());
}

}  // namespace
}  // namespace sluice
