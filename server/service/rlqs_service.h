// The Rate Limit Quota Service on the gRPC server (envoy.service.rate_limit_quota.v3): each
// StreamRateLimitQuotas call is one Envoy's stream, bridged to the replica's QuotaServer
// (server/quota/quota_server.h says what the protocol does). Reports are read one at a time; the
// server's responses wait per stream in a queue (server/quota/response_queue.h: the newest
// action per bucket) and are written one message at a time, everything waiting in the next; a
// report the server refuses ends the stream with its status once the queue is written. A stream
// is counted against its peer's address (the client's IP).
// What waits for a peer to read is bounded three ways (RlqsServiceOptions), so that a client that
// does not read costs a bounded time and memory, never the process: per stream (what waits
// behind a write in flight; a message that can go at once always goes), in all streams together
// (past it, a stream whose write has waited a second is cancelled when more is queued for it),
// and in time (a write in flight longer than write_timeout cancels its stream).
// A thread rebalances every bucket every `rebalance_interval` (QuotaServer::Tick) and looks for
// stuck writes.
// Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "envoy/service/rate_limit_quota/v3/rlqs.grpc.pb.h"
#include "server/common/mutex.h"
#include "server/quota/quota_server.h"
#include "server/trace/tracer.h"

namespace sluice {

struct RlqsServiceOptions {
  absl::Duration rebalance_interval = absl::Seconds(1);
  // Bytes of responses that may wait behind a stream's write in flight.
  size_t max_pending_bytes = size_t{16} << 20;
  // Bytes waiting (and in flight) in all streams together.
  size_t max_pending_total_bytes = size_t{64} << 20;
  // A write in flight this long: the peer does not read, and its stream is cancelled.
  absl::Duration write_timeout = absl::Seconds(10);
};

class RlqsGrpcService final
    : public envoy::service::rate_limit_quota::v3::RateLimitQuotaService::CallbackService {
 public:
  // `quota` must outlive the service and every stream (the gRPC server is shut down first).
  // `tracer`: with --tracing, a span per report message (rlqs.report: domain, buckets, the
  // status when refused); may be null.
  RlqsGrpcService(quota::QuotaServer& quota, RlqsServiceOptions options,
                  Tracer* tracer = nullptr);
  ~RlqsGrpcService() override;
  RlqsGrpcService(const RlqsGrpcService&) = delete;
  RlqsGrpcService& operator=(const RlqsGrpcService&) = delete;

  grpc::ServerBidiReactor<quota::Reports, quota::QuotaResponse>* StreamRateLimitQuotas(
      grpc::CallbackServerContext* context) override;

  // Stops the rebalancing and ends every stream (OK) once what waits is written, so that the
  // gRPC server's drain does not wait on them; streams opened later are refused (UNAVAILABLE).
  // The assignments are left in force: each Envoy keeps its own until it reconnects to another
  // replica at its next report. Idempotent.
  void Drain();

  // A stream's side of the service: each open stream is registered here until it is done.
  class Stream {
   public:
    virtual ~Stream() = default;
    // Ends the stream (OK) once what is queued is written.
    virtual void End() = 0;
    // Cancels the stream if a write has been in flight since before `stuck_since_us`
    // (monotonic): its peer does not read.
    virtual void CancelIfStuck(int64_t stuck_since_us) = 0;
  };

  // Bytes of responses waiting or in flight in all streams.
  int64_t pending_bytes() const { return pending_total_.load(std::memory_order_relaxed); }

 private:
  void RunTicks() ABSL_LOCKS_EXCLUDED(mu_);
  // Stops the rebalancing and joins its thread; false if it was stopped already.
  bool StopTicks() ABSL_LOCKS_EXCLUDED(mu_);
  friend class QuotaStream;
  // False once draining: the stream is refused.
  bool Register(Stream* stream) ABSL_LOCKS_EXCLUDED(streams_mu_);
  void Unregister(Stream* stream) ABSL_LOCKS_EXCLUDED(streams_mu_);

  quota::QuotaServer& quota_;
  const RlqsServiceOptions options_;
  Tracer* const tracer_;
  std::atomic<int64_t> pending_total_{0};
  Mutex mu_;
  CondVar wake_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread ticker_;
  Mutex streams_mu_;
  absl::flat_hash_set<Stream*> streams_ ABSL_GUARDED_BY(streams_mu_);
  bool draining_ ABSL_GUARDED_BY(streams_mu_) = false;
};

}  // namespace sluice
