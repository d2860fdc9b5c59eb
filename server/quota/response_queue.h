// The responses waiting to be written on one RLQS stream, bounded as Redis bounds a client's
// output buffer: only the newest action per bucket waits (a later one replaces an earlier one in
// place: Envoy acts on the last it gets, onQuotaResponseImpl replacing a bucket's cached action
// with each it reads, in order), and the bytes waiting have a cap past which the caller
// ends the stream. A peer that never reads so costs at most the cap, never the process.
// Not thread-safe: the stream's own lock guards it.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "envoy/service/rate_limit_quota/v3/rlqs.pb.h"

namespace sluice::quota {

using QuotaResponse = envoy::service::rate_limit_quota::v3::RateLimitQuotaResponse;

class ResponseQueue {
 public:
  explicit ResponseQueue(size_t max_bytes) : max_bytes_(max_bytes) {}

  // Queues the actions of `response`, each replacing one waiting for the same bucket. False,
  // and nothing queued, when the bytes waiting would pass the cap (`*would_be`, when given, is
  // then what they would have been).
  bool Add(QuotaResponse response, size_t* would_be = nullptr);
  // What `response` holds in memory, estimated as the queue counts a message it holds (without
  // the queue's index): for a message written at once, which waits for no one.
  static size_t MessageBytes(const QuotaResponse& response);
  bool empty() const { return waiting_.empty(); }
  // What the actions waiting hold in memory (an estimate from their encoded size).
  size_t bytes() const { return bytes_; }
  // Every action waiting, as one response, in the order their buckets were first queued.
  QuotaResponse Take();

 private:
  struct Waiting {
    QuotaResponse::BucketAction action;
    size_t bytes = 0;
  };

  const size_t max_bytes_;
  std::vector<Waiting> waiting_;
  absl::flat_hash_map<std::string, size_t> index_;  // bucket -> waiting_ index
  size_t bytes_ = 0;
};

}  // namespace sluice::quota
