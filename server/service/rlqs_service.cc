#include "server/service/rlqs_service.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/common/clock.h"
#include "server/quota/response_queue.h"
#include "server/service/grpc_service.h"

namespace sluice {
namespace {

using quota::QuotaResponse;
using quota::QuotaServer;
using quota::Reports;

std::string PeerAddress(absl::string_view peer) {
  // "ipv4:10.0.0.7:51234", "ipv6:[::1]:51234": the address without the port; other forms
  // (unix sockets) as they are.
  if (absl::StartsWith(peer, "ipv4:") || absl::StartsWith(peer, "ipv6:")) {
    const size_t colon = peer.rfind(':');
    if (colon != absl::string_view::npos && colon > 5) {
      return std::string(peer.substr(0, colon));
    }
  }
  return std::string(peer);
}

}  // namespace

// One stream. Its responses wait in a queue (the newest action per bucket) and are written one
// message at a time (the callback API allows one outstanding write), all that waits in the next;
// the queue outlives the reactor for the QuotaServer's sink, which may still be called just after
// the stream is closed, and then drops what it gets. What waits, and the message in flight, are
// counted in the service's total; a peer that does not read has its call cancelled (see
// rlqs_service.h): what it was sent is lost to it anyway, and its state goes with the call.
class QuotaStream final : public grpc::ServerBidiReactor<Reports, QuotaResponse>,
                          public RlqsGrpcService::Stream {
 public:
  QuotaStream(RlqsGrpcService& service, QuotaServer& quota, Tracer* tracer,
              grpc::CallbackServerContext* context, const RlqsServiceOptions& options,
              std::atomic<int64_t>& pending_total)
      : service_(service),
        quota_(quota),
        tracer_(tracer),
        context_(context),
        outbox_(std::make_shared<Outbox>(options, pending_total)) {
    outbox_->stream = this;
    if (!service_.Register(this)) {
      registered_ = false;
      opened_ = false;
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "this server is shutting down"));
      return;
    }
    absl::StatusOr<QuotaServer::StreamId> id = quota_.Open(
        [outbox = outbox_](QuotaResponse response) { outbox->Push(std::move(response)); },
        PeerAddress(context->peer()));
    if (!id.ok()) {
      opened_ = false;
      Finish(ToGrpcStatus(id.status()));
      return;
    }
    id_ = *id;
    StartRead(&report_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      // The client closed its side (or the call broke): finish once the queue is written.
      outbox_->FinishWhenWritten(grpc::Status::OK);
      return;
    }
    Span span;
    if (tracer_ != nullptr) {
      span = tracer_->StartCall("rlqs.report", std::nullopt);
      span.Add("rpc.system", "grpc");
      span.Add("rpc.service", "envoy.service.rate_limit_quota.v3.RateLimitQuotaService");
      span.Add("ratelimit.domain", report_.domain());
      span.Add("rlqs.buckets", static_cast<int64_t>(report_.bucket_quota_usages_size()));
    }
    const absl::Status status = quota_.Report(id_, report_, RealClock::Get().MonotonicMicros());
    if (span.active()) {
      if (!status.ok()) {
        span.SetError(status.message());
      }
      span.End();
    }
    if (!status.ok()) {
      outbox_->FinishWhenWritten(ToGrpcStatus(status));
      return;
    }
    StartRead(&report_);
  }

  void OnWriteDone(bool ok) override { outbox_->WriteDone(ok); }

  void OnDone() override {
    if (registered_) {
      service_.Unregister(this);
    }
    outbox_->Detach();
    if (opened_) {
      quota_.Close(id_);
    }
    delete this;
  }

  void End() override { outbox_->FinishWhenWritten(grpc::Status::OK); }

  void CancelIfStuck(int64_t stuck_since_us) override { outbox_->CancelIfStuck(stuck_since_us); }

 private:
  struct Outbox {
    Outbox(const RlqsServiceOptions& options, std::atomic<int64_t>& total)
        : queue(options.max_pending_bytes),
          max_total(static_cast<int64_t>(options.max_pending_total_bytes)),
          pending_total(total) {}

    Mutex mu;
    QuotaStream* stream ABSL_GUARDED_BY(mu) = nullptr;  // null once the stream is done
    quota::ResponseQueue queue ABSL_GUARDED_BY(mu);
    QuotaResponse writing_message ABSL_GUARDED_BY(mu);  // what the write in flight sends
    int64_t writing_bytes ABSL_GUARDED_BY(mu) = 0;  // its share of the total
    int64_t writing_since_us ABSL_GUARDED_BY(mu) = 0;  // 0: no write in flight
    int64_t counted ABSL_GUARDED_BY(mu) = 0;  // what this stream adds to pending_total
    bool finishing ABSL_GUARDED_BY(mu) = false;
    grpc::Status finish_status ABSL_GUARDED_BY(mu);
    const int64_t max_total;
    std::atomic<int64_t>& pending_total;

    bool writing() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return writing_since_us != 0; }

    // Brings this stream's share of the total to what it holds now.
    void Recount() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      const int64_t now = static_cast<int64_t>(queue.bytes()) + writing_bytes;
      pending_total.fetch_add(now - counted, std::memory_order_relaxed);
      counted = now;
    }

    // Ends the stream because its peer does not read: RESOURCE_EXHAUSTED when nothing is in
    // flight (Finish goes out), else the call is cancelled (a Finish would wait behind the
    // write the peer does not read).
    void GiveUp(std::string why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      finishing = true;
      finish_status = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, std::move(why));
      (void)queue.Take();
      Recount();
      if (writing()) {
        stream->context_->TryCancel();
      } else {
        stream->Finish(finish_status);
      }
    }

    void Push(QuotaResponse response) {
      MutexLock lock(mu);
      if (stream == nullptr || finishing) {
        return;
      }
      if (!writing() && queue.empty()) {
        // Nothing ahead of it: it goes at once, whatever its size (a report of many new
        // buckets, a renewal of all of them), unless what all streams hold unread is at its
        // bound: non-reading clients hold it, and their writes' timeouts will free it.
        const auto bytes = static_cast<int64_t>(quota::ResponseQueue::MessageBytes(response));
        if (pending_total.load(std::memory_order_relaxed) + bytes > max_total) {
          GiveUp(absl::StrCat("RLQS responses waiting to be read in all streams are at their "
                              "bound (",
                              max_total >> 20, " MiB, --rlqs_max_pending_mib)"));
          return;
        }
        StartWrite(std::move(response), bytes);
        return;
      }
      size_t would_be = 0;
      if (!queue.Add(std::move(response), &would_be)) {
        GiveUp(absl::StrCat("RLQS responses waiting to be read would pass ", would_be >> 10,
                            " KiB (--rlqs_max_pending_kib): the stream does not read"));
        return;
      }
      Recount();
      const int64_t now_us = RealClock::Get().MonotonicMicros();
      if (pending_total.load(std::memory_order_relaxed) > max_total &&
          now_us - writing_since_us >= kStuckUs) {
        GiveUp(absl::StrCat("RLQS responses waiting to be read in all streams passed ",
                            max_total >> 20,
                            " MiB (--rlqs_max_pending_mib), and this stream's have waited a "
                            "second: it does not read"));
      }
    }

    void StartNextWrite() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      if (writing() || queue.empty()) {
        Recount();
        return;
      }
      const auto bytes = static_cast<int64_t>(queue.bytes());
      StartWrite(queue.Take(), bytes);
    }

    // Writes `message` (`bytes` as counted), which nothing is ahead of.
    void StartWrite(QuotaResponse message, int64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      writing_bytes = bytes;
      writing_message = std::move(message);
      writing_since_us = RealClock::Get().MonotonicMicros();
      Recount();
      stream->StartWrite(&writing_message);
    }

    void WriteDone(bool ok) {
      MutexLock lock(mu);
      writing_since_us = 0;
      writing_bytes = 0;
      writing_message.Clear();
      if (!ok) {
        (void)queue.Take();  // the call is broken: what waits will not be read
      }
      Recount();
      if (stream == nullptr) {
        return;
      }
      if (finishing && queue.empty()) {
        stream->Finish(finish_status);
      } else {
        StartNextWrite();
      }
    }

    void FinishWhenWritten(grpc::Status status) {
      MutexLock lock(mu);
      if (finishing || stream == nullptr) {
        return;
      }
      finishing = true;
      finish_status = std::move(status);
      if (!writing()) {
        stream->Finish(finish_status);
      }
    }

    void CancelIfStuck(int64_t stuck_since_us) {
      MutexLock lock(mu);
      if (stream != nullptr && !finishing && writing() && writing_since_us < stuck_since_us) {
        GiveUp("an RLQS response was not read for --rlqs_write_timeout: the stream does not read");
      }
    }

    void Detach() {
      MutexLock lock(mu);
      stream = nullptr;
      (void)queue.Take();
      writing_message.Clear();
      writing_bytes = 0;
      Recount();
    }
  };

  // A write in flight this long, when the total is past its bound, marks a peer that does not
  // read (a reading one takes milliseconds).
  static constexpr int64_t kStuckUs = 1'000'000;

  RlqsGrpcService& service_;
  QuotaServer& quota_;
  Tracer* const tracer_;
  grpc::CallbackServerContext* const context_;
  std::shared_ptr<Outbox> outbox_;
  QuotaServer::StreamId id_ = 0;
  bool registered_ = true;
  bool opened_ = true;
  Reports report_;
};

