// Shared by the cluster client tests: running batches and waiting for them, a closed-loop
// traffic generator that records every outcome, and key pickers for a live cluster.
// Test-only; see each class for its thread-safety.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "server/common/clock.h"
#include "server/common/failure_reason.h"
#include "server/redis/command_batch.h"
#include "server/redis/cluster/hash_slot.h"
#include "server/redis/redis_executor.h"
#include "tests/support/redis_cluster.h"

namespace sluice::cluster_test {

// What a batch callback saw. The status is kept as code and message, not as an absl::Status:
// Debian's abseil is not TSan-instrumented, so a Status rep shared by two threads (callback and
// test) reads as a race when one of them frees it.
struct BatchResult {
  absl::StatusCode code = absl::StatusCode::kUnknown;
  std::string message = "callback never ran";
  // The reason attached to a failure (FailureReasonOf), kept apart from the status text.
  FailureReason reason = FailureReason::kOther;
  absl::Status status() const { return absl::Status(code, message); }
  std::vector<RedisReply> replies;
  int64_t started_us = 0;
  int64_t completed_us = 0;  // RealClock monotonic
  int calls = 0;             // how often the callback ran
  std::thread::id thread;
};

// A batch in flight, shared with its callback so that a test that gives up waiting stays safe.
// Thread-safe.
class PendingBatch {
 public:
  BatchCallback Callback() {
    return [self = shared(), this](absl::Status status, absl::Span<RedisReply> replies) {
      std::lock_guard<std::mutex> lock(mu_);
      result_.code = status.code();
      result_.message = std::string(status.message());
      result_.reason = FailureReasonOf(status);
      result_.replies.assign(std::make_move_iterator(replies.begin()),
                             std::make_move_iterator(replies.end()));
      result_.completed_us = RealClock::Get().MonotonicMicros();
      result_.thread = std::this_thread::get_id();
      ++result_.calls;
      done_.notify_all();
    };
  }
  // Waits for the callback; false on timeout.
  bool Wait(absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return done_.wait_for(lock, absl::ToChronoMicroseconds(timeout),
                          [&] { return result_.calls > 0; });
  }
  BatchResult result() {
    std::lock_guard<std::mutex> lock(mu_);
    return result_;
  }
  static std::shared_ptr<PendingBatch> Make() {
    auto pending = std::shared_ptr<PendingBatch>(new PendingBatch);
    pending->self_ = pending;
    return pending;
  }

 private:
  PendingBatch() = default;
  std::shared_ptr<PendingBatch> shared() { return self_.lock(); }
  std::weak_ptr<PendingBatch> self_;
  std::mutex mu_;
  std::condition_variable done_;
  BatchResult result_;
};

inline int64_t NowUs() { return RealClock::Get().MonotonicMicros(); }

// Runs `batch` with `budget` and waits for it (up to budget + 30 s).
inline BatchResult RunBatch(RedisExecutor& client, CommandBatch batch,
                            absl::Duration budget = absl::Seconds(5)) {
  auto pending = PendingBatch::Make();
  int64_t start = NowUs();
  client.Execute(std::move(batch), start + absl::ToInt64Microseconds(budget), pending->Callback());
  EXPECT_TRUE(pending->Wait(budget + absl::Seconds(30))) << "batch callback never ran";
  BatchResult result = pending->result();
  result.started_us = start;
  return result;
}

inline BatchResult RunOne(RedisExecutor& client, const std::vector<std::string>& args,
                          absl::Duration budget = absl::Seconds(5)) {
  std::vector<std::string_view> views(args.begin(), args.end());
  CommandBatch batch;
  batch.Add(views);
  return RunBatch(client, std::move(batch), budget);
}

// Closed-loop load: `threads` threads each run one batch at a time, back to back, until Stop,
// and record every outcome. Thread-safe.
class Traffic {
 public:
  using MakeBatch = std::function<CommandBatch(int thread, int64_t seq)>;

