#include "server/service/rlqs_exchange.h"

#include <chrono>
#include <memory>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/common/mutex.h"

namespace sluice {
namespace {

std::string RandomReplicaId() {
  std::random_device random;
  const uint64_t high = (static_cast<uint64_t>(random()) << 32) | random();
  const uint64_t low = (static_cast<uint64_t>(random()) << 32) | random();
  return absl::StrFormat("%016x%016x", high, low);
}

using Results = std::vector<std::optional<std::vector<double>>>;

// One rebalance's exchange: the calls of every domain, and what came back. Shared with the
// Redis callbacks, which may outlive Exchange's wait.
struct Round {
  struct Call {
    size_t first;  // index of its first bucket
    size_t count;
  };
  struct Chain {
    std::vector<Call> calls;
    size_t next = 0;
  };

  RedisBackend& backend;
  const std::string replica;
  const int64_t ttl_ms;
  const std::chrono::steady_clock::time_point deadline;
  std::vector<std::string> keys;
  std::vector<std::vector<double>> demands;
  std::vector<Chain> chains;

  Mutex mu;
  CondVar done;
  Results results ABSL_GUARDED_BY(mu);
  size_t running ABSL_GUARDED_BY(mu) = 0;
  bool closed ABSL_GUARDED_BY(mu) = false;  // Exchange has returned: later results are dropped

  Round(RedisBackend& b, std::string r, int64_t ttl, std::chrono::steady_clock::time_point d)
      : backend(b), replica(std::move(r)), ttl_ms(ttl), deadline(d) {}

  // Sends chain `c`'s next call, or ends the chain (no call left, or no time left).
  static void Next(const std::shared_ptr<Round>& round, size_t c) {
    Chain& chain = round->chains[c];
    const auto left = round->deadline - std::chrono::steady_clock::now();
    if (chain.next == chain.calls.size() || left <= std::chrono::steady_clock::duration::zero()) {
      MutexLock lock(round->mu);
      if (--round->running == 0) {
        round->done.NotifyAll();
      }
      return;
    }
    const Call call = chain.calls[chain.next++];
    round->backend.ExchangeQuotaDemand(
        round->replica, absl::MakeConstSpan(round->keys).subspan(call.first, call.count),
        absl::MakeConstSpan(round->demands).subspan(call.first, call.count), round->ttl_ms,
        absl::FromChrono(left),
        [round, c, call](absl::StatusOr<std::vector<std::vector<double>>> others) {
          if (!others.ok()) {
            // This domain's other calls would meet the same trouble: its chain ends here, and
            // its buckets not yet exchanged stay without a result.
            round->chains[c].next = round->chains[c].calls.size();
          } else {
            MutexLock lock(round->mu);
            for (size_t i = 0; i < call.count && !round->closed; ++i) {
              round->results[call.first + i] = std::move((*others)[i]);
            }
          }
          Next(round, c);
        });
  }
};

}  // namespace

RedisQuotaExchange::RedisQuotaExchange(RedisBackend& backend, std::string key_prefix,
                                       absl::Duration ttl, absl::Duration timeout)
    : backend_(backend),
      key_prefix_(std::move(key_prefix)),
      ttl_ms_(std::max<int64_t>(1, absl::ToInt64Milliseconds(ttl))),
      timeout_(timeout),
      replica_(RandomReplicaId()) {}

Results RedisQuotaExchange::Exchange(const std::vector<Bucket>& buckets) {
  auto round = std::make_shared<Round>(
      backend_, replica_, ttl_ms_,
      std::chrono::steady_clock::now() +
          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
              absl::ToChronoNanoseconds(timeout_)));
  round->keys.reserve(buckets.size());
  round->demands.reserve(buckets.size());
  // Buckets come grouped by domain; a domain's buckets share a hash tag, so each run of one
  // domain is one chain of calls.
  for (size_t i = 0; i < buckets.size();) {
    size_t end = i + 1;
    while (end < buckets.size() && buckets[end].domain == buckets[i].domain) {
      ++end;
    }
    Round::Chain& chain = round->chains.emplace_back();
    for (size_t first = i; first < end; first += RedisBackend::kQuotaExchangeBatch) {
      chain.calls.push_back({first, std::min(RedisBackend::kQuotaExchangeBatch, end - first)});
    }
    i = end;
  }
  for (const Bucket& bucket : buckets) {
    round->keys.push_back(absl::StrCat(key_prefix_, "{rlqs|", bucket.domain, "}", bucket.key));
    round->demands.push_back(bucket.local);
  }
  {
    MutexLock lock(round->mu);
    round->results.resize(buckets.size());
    round->running = round->chains.size();
  }
  for (size_t c = 0; c < round->chains.size(); ++c) {
    Round::Next(round, c);
  }
  MutexLock lock(round->mu);
  // The backend answers each call by the deadline; a little more for its thread to get here.
  const auto give_up = round->deadline + std::chrono::milliseconds(100);
  while (round->running > 0 && std::chrono::steady_clock::now() < give_up) {
    round->done.WaitUntil(round->mu, give_up);
  }
  round->closed = true;
  return std::move(round->results);
}

}  // namespace sluice
