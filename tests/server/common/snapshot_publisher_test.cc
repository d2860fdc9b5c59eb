#include "server/common/snapshot_publisher.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace sluice {
namespace {

struct Value {
  explicit Value(int v) {
    for (int& e : data) {
      e = v;
    }
  }
  int data[16];
};

// Verifies loads see nothing before the first store, then always the latest store.
TEST(SnapshotPublisherTest, LoadSeesTheLatestStore) {
  SnapshotPublisher<Value> publisher;
  EXPECT_EQ(publisher.Load(), nullptr);
  publisher.Store(std::make_shared<const Value>(1));
  EXPECT_EQ(publisher.Load()->data[0], 1);
  EXPECT_EQ(publisher.Load()->data[0], 1);  // the cached path
  publisher.Store(std::make_shared<const Value>(2));
  EXPECT_EQ(publisher.Load()->data[0], 2);
}

// Verifies two publishers of the same type never mix up a thread's cached snapshot.
TEST(SnapshotPublisherTest, PublishersAreIndependent) {
  SnapshotPublisher<Value> a;
  SnapshotPublisher<Value> b;
  a.Store(std::make_shared<const Value>(1));
  b.Store(std::make_shared<const Value>(2));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(a.Load()->data[0], 1);
    EXPECT_EQ(b.Load()->data[0], 2);
  }
}

// Verifies CompareAndStore replaces only the expected snapshot.
TEST(SnapshotPublisherTest, CompareAndStoreReplacesOnlyTheExpected) {
  SnapshotPublisher<Value> publisher;
  publisher.Store(std::make_shared<const Value>(1));
  std::shared_ptr<const Value> first = publisher.Load();
  EXPECT_TRUE(publisher.CompareAndStore(first.get(), std::make_shared<const Value>(2)));
  EXPECT_FALSE(publisher.CompareAndStore(first.get(), std::make_shared<const Value>(3)));
  EXPECT_EQ(publisher.Load()->data[0], 2);
}

// Verifies a replaced snapshot is freed once no reader holds it any more, and readers that
// load again let go of theirs.
TEST(SnapshotPublisherTest, ReplacedSnapshotsAreFreed) {
  SnapshotPublisher<Value> publisher;
  auto first = std::make_shared<const Value>(1);
  std::weak_ptr<const Value> watch = first;
  publisher.Store(std::move(first));
  std::thread([&] { EXPECT_EQ(publisher.Load()->data[0], 1); }).join();  // cache dies with it
  EXPECT_NE(publisher.Load(), nullptr);  // this thread caches it now
  publisher.Store(std::make_shared<const Value>(2));
  EXPECT_FALSE(watch.expired());            // still cached by this thread
  EXPECT_EQ(publisher.Load()->data[0], 2);  // refreshes the cache, dropping the old one
  EXPECT_TRUE(watch.expired());
}

// Verifies concurrent readers never see a torn or older-than-seen snapshot while writers
// publish (run under ThreadSanitizer for the memory-model part).
TEST(SnapshotPublisherTest, ConcurrentReadersSeeWholeMonotonicSnapshots) {
  SnapshotPublisher<Value> publisher;
  publisher.Store(std::make_shared<const Value>(0));
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&] {
      int last = 0;
      while (!stop.load()) {
        std::shared_ptr<const Value> value = publisher.Load();
        int v = value->data[0];
        for (int e : value->data) {
          if (e != v) {
            bad.fetch_add(1);
          }
        }
        if (v < last) {
          bad.fetch_add(1);
        }
        last = v;
      }
    });
  }
  for (int i = 1; i <= 20000; ++i) {
    if (i % 2 == 0) {
      publisher.Store(std::make_shared<const Value>(i));
    } else {
      std::shared_ptr<const Value> current = publisher.Load();
      publisher.CompareAndStore(current.get(), std::make_shared<const Value>(i));
    }
  }
  stop.store(true);
  for (std::thread& reader : readers) {
    reader.join();
  }
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(publisher.Load()->data[0], 20000);
}

}  // namespace
}  // namespace sluice
