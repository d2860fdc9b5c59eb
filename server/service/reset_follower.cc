#include "server/service/reset_follower.h"

#include <chrono>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/log_text.h"
#include "server/common/logging.h"

namespace sluice {
namespace {

// One read's answer, handed from the store's thread to the reader.
struct PendingRead {
  Mutex mu;
  CondVar done_cv;
  bool done ABSL_GUARDED_BY(mu) = false;
  absl::Status status ABSL_GUARDED_BY(mu);
  ResetLogPage page ABSL_GUARDED_BY(mu);
};

}  // namespace

ResetFollower::ResetFollower(Backend& backend, OverLimitCache& cache,
                             ResetFollowerOptions options)
    : backend_(backend), cache_(cache), options_(options) {}

ResetFollower::~ResetFollower() { Stop(); }

void ResetFollower::Start() {
  thread_ = std::thread([this] { Run(); });
}

void ResetFollower::Stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  wake_.NotifyAll();
  if (thread_.joinable()) {
    thread_.join();
  }
}

void ResetFollower::Run() {
  while (true) {
    const absl::Status status = PollOnce();
    if (!status.ok()) {
      SLUICE_LOG_EVERY_SECONDS(WARNING, 60)
          << "reset log: cannot read it (resets made through other replicas reach this "
             "replica's over-limit cache once it can): "
          << LogStatus(status);
    }
    MutexLock lock(mu_);
    if (!stopping_) {
      wake_.WaitFor(mu_, absl::ToInt64Microseconds(options_.interval));
    }
    if (stopping_) {
      return;
    }
  }
}

absl::Status ResetFollower::PollOnce() {
  // The store answers on its own thread, which may outlive a wait that timed out.
  auto pending = std::make_shared<PendingRead>();
  backend_.ReadResets(cursor_, [pending](absl::Status status, ResetLogPage page) {
    MutexLock lock(pending->mu);
    pending->done = true;
    pending->status = std::move(status);
    pending->page = std::move(page);
    pending->done_cv.NotifyAll();
  });
  absl::Status status;
  ResetLogPage page;
  {
    MutexLock lock(pending->mu);
    const auto deadline =
        std::chrono::steady_clock::now() + absl::ToChronoMicroseconds(options_.read_timeout);
    while (!pending->done && std::chrono::steady_clock::now() < deadline) {
      pending->done_cv.WaitUntil(pending->mu, deadline);
    }
    if (!pending->done) {
      status = absl::DeadlineExceededError(absl::StrCat(
          "no answer within ", absl::FormatDuration(options_.read_timeout)));
    } else {
      status = pending->status;
      page = std::move(pending->page);
    }
  }
  if (!status.ok()) {
    reads_failed_.fetch_add(1, std::memory_order_relaxed);
    return status;
  }
  reads_ok_.fetch_add(1, std::memory_order_relaxed);
  const bool started = !cursor_.empty();
  cursor_ = std::move(page.cursor);
  if (!started) {
    // A place taken only after reads failed: resets logged meanwhile are behind it, and the
    // cache may have learned denials before them.
    if (reads_failed_.load(std::memory_order_relaxed) > 0) {
      cache_.Clear();
      clears_.fetch_add(1, std::memory_order_relaxed);
    }
    return absl::OkStatus();
  }
  if (page.lost) {
    cache_.Clear();
    clears_.fetch_add(1, std::memory_order_relaxed);
    SLUICE_LOG(INFO) << "reset log: some resets may be missing (the log moved on past this "
                        "replica's place, or was lost); forgot the whole over-limit cache";
    return absl::OkStatus();
  }
  for (const std::string& key : page.keys) {
    cache_.Forget(key);
  }
  forgotten_.fetch_add(page.keys.size(), std::memory_order_relaxed);
  return absl::OkStatus();
}

void ResetFollower::AppendMetrics(std::string* out) const {
  absl::StrAppend(
      out,
      "# HELP sluice_reset_log_reads_total Reads of the reset log, through which resets made "
      "through other replicas reach this replica's over-limit cache\n"
      "# TYPE sluice_reset_log_reads_total counter\n"
      "sluice_reset_log_reads_total{result=\"ok\"} ",
      reads_ok_.load(std::memory_order_relaxed),
      "\nsluice_reset_log_reads_total{result=\"failed\"} ",
      reads_failed_.load(std::memory_order_relaxed),
      "\n# HELP sluice_reset_log_keys_forgotten_total Storage keys the reset log named, whose "
      "over-limit cache entries were forgotten\n"
      "# TYPE sluice_reset_log_keys_forgotten_total counter\n"
      "sluice_reset_log_keys_forgotten_total ",
      forgotten_.load(std::memory_order_relaxed),
      "\n# HELP sluice_reset_log_cache_clears_total Times the whole over-limit cache was "
      "forgotten because some resets may have been missed\n"
      "# TYPE sluice_reset_log_cache_clears_total counter\n"
      "sluice_reset_log_cache_clears_total ",
      clears_.load(std::memory_order_relaxed), "\n");
}

}  // namespace sluice
