#include "server/service/rlqs_exchange.h"

#include <chrono>
#include <future>
#include <memory>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sluice {
namespace {

std::string RandomReplicaId() {
  std::random_device random;
  const uint64_t high = (static_cast<uint64_t>(random()) << 32) | random();
  const uint64_t low = (static_cast<uint64_t>(random()) << 32) | random();
  return absl::StrFormat("%016x%016x", high, low);
}

}  // namespace

RedisQuotaExchange::RedisQuotaExchange(RedisBackend& backend, std::string key_prefix,
                                       absl::Duration ttl, absl::Duration timeout)
    : backend_(backend),
      key_prefix_(std::move(key_prefix)),
      ttl_ms_(std::max<int64_t>(1, absl::ToInt64Milliseconds(ttl))),
      timeout_(timeout),
      replica_(RandomReplicaId()) {}

absl::StatusOr<std::vector<std::vector<double>>> RedisQuotaExchange::Exchange(
    const std::vector<Bucket>& buckets) {
  std::vector<std::string> keys;
  std::vector<std::vector<double>> demands;
  keys.reserve(buckets.size());
  demands.reserve(buckets.size());
  // In domain order, so that each domain's buckets (one slot) are consecutive.
  std::vector<size_t> order(buckets.size());
  for (size_t i = 0; i < order.size(); ++i) {
    order[i] = i;
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return buckets[a].domain < buckets[b].domain; });
  for (size_t i : order) {
    keys.push_back(absl::StrCat(key_prefix_, "{rlqs|", buckets[i].domain, "}", buckets[i].key));
    demands.push_back(buckets[i].local);
  }
  auto promise =
      std::make_shared<std::promise<absl::StatusOr<std::vector<std::vector<double>>>>>();
  std::future<absl::StatusOr<std::vector<std::vector<double>>>> future = promise->get_future();
  backend_.ExchangeQuotaDemand(
      replica_, std::move(keys), std::move(demands), ttl_ms_, timeout_,
      [promise](absl::StatusOr<std::vector<std::vector<double>>> result) {
        promise->set_value(std::move(result));
      });
  // The backend answers by its deadline; a little more for its thread to get there.
  if (future.wait_for(absl::ToChronoNanoseconds(timeout_) + std::chrono::milliseconds(100)) !=
      std::future_status::ready) {
    return absl::DeadlineExceededError("rlqs exchange: no answer from Redis in time");
  }
  absl::StatusOr<std::vector<std::vector<double>>> sorted = future.get();
  if (!sorted.ok()) {
    return sorted.status();
  }
  std::vector<std::vector<double>> others(buckets.size());
  for (size_t k = 0; k < order.size(); ++k) {
    others[order[k]] = std::move((*sorted)[k]);
  }
  return others;
}

}  // namespace sluice
