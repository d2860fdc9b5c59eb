// The quota streams' exchange of demand between replicas through Redis (standalone, cluster,
// Sentinel, TLS: whatever the backend speaks): every rebalance writes this replica's Envoys'
// demands per bucket and reads the other replicas' (RedisBackend::ExchangeQuotaDemand, the
// rlqs_exchange script). A bucket's hash is "<key prefix>{rlqs|<domain>}<bucket key>": the
// buckets of one domain share a slot. An entry lives `ttl` (2.5 rebalance intervals), on Redis'
// clock: a replica that stops (or stops serving a bucket) leaves the others' shares within that.
//
// Domains are exchanged apart: each is a chain of calls of at most kQuotaExchangeBatch buckets,
// one call in flight per domain, all domains at once, each bucket's result its own. So a domain
// with many buckets, or whose calls fail, costs only its own buckets their exchange (the quota
// server answers those by their failure mode once stale), and a decision queued on the same
// Redis connection waits behind at most one small call per domain, never behind the whole
// exchange. Thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "server/backend/redis_backend.h"
#include "server/quota/quota_server.h"

namespace sluice {

class RedisQuotaExchange final : public quota::RemoteDemand {
 public:
  // `backend` must outlive the exchange. `timeout`: how long a rebalance waits for Redis, in
  // all.
  RedisQuotaExchange(RedisBackend& backend, std::string key_prefix, absl::Duration ttl,
                     absl::Duration timeout);

  std::vector<std::optional<std::vector<double>>> Exchange(
      const std::vector<Bucket>& buckets) override;

  const std::string& replica() const { return replica_; }

 private:
  RedisBackend& backend_;
  const std::string key_prefix_;
  const int64_t ttl_ms_;
  const absl::Duration timeout_;
  const std::string replica_;  // random, for this process's lifetime
};

}  // namespace sluice