RlqsGrpcService::RlqsGrpcService(quota::QuotaServer& quota, RlqsServiceOptions options,
                                 Tracer* tracer)
    : quota_(quota),
      options_(options),
      tracer_(tracer),
      ticker_([this] { RunTicks(); }) {
  // A new bucket may be due an early exchange before the next rebalance: wake the ticker
  // (under its mutex, so that the wake cannot fall between its reading the due time and its
  // waiting).
  quota_.SetFreshBucketHook([this] {
    MutexLock lock(mu_);
    wake_.NotifyAll();
  });
}

RlqsGrpcService::~RlqsGrpcService() { StopTicks(); }

bool RlqsGrpcService::StopTicks() {
  {
    MutexLock lock(mu_);
    if (stopping_) {
      return false;
    }
    stopping_ = true;
  }
  quota_.SetFreshBucketHook(nullptr);
  wake_.NotifyAll();
  ticker_.join();
  return true;
}

grpc::ServerBidiReactor<Reports, QuotaResponse>* RlqsGrpcService::StreamRateLimitQuotas(
    grpc::CallbackServerContext* context) {
  return new QuotaStream(*this, quota_, tracer_, context, options_, pending_total_);
}

bool RlqsGrpcService::Register(Stream* stream) {
  MutexLock lock(streams_mu_);
  if (draining_) {
    return false;
  }
  streams_.insert(stream);
  return true;
}

