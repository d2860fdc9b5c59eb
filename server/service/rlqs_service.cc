#include "server/service/rlqs_service.h"

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

// One stream. Its responses wait in a bounded queue (the newest action per bucket, at most
// --rlqs_max_pending_kib) and are written one at a time (the callback API allows one
// outstanding write), all that waits in one message; the queue outlives the reactor for the
// QuotaServer's sink, which may still be called just after the stream is closed, and then drops
// what it gets. A peer that does not read past the bound has its call cancelled: what it was
// sent is lost to it anyway, and its state goes with the call.
class QuotaStream final : public grpc::ServerBidiReactor<Reports, QuotaResponse>,
                          public RlqsGrpcService::Stream {
 public:
  QuotaStream(RlqsGrpcService& service, QuotaServer& quota, Tracer* tracer,
              grpc::CallbackServerContext* context)
      : service_(service),
        quota_(quota),
        tracer_(tracer),
        context_(context),
        outbox_(std::make_shared<Outbox>(quota.options().max_pending_bytes)) {
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

 private:
  struct Outbox {
    explicit Outbox(size_t max_bytes) : queue(max_bytes) {}

    Mutex mu;
    QuotaStream* stream ABSL_GUARDED_BY(mu) = nullptr;  // null once the stream is done
    quota::ResponseQueue queue ABSL_GUARDED_BY(mu);
    QuotaResponse writing_message ABSL_GUARDED_BY(mu);  // what the write in flight sends
    bool writing ABSL_GUARDED_BY(mu) = false;
    bool finishing ABSL_GUARDED_BY(mu) = false;
    grpc::Status finish_status ABSL_GUARDED_BY(mu);

    void Push(QuotaResponse response) {
      MutexLock lock(mu);
      if (stream == nullptr || finishing) {
        return;
      }
      if (!queue.Add(std::move(response))) {
        // The peer is not reading: waiting any longer only grows what is held for it.
        finishing = true;
        finish_status = grpc::Status(
            grpc::StatusCode::RESOURCE_EXHAUSTED,
            absl::StrCat("RLQS responses waiting to be read passed ", queue.bytes() >> 10,
                         " KiB (--rlqs_max_pending_kib): the stream does not read"));
        (void)queue.Take();
        if (writing) {
          stream->context_->TryCancel();
        } else {
          stream->Finish(finish_status);
        }
        return;
      }
      StartNextWrite();
    }

    void StartNextWrite() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      if (writing || queue.empty()) {
        return;
      }
      writing = true;
      writing_message = queue.Take();
      stream->StartWrite(&writing_message);
    }

    void WriteDone(bool ok) {
      MutexLock lock(mu);
      writing = false;
      writing_message.Clear();
      if (!ok) {
        (void)queue.Take();  // the call is broken: what waits will not be read
      }
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
      if (!writing) {
        stream->Finish(finish_status);
      }
    }

    void Detach() {
      MutexLock lock(mu);
      stream = nullptr;
      (void)queue.Take();
    }
  };

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

RlqsGrpcService::RlqsGrpcService(quota::QuotaServer& quota, absl::Duration rebalance_interval,
                                 Tracer* tracer)
    : quota_(quota),
      interval_(rebalance_interval),
      tracer_(tracer),
      ticker_([this] { RunTicks(); }) {}

RlqsGrpcService::~RlqsGrpcService() { StopTicks(); }

bool RlqsGrpcService::StopTicks() {
  {
    MutexLock lock(mu_);
    if (stopping_) {
      return false;
    }
    stopping_ = true;
  }
  wake_.NotifyAll();
  ticker_.join();
  return true;
}

grpc::ServerBidiReactor<Reports, QuotaResponse>* RlqsGrpcService::StreamRateLimitQuotas(
    grpc::CallbackServerContext* context) {
  return new QuotaStream(*this, quota_, tracer_, context);
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
  // answered there; expiring them would drop it to its no_assignment_behavior meanwhile.
  MutexLock lock(streams_mu_);
  draining_ = true;
  for (Stream* stream : streams_) {
    stream->End();
  }
}

void RlqsGrpcService::RunTicks() {
  const int64_t interval_us = absl::ToInt64Microseconds(interval_);
  while (true) {
    {
      MutexLock lock(mu_);
      if (!stopping_) {
        wake_.WaitFor(mu_, interval_us);
      }
      if (stopping_) {
        return;
      }
    }
    quota_.Tick(RealClock::Get().MonotonicMicros());
  }
}

}  // namespace sluice
