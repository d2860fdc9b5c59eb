#include "server/memcached/memcached_connection.h"

#include <event2/event.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/failure_reason.h"
#include "server/common/log_text.h"
#include "server/common/logging.h"

namespace sluice {
namespace {

constexpr size_t kReadChunk = 16 * 1024;
constexpr size_t kCompactAfter = 64 * 1024;

}  // namespace

MemcachedConnection::MemcachedConnection(EventLoop& loop, MemcachedConnectionOptions options,
                                         const Clock& clock, RandomFn random,
                                         CircuitBreaker* breaker, MetricHistogram* call_latency,
                                         absl::AnyInvocable<void(bool ready)> on_ready_change)
    : loop_(loop),
      options_(std::move(options)),
      clock_(clock),
      breaker_(breaker),
      call_latency_(call_latency),
      on_ready_change_(std::move(on_ready_change)),
      address_(options_.endpoint.ToString()),
      backoff_(options_.backoff_min_us, options_.backoff_max_us, std::move(random)),
      connect_timer_(loop, [this] { Drop("connect timed out", /*tls=*/false); }),
      reconnect_timer_(loop, [this] { StartConnect(); }),
      deadline_timer_(loop, [this] { OnDeadline(); }),
      stall_timer_(loop, [this] { OnStallCheck(); }) {}

MemcachedConnection::~MemcachedConnection() { Close(); }

void MemcachedConnection::Start() { StartConnect(); }

MemcachedConnectionStats MemcachedConnection::stats() const {
  MemcachedConnectionStats stats;
  stats.connects = connects_.load(std::memory_order_relaxed);
  stats.timeouts = timeouts_.load(std::memory_order_relaxed);
  return stats;
}

void MemcachedConnection::StartConnect() {
  if (state_ == State::kClosed) {
    return;
  }
  SslPtr ssl;
  if (options_.tls != nullptr) {
    absl::StatusOr<SslPtr> session = options_.tls->NewSession(options_.endpoint.host);
    if (!session.ok()) {
      state_ = State::kConnecting;
      Drop(std::string(session.status().message()), /*tls=*/true);
      return;
    }
    ssl = std::move(*session);
  }
  absl::StatusOr<int> fd = StartSocketConnect(options_.endpoint);
  if (!fd.ok()) {
    state_ = State::kConnecting;
    Drop(std::string(fd.status().message()), /*tls=*/false);
    return;
  }
  fd_ = *fd;
  stream_ = std::make_unique<Stream>(fd_, std::move(ssl));
  reader_ = MetaReplyReader();
  state_ = State::kConnecting;
  read_event_ = event_new(loop_.base(), fd_, EV_READ | EV_PERSIST,
                          &MemcachedConnection::OnReadable, this);
  write_event_ = event_new(loop_.base(), fd_, EV_WRITE, &MemcachedConnection::OnWritable, this);
  event_add(read_event_, nullptr);
  write_watched_ = false;
  SetWriteWatched(true);  // writable: the connect is done
  connect_timer_.Arm(options_.connect_timeout_us);
}

void MemcachedConnection::OnReadable(int /*fd*/, short /*events*/, void* arg) {
  static_cast<MemcachedConnection*>(arg)->HandleRead();
}

void MemcachedConnection::OnWritable(int /*fd*/, short /*events*/, void* arg) {
  auto* connection = static_cast<MemcachedConnection*>(arg);
  connection->write_watched_ = false;
  connection->HandleWrite();
}

void MemcachedConnection::SetWriteWatched(bool watched) {
  if (watched == write_watched_ || write_event_ == nullptr) {
    return;
  }
  write_watched_ = watched;
  if (watched) {
    event_add(write_event_, nullptr);
  } else {
    event_del(write_event_);
  }
}

void MemcachedConnection::ContinueConnect() {
  if (state_ == State::kConnecting) {
    if (absl::Status connected = SocketConnectResult(fd_); !connected.ok()) {
      Drop(std::string(connected.message()), /*tls=*/false);
      return;
    }
    if (!stream_->tls()) {
      BecomeReady();
      return;
    }
    state_ = State::kHandshaking;
  }
  StreamIo io = stream_->Handshake();
  switch (io.kind) {
    case StreamIo::kDone:
      BecomeReady();
      return;
    case StreamIo::kWantRead:
      SetWriteWatched(false);
      return;
    case StreamIo::kWantWrite:
      SetWriteWatched(true);
      return;
    case StreamIo::kClosed:
    case StreamIo::kFailed:
      Drop(io.error.empty() ? "TLS handshake failed" : io.error, /*tls=*/true);
      return;
  }
}

void MemcachedConnection::BecomeReady() {
  connect_timer_.Cancel();
  state_ = State::kReady;
  backoff_.Reset();
  last_failure_tls_ = false;
  Bump(connects_);
  SetWriteWatched(false);
  SLUICE_LOG(INFO) << "memcached " << address_ << ": connected"
                   << (stream_->tls() ? " (TLS)" : "");
  SetReady(true);
}

void MemcachedConnection::SetReady(bool ready) {
  if (ready_.exchange(ready, std::memory_order_acq_rel) == ready) {
    return;
  }
  if (on_ready_change_) {
    on_ready_change_(ready);
  }
}

void MemcachedConnection::Dispatch(MemcachedBatchPtr batch) {
  const int64_t now = clock_.MonotonicMicros();
  if (state_ != State::kReady) {
    InFlight refused;
    refused.batch = std::move(batch);
    Complete(refused, LostStatus());
    return;
  }
  // Time spent waiting for this thread is this process's, not the server's: up to the grace.
  const int64_t waited = std::max<int64_t>(0, now - batch->submitted_us);
  batch->deadline_us += std::min(waited, options_.queue_grace_us);
  InFlight entry;
  entry.batch = std::move(batch);
  if (now >= entry.batch->deadline_us) {
    Complete(entry, WithFailureReason(
                        absl::DeadlineExceededError(absl::StrCat(
                            "memcached ", address_, ": the budget ran out before the call was "
                            "written")),
                        FailureReason::kTimeoutBeforeSend));
    return;
  }
  if (outstanding_ + entry.batch->count > options_.max_pending_commands) {
    Complete(entry, WithFailureReason(
                        absl::UnavailableError(absl::StrCat(
                            "memcached ", address_, ": too many commands waiting for replies (",
                            outstanding_, " out, ", entry.batch->count, " more; at most ",
                            options_.max_pending_commands, ")")),
                        FailureReason::kOther));
    return;
  }
  entry.remaining = entry.batch->count;
  entry.replies.reserve(entry.batch->count);
  entry.replies_seen_at_send = replies_seen_;
  out_.append(entry.batch->commands);
  outstanding_ += entry.batch->count;
  const int64_t deadline = entry.batch->deadline_us;
  in_flight_.push_back(std::move(entry));
  ArmDeadline(deadline);
  if (options_.stall_timeout_us > 0 && !stall_timer_.armed()) {
    replies_at_stall_check_ = replies_seen_;
    stall_timer_.Arm(options_.stall_timeout_us);
  }
  if (!write_waits_for_read_) {
    Flush();
  }
}

bool MemcachedConnection::Flush() {
  write_waits_for_read_ = false;
  while (out_sent_ < out_.size()) {
    StreamIo io = stream_->Write(absl::string_view(out_).substr(out_sent_));
    if (io.kind == StreamIo::kDone) {
      out_sent_ += io.bytes;
      continue;
    }
    if (io.kind == StreamIo::kFailed) {
      Drop(io.error, io.tls_error);
      return false;
    }
    write_waits_for_read_ = io.kind == StreamIo::kWantRead;
    // A TLS write waiting for a read is retried by HandleRead, not by a writable socket; a read
    // waiting for a write still needs the writable event.
    SetWriteWatched(!write_waits_for_read_ || read_waits_for_write_);
    if (out_sent_ >= kCompactAfter) {
      out_.erase(0, out_sent_);
      out_sent_ = 0;
    }
    return true;
  }
  out_.clear();
  out_sent_ = 0;
  SetWriteWatched(read_waits_for_write_);
  return true;
}

void MemcachedConnection::HandleWrite() {
  if (state_ == State::kConnecting || state_ == State::kHandshaking) {
    ContinueConnect();
    return;
  }
  if (state_ != State::kReady) {
    return;
  }
  if (read_waits_for_write_) {
    read_waits_for_write_ = false;
    HandleRead();
    if (state_ != State::kReady) {
      return;
    }
  }
  Flush();
}

void MemcachedConnection::HandleRead() {
  if (state_ == State::kConnecting || state_ == State::kHandshaking) {
    ContinueConnect();
    return;
  }
  if (state_ != State::kReady) {
    return;
  }
  char buf[kReadChunk];
  std::string failure;
  bool failure_tls = false;
  do {
    StreamIo io = stream_->Read(buf, sizeof(buf));
    if (io.kind == StreamIo::kDone) {
      reader_.Feed(buf, io.bytes);
      continue;
    }
    if (io.kind == StreamIo::kWantWrite) {
      read_waits_for_write_ = true;
      SetWriteWatched(true);
    } else if (io.kind == StreamIo::kClosed) {
      failure = "the server closed the connection";
    } else if (io.kind == StreamIo::kFailed) {
      failure = io.error;
      failure_tls = io.tls_error;
    }
    break;
  } while (stream_->pending());
  // What was read before an error still answers its batches.
  MetaReply reply;
  while (true) {
    const MetaReplyReader::Result result = reader_.Next(&reply);
    if (result == MetaReplyReader::Result::kNone) {
      break;
    }
    if (result == MetaReplyReader::Result::kError) {
      Drop(absl::StrCat("protocol error: ", reader_.error()), /*tls=*/false);
      return;
    }
    ++replies_seen_;
    if (in_flight_.empty()) {
      Drop("a reply to no command (the connection is out of step)", /*tls=*/false);
      return;
    }
    InFlight& front = in_flight_.front();
    --outstanding_;
    --front.remaining;
    if (!front.completed) {
      front.replies.push_back(std::move(reply));
    }
    if (front.remaining > 0) {
      continue;
    }
    if (front.completed) {
      in_flight_.pop_front();
      continue;
    }
    InFlight done = std::move(front);
    in_flight_.pop_front();
    Complete(done, absl::OkStatus());
    if (state_ != State::kReady) {
      return;  // a callback closed the connection
    }
  }
  if (!failure.empty()) {
    Drop(failure, failure_tls);
    return;
  }
  if (write_waits_for_read_) {
    Flush();
  }
}

void MemcachedConnection::Complete(InFlight& entry, absl::Status status) {
  if (entry.completed) {
    return;
  }
  entry.completed = true;
  if (breaker_ != nullptr) {
    breaker_->Record(status);
  }
  if (call_latency_ != nullptr &&
      (status.ok() || status.code() == absl::StatusCode::kDeadlineExceeded)) {
    call_latency_->Record(clock_.MonotonicMicros() - entry.batch->submitted_us);
  }
  MemcachedBatch::Done done = std::move(entry.batch->done);
  std::vector<MetaReply> replies = std::move(entry.replies);
  entry.replies.clear();
  if (!status.ok()) {
    replies.clear();
  }
  std::move(done)(std::move(status), std::move(replies));
}

void MemcachedConnection::ArmDeadline(int64_t deadline_us) {
  if (deadline_timer_at_ != 0 && deadline_timer_at_ <= deadline_us) {
    return;
  }
  deadline_timer_at_ = deadline_us;
  deadline_timer_.Arm(deadline_us - clock_.MonotonicMicros());
}

void MemcachedConnection::OnDeadline() {
  deadline_timer_at_ = 0;
  const int64_t now = clock_.MonotonicMicros();
  int64_t next = 0;
  for (InFlight& entry : in_flight_) {
    if (entry.completed) {
      continue;
    }
    if (entry.batch->deadline_us <= now) {
      Bump(timeouts_);
      const bool silent = replies_seen_ == entry.replies_seen_at_send;
      Complete(entry, WithFailureReason(
                          absl::DeadlineExceededError(absl::StrCat(
                              "memcached ", address_, silent
                                                          ? ": no reply within the budget"
                                                          : ": too slow for the budget")),
                          silent ? FailureReason::kTimeoutInFlight
                                 : FailureReason::kTimeoutSlow));
      if (state_ == State::kClosed) {
        return;
      }
      continue;
    }
    if (next == 0 || entry.batch->deadline_us < next) {
      next = entry.batch->deadline_us;
    }
  }
  if (next != 0) {
    ArmDeadline(next);
  }
}

void MemcachedConnection::OnStallCheck() {
  if (state_ != State::kReady || outstanding_ == 0) {
    return;
  }
  if (replies_seen_ == replies_at_stall_check_) {
    Drop("no reply for the stall timeout (server hung or network lost)", /*tls=*/false);
    return;
  }
  replies_at_stall_check_ = replies_seen_;
  stall_timer_.Arm(options_.stall_timeout_us);
}

absl::Status MemcachedConnection::LostStatus() const {
  if (state_ == State::kClosed) {
    return WithFailureReason(
        absl::UnavailableError(absl::StrCat("memcached ", address_, ": client stopped")),
        FailureReason::kConnection);
  }
  return WithFailureReason(
      absl::UnavailableError(absl::StrCat("memcached ", address_, ": not connected",
                                          last_error_.empty() ? "" : " (",
                                          LogText(last_error_), last_error_.empty() ? "" : ")")),
      last_failure_tls_ ? FailureReason::kTls : FailureReason::kConnection);
}

void MemcachedConnection::ReleaseSocket() {
  if (read_event_ != nullptr) {
    event_free(read_event_);
    read_event_ = nullptr;
  }
  if (write_event_ != nullptr) {
    event_free(write_event_);
    write_event_ = nullptr;
  }
  write_watched_ = false;
  stream_.reset();
  if (fd_ >= 0) {
    close(fd_);
    fd_ = -1;
  }
  out_.clear();
  out_sent_ = 0;
  outstanding_ = 0;
  write_waits_for_read_ = false;
  read_waits_for_write_ = false;
  connect_timer_.Cancel();
  stall_timer_.Cancel();
  deadline_timer_.Cancel();
  deadline_timer_at_ = 0;
}

void MemcachedConnection::Drop(const std::string& reason, bool tls) {
  if (state_ == State::kClosed || state_ == State::kDown || state_ == State::kIdle) {
    return;
  }
  const bool was_ready = state_ == State::kReady;
  last_error_ = reason;
  last_failure_tls_ = tls;
  if (was_ready) {
    SLUICE_LOG_EVERY_SECONDS(WARNING, 10)
        << "memcached " << address_ << ": connection lost: " << LogText(reason);
  } else {
    SLUICE_LOG_EVERY_SECONDS(WARNING, 10)
        << "memcached " << address_ << ": cannot connect: " << LogText(reason);
  }
  ReleaseSocket();
  state_ = State::kDown;
  SetReady(false);
  std::deque<InFlight> failing = std::move(in_flight_);
  in_flight_.clear();
  const absl::Status lost = WithFailureReason(
      absl::UnavailableError(absl::StrCat("memcached ", address_, ": ", LogText(reason))),
      tls ? FailureReason::kTls : FailureReason::kConnection);
  for (InFlight& entry : failing) {
    Complete(entry, lost);
  }
  if (state_ != State::kClosed) {
    reconnect_timer_.Arm(backoff_.NextDelayMicros());
  }
}

void MemcachedConnection::Close() {
  if (state_ == State::kClosed) {
    return;
  }
  ReleaseSocket();
  reconnect_timer_.Cancel();
  state_ = State::kClosed;
  ready_.store(false, std::memory_order_release);
  std::deque<InFlight> failing = std::move(in_flight_);
  in_flight_.clear();
  for (InFlight& entry : failing) {
    Complete(entry, LostStatus());
  }
}

}  // namespace sluice