void RlqsGrpcService::Unregister(Stream* stream) {
  MutexLock lock(streams_mu_);
  streams_.erase(stream);
}

void RlqsGrpcService::Drain() {
  if (!StopTicks()) {
    return;
  }
  // The streams end, the assignments stay: each Envoy keeps enforcing what it holds until it has
  // reconnected (at its next report, through the load balancer, to another replica) and been
  // answered there; expiring them would drop it to its no_assignment_behavior meanwhile. (Envoy's
  // onRemoteClose only drops its stream; each cached action lives until its own TTL timer,
  // startActionExpirationTimer: envoyproxy/envoy's rate_limit_quota/global_client_impl.cc.)
  MutexLock lock(streams_mu_);
  draining_ = true;
  for (Stream* stream : streams_) {
    stream->End();
  }
}

void RlqsGrpcService::RunTicks() {
  const int64_t interval_us = absl::ToInt64Microseconds(options_.rebalance_interval);
  const int64_t write_timeout_us = absl::ToInt64Microseconds(options_.write_timeout);
  int64_t next_tick_us = RealClock::Get().MonotonicMicros() + interval_us;
  while (true) {
    // The next rebalance, or a new bucket's early exchange (QuotaServer::ExchangeFresh) when
    // one is due before it.
    int64_t now_us = RealClock::Get().MonotonicMicros();
    {
      MutexLock lock(mu_);
      while (!stopping_) {
        const int64_t due_us = std::min(next_tick_us, quota_.FreshExchangeDueUs());
        if (due_us <= now_us) {
          break;
        }
        wake_.WaitFor(mu_, due_us - now_us);
        now_us = RealClock::Get().MonotonicMicros();
      }
      if (stopping_) {
        return;
      }
    }
    if (now_us < next_tick_us) {
      quota_.ExchangeFresh(now_us);
      continue;
    }
    next_tick_us = now_us + interval_us;
    quota_.Tick(now_us);
    MutexLock lock(streams_mu_);
    for (Stream* stream : streams_) {
      stream->CancelIfStuck(now_us - write_timeout_us);
    }
  }
}

}  // namespace sluice
