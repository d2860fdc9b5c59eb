#include "server/service/rlqs_service.h"

#include <deque>
#include <memory>
#include <utility>

#include "server/common/clock.h"
#include "server/service/grpc_service.h"

namespace sluice {
namespace {

using quota::QuotaResponse;
using quota::QuotaServer;
using quota::Reports;

}  // namespace

// One stream. Its writes are queued here and sent one at a time (the callback API allows one
// outstanding write); the queue outlives the reactor for the QuotaServer's sink, which may still
// be called just after the stream is closed, and then drops what it gets.
class QuotaStream final : public grpc::ServerBidiReactor<Reports, QuotaResponse>,
                          public RlqsGrpcService::Stream {
 public:
  QuotaStream(RlqsGrpcService& service, QuotaServer& quota, Tracer* tracer)
      : service_(service), quota_(quota), tracer_(tracer), outbox_(std::make_shared<Outbox>()) {
    outbox_->stream = this;
    if (!service_.Register(this)) {
      registered_ = false;
      opened_ = false;
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "this server is shutting down"));
      return;
    }
    absl::StatusOr<QuotaServer::StreamId> id =
        quota_.Open([outbox = outbox_](QuotaResponse response) {
          outbox->Push(std::move(response));
        });
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
    Mutex mu;
    QuotaStream* stream ABSL_GUARDED_BY(mu) = nullptr;  // null once the stream is done
    std::deque<QuotaResponse> queue ABSL_GUARDED_BY(mu);
    bool writing ABSL_GUARDED_BY(mu) = false;
    bool finishing ABSL_GUARDED_BY(mu) = false;
    grpc::Status finish_status ABSL_GUARDED_BY(mu);

    void Push(QuotaResponse response) {
      MutexLock lock(mu);
      if (stream == nullptr || finishing) {
        return;
      }
      queue.push_back(std::move(response));
      if (!writing) {
        writing = true;
        stream->StartWrite(&queue.front());
      }
    }

    void WriteDone(bool ok) {
      MutexLock lock(mu);
      queue.pop_front();
      writing = false;
      if (!ok) {
        queue.clear();  // the call is broken: what is queued will not be read
      }
      if (!queue.empty()) {
        writing = true;
        stream->StartWrite(&queue.front());
      } else if (finishing && stream != nullptr) {
        stream->Finish(finish_status);
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
      queue.clear();
    }
  };

  RlqsGrpcService& service_;
  QuotaServer& quota_;
  Tracer* const tracer_;
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
    grpc::CallbackServerContext* /*context*/) {
  return new QuotaStream(*this, quota_, tracer_);
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
  quota_.ExpireAll();
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