  struct Outcome {
    int thread = 0;
    int64_t seq = 0;
    BatchResult result;
  };

  Traffic(RedisExecutor& client, int threads, absl::Duration budget, MakeBatch make)
      : client_(client), budget_(budget), make_(std::move(make)) {
    for (int t = 0; t < threads; ++t) {
      threads_.emplace_back([this, t] { Loop(t); });
    }
  }
  ~Traffic() { Stop(); }

  // Waits until `count` batches that started after this call have completed (`successes_only`:
  // completed with OK). False on timeout.
  bool WaitForMore(int64_t count, absl::Duration timeout, bool successes_only = false) {
    std::unique_lock<std::mutex> lock(mu_);
    int64_t since = NowUs();
    return changed_.wait_for(lock, absl::ToChronoMicroseconds(timeout), [&] {
      int64_t n = 0;
      for (const Outcome& outcome : outcomes_) {
        if (outcome.result.started_us >= since &&
            (!successes_only || outcome.result.code == absl::StatusCode::kOk)) {
          ++n;
        }
      }
      return n >= count;
    });
  }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    for (std::thread& thread : threads_) {
      if (thread.joinable()) {
        thread.join();
      }
    }
  }

  std::vector<Outcome> outcomes() {
    std::lock_guard<std::mutex> lock(mu_);
    return outcomes_;
  }
  // Batches whose callback did not come within budget + 30 s (a hang).
  int hung() {
    std::lock_guard<std::mutex> lock(mu_);
    return hung_;
  }

 private:
  void Loop(int thread) {
    for (int64_t seq = 0;; ++seq) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) {
          return;
        }
      }
      auto pending = PendingBatch::Make();
      int64_t start = NowUs();
      client_.Execute(make_(thread, seq), start + absl::ToInt64Microseconds(budget_),
                      pending->Callback());
      if (!pending->Wait(budget_ + absl::Seconds(30))) {
        std::lock_guard<std::mutex> lock(mu_);
        ++hung_;
        return;
      }
      Outcome outcome{thread, seq, pending->result()};
      outcome.result.started_us = start;
      std::lock_guard<std::mutex> lock(mu_);
      outcomes_.push_back(std::move(outcome));
      changed_.notify_all();
    }
  }

  RedisExecutor& client_;
  const absl::Duration budget_;
  const MakeBatch make_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::vector<Outcome> outcomes_;
  bool stopping_ = false;
  int hung_ = 0;
  std::vector<std::thread> threads_;
};

// slot -> master address as the cluster sees it now.
inline std::vector<std::string> SlotOwners(testing::RedisCluster& cluster) {
  std::vector<std::string> owners(kClusterSlots);
  absl::StatusOr<std::vector<testing::ClusterNodeInfo>> nodes = cluster.Nodes();
  EXPECT_TRUE(nodes.ok()) << nodes.status();
  if (nodes.ok()) {
    for (const testing::ClusterNodeInfo& node : *nodes) {
      for (auto [first, last] : node.slots) {
        for (int slot = first; slot <= last; ++slot) {
          owners[static_cast<size_t>(slot)] = node.address;
        }
      }
    }
  }
  return owners;
}

// `count` hash tags "<prefix>-<n>" whose slots the master at `master` serves, each in a
// different slot.
inline std::vector<std::string> TagsOn(const std::vector<std::string>& owners,
                                       const std::string& master, const std::string& prefix,
                                       int count) {
  std::vector<std::string> tags;
  std::vector<bool> used(kClusterSlots);
  for (int n = 0; static_cast<int>(tags.size()) < count && n < 1000000; ++n) {
    std::string tag = absl::StrCat(prefix, "-", n);
    int slot = HashSlot(tag);
    if (owners[static_cast<size_t>(slot)] == master && !used[static_cast<size_t>(slot)]) {
      used[static_cast<size_t>(slot)] = true;
      tags.push_back(tag);
    }
  }
  return tags;
}

}  // namespace sluice::cluster_test
