#include "server/redis/connection.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/failure_reason.h"
#include "server/common/log_text.h"
#include "server/common/logging.h"
#include "server/redis/command.h"

namespace sluice {
namespace {

// An EVALSHA that keeps meeting NOSCRIPT although its script was loaded right before it is
// failed after this many resends rather than retried forever.
constexpr int kMaxNoScriptRetries = 3;

// Handshake replies carry one of these addresses as privdata, to say which step they answer.
char kAuthTag;
char kSelectTag;
char kRoleTag;
char kPingTag;

bool IsNoScript(const RedisReply& reply) { return reply.ErrorCode() == "NOSCRIPT"; }

std::string AddressOf(const RedisEndpoint& endpoint) {
  return endpoint.host.empty() && endpoint.unix_path.empty() ? "(master not known yet)"
                                                             : endpoint.ToString();
}

}  // namespace

// Per (connection, script): when the script was last loaded on this connection and how that
// went. The wire holds a pointer to it as the privdata of SCRIPT LOAD.
struct RedisConnection::ScriptState {
  RedisConnection* owner = nullptr;
  const RedisScript* script = nullptr;
  // sent_seq_ of the latest SCRIPT LOAD written; 0 if none yet.
  uint64_t last_load_seq = 0;
  // The error of the latest failed SCRIPT LOAD, empty after a success.
  std::string last_error;
};

RedisConnection::RedisConnection(EventLoop& loop, RedisConnectionOptions options,
                                 const Clock& clock, std::shared_ptr<const ScriptCache> scripts,
                                 RandomFn random,
                                 absl::AnyInvocable<void(bool ready)> on_ready_change,
                                 CircuitBreaker* breaker, MetricHistogram* call_latency)
    : loop_(loop),
      options_(std::move(options)),
      clock_(clock),
      scripts_(std::move(scripts)),
      on_ready_change_(std::move(on_ready_change)),
      breaker_(breaker),
      call_latency_(call_latency),
      backoff_(options_.backoff_min_us, options_.backoff_max_us, std::move(random)),
      connect_timer_(loop,
                     [this] {
                       MutexLock lock(mu_);
                       if (state_ == State::kConnecting) {
                         Drop(absl::StrCat("no connection and handshake within ",
                                           options_.connect_timeout_us / 1000, " ms"));
                       }
                       FinishLoopWork();
                     }),
      reconnect_timer_(loop,
                       [this] {
                         MutexLock lock(mu_);
                         StartConnect();
                         FinishLoopWork();
                       }),
      stall_timer_(loop,
                   [this] {
                     MutexLock lock(mu_);
                     OnStallCheck();
                     FinishLoopWork();
                   }),
      deadline_timer_(loop,
                      [this] {
                        MutexLock lock(mu_);
                        ExpireDeadlines();
                        FinishLoopWork();
                      }),
      horizon_(loop, clock, options_.caller_write_horizon_us, [this] {
        MutexLock lock(mu_);
        OnWatchdog();
      }) {
  MutexLock lock(mu_);
  endpoint_ = RedisEndpoint{options_.host, options_.port, options_.unix_path};
  address_ = AddressOf(endpoint_);
}

RedisConnection::~RedisConnection() { Close(); }


void RedisConnection::Retarget(const RedisEndpoint& endpoint) {
  MutexLock lock(mu_);
  if (state_ == State::kClosed) {
    return;
  }
  const bool same = endpoint == endpoint_;
  if (same && state_ != State::kDown) {
    FinishLoopWork();
    return;
  }
  if (!same) {
    SLUICE_LOG(INFO) << "redis " << address_ << ": now " << AddressOf(endpoint);
  }
  endpoint_ = endpoint;
  address_ = AddressOf(endpoint_);
  Drop(absl::StrCat("the master is now ", address_));
  // Whatever the backoff had reached, the new server is tried at once.
  ConnectNow();
}

void RedisConnection::ReconnectIfDown() {
  MutexLock lock(mu_);
  if (state_ == State::kDown) {
    ConnectNow();
  }
}

void RedisConnection::ConnectNow() {
  reconnect_timer_.Cancel();
  backoff_.Reset();
  StartConnect();
  FinishLoopWork();
}

void RedisConnection::Start() {
  MutexLock lock(mu_);
  if (state_ == State::kIdle) {
    StartConnect();
  }
}

RedisConnectionStats RedisConnection::stats() const {
  RedisConnectionStats stats;
  stats.connects = connects_.load(std::memory_order_relaxed);
  stats.disconnects = disconnects_.load(std::memory_order_relaxed);
  stats.script_loads = script_loads_.load(std::memory_order_relaxed);
  stats.noscript_retries = noscript_retries_.load(std::memory_order_relaxed);
  stats.deadline_exceeded = deadline_exceeded_.load(std::memory_order_relaxed);
  stats.late_replies = late_replies_.load(std::memory_order_relaxed);
  stats.caller_writes = caller_writes_.load(std::memory_order_relaxed);
  stats.tls_failures = tls_failures_.load(std::memory_order_relaxed);
  return stats;
}

// ---------------------------------------------------------------------------------------------
// Connecting and reconnecting.

void RedisConnection::StartConnect() {
  if (state_ == State::kClosed) {
    return;
  }
  if (endpoint_.host.empty() && endpoint_.unix_path.empty()) {
    // Nowhere to connect yet: Retarget starts the connect.
    state_ = State::kDown;
    last_error_ = "the master is not known yet (asking the sentinels)";
    return;
  }
  state_ = State::kConnecting;
  std::string error;
  RedisWire* wire = RedisWire::Connect(loop_, endpoint_, options_.tls.get(), *this, &error);
  if (wire == nullptr) {
    last_error_ = std::move(error);
    last_error_tls_ = false;
    SLUICE_LOG_EVERY_SECONDS(WARNING, 10)
        << "redis " << address_ << ": connect failed: " << last_error_;
    ScheduleReconnect();
    return;
  }
  wire_ = wire;

  // The handshake is pipelined behind the connect: the wire writes it once the socket is up.
  // PING goes last, so its reply means every step before it is done.
  bool queued = true;
  if (!options_.password.empty()) {
    if (options_.username.empty()) {
      queued = queued && SendHandshakeCommand({"AUTH", options_.password}, &kAuthTag);
    } else {
      queued =
          queued && SendHandshakeCommand({"AUTH", options_.username, options_.password}, &kAuthTag);
    }
  }
  if (options_.db != 0) {
    std::string db = absl::StrCat(options_.db);
    queued = queued && SendHandshakeCommand({"SELECT", db}, &kSelectTag);
  }
  // Loading every known script up front spares the first batches a NOSCRIPT round trip.
  for (const RedisScript* script : scripts_->All()) {
    queued = queued && SendScriptLoad(StateFor(*script));
  }
  if (options_.require_master) {
    queued = queued && SendHandshakeCommand({"ROLE"}, &kRoleTag);
  }
  queued = queued && SendHandshakeCommand({"PING"}, &kPingTag);
  if (!queued) {
    Drop("cannot queue the handshake");
    return;
  }
  connect_timer_.Arm(options_.connect_timeout_us);
}

bool RedisConnection::SendHandshakeCommand(std::initializer_list<std::string_view> args,
                                           void* tag) {
  std::string resp;
  AppendRespCommand(args, &resp);
  if (!wire_->Command(&RedisConnection::OnHandshakeReply, tag, resp)) {
    return false;
  }
  NoteCommandSent();
  return true;
}

// ---------------------------------------------------------------------------------------------
// The wire's events and reports.

void RedisConnection::OnSocketReadable(RedisWire* wire) {
  {
    MutexLock lock(mu_);
    wire->HandleRead();
    FinishLoopWork();
    answering_.swap(answered_);
  }
  RunAnswered(answering_);
}

void RedisConnection::RunAnswered(std::vector<PendingBatch*>& answered) {
  for (PendingBatch* batch : answered) {
    // Completed, every reply in, adopted (FinishLoopWork ran before mu_ was released), its
    // deadline timer released: only this list refers to it.
    BatchCallback done = std::move(batch->done);
    std::move(done)(absl::OkStatus(), absl::MakeSpan(batch->replies));
    delete batch;
  }
  answered.clear();
}

void RedisConnection::OnSocketWritable(RedisWire* wire) {
  {
    MutexLock lock(mu_);
    wire->HandleWrite();  // may read too: a TLS session whose read waited for the socket
    FinishLoopWork();
    answering_.swap(answered_);
  }
  RunAnswered(answering_);
}

// When a caller is queueing commands, it writes the socket itself and the read event is armed
// already (from the first read on, it always is), so the loop's event_base is left alone.
bool RedisConnection::SocketWatchPaused() const {
  mu_.AssertHeld();  // the wire asks from inside a call made under mu_
  return writing_from_caller_ || writing_from_loop_;
}

// The wire reports from inside the calls this class makes on it, all under mu_.

void RedisConnection::OnConnectFailed(RedisWire* wire) {
  mu_.AssertHeld();
  if (wire != wire_) {
    return;
  }
  // The wire frees itself right after this returns (failing the queued handshake), so forget it
  // without freeing it.
  NoteWireFailure(*wire);
  ForgetContext();
  ScheduleReconnect();
}

void RedisConnection::OnDisconnected(RedisWire* wire) {
  mu_.AssertHeld();
  if (wire != wire_) {
    return;  // a wire this connection dropped itself
  }
  // The wire has already failed the pending commands and frees itself after this returns.
  NoteWireFailure(*wire);
  ForgetContext();
  ScheduleReconnect();
}

void RedisConnection::NoteWireFailure(const RedisWire& wire) {
  last_error_ = wire.error();
  // Refused by TLS before the connection was ready: a certificate or TLS setup to fix, not
  // weather, so counted and logged as such (each new cause at once).
  last_error_tls_ = wire.tls_failed() && state_ != State::kReady;
  if (last_error_tls_) {
    Bump(tls_failures_);
    if (last_error_ != tls_error_logged_) {
      tls_error_logged_ = last_error_;
      SLUICE_LOG(ERROR) << "redis " << address_ << ": " << last_error_;
    } else {
      SLUICE_LOG_EVERY_SECONDS(ERROR, 60) << "redis " << address_ << ": " << last_error_;
    }
    return;
  }
  if (state_ == State::kReady) {
    SLUICE_LOG_EVERY_SECONDS(WARNING, 5)
        << "redis " << address_ << ": connection lost: " << last_error_;
  } else {
    SLUICE_LOG_EVERY_SECONDS(WARNING, 10)
        << "redis " << address_ << ": connect failed: " << last_error_;
  }
}

void RedisConnection::OnHandshakeReply(RedisWire* wire, RedisReply* r, void* privdata) {
  auto* self = static_cast<RedisConnection*>(&wire->owner());
  self->mu_.AssertHeld();
  --self->outstanding_;
  if (r == nullptr || wire != self->wire_) {
    return;  // the wire is going away; whoever drops it handles the state
  }
  ++self->replies_seen_;
  if (r->is_error()) {
    const char* step = privdata == &kAuthTag     ? "AUTH"
                       : privdata == &kSelectTag ? "SELECT"
                       : privdata == &kRoleTag   ? "ROLE"
                                                 : "PING";
    std::string error = absl::StrCat(step, " failed: ", LogText(r->str()));
    SLUICE_LOG_EVERY_SECONDS(ERROR, 10) << "redis " << self->address_ << ": " << error;
    self->last_error_ = error;
    self->Drop(std::move(error));
    return;
  }
  if (privdata == &kRoleTag) {
    // ROLE: ["master", offset, replicas] on a master; "slave" or "sentinel" first otherwise.
    const std::string none;
    const std::string& role =
        r->is_array() && !r->elements().empty() ? r->elements()[0].str() : none;
    if (role != "master") {
      std::string error = absl::StrCat("not a master (ROLE says '", LogText(role),
                                       "'): waiting for the sentinels to name the new one");
      SLUICE_LOG_EVERY_SECONDS(WARNING, 10) << "redis " << self->address_ << ": " << error;
      self->last_error_ = error;
      self->Drop(std::move(error));
    }
    return;
  }
  if (privdata == &kPingTag) {
    self->BecomeReady();
  }
}

void RedisConnection::BecomeReady() {
  last_error_tls_ = false;
  connect_timer_.Cancel();
  backoff_.Reset();
  state_ = State::kReady;
  Bump(connects_);
  SLUICE_LOG_EVERY_SECONDS(INFO, 5) << "redis " << address_ << ": connected";
  SetReady(true);
}

void RedisConnection::Drop(std::string reason) {
  if (wire_ == nullptr) {
    return;
  }
  RedisWire* wire = wire_;
  drop_reason_ = std::move(reason);
  if (state_ == State::kReady) {
    SLUICE_LOG_EVERY_SECONDS(WARNING, 5)
        << "redis " << address_ << ": dropping connection: " << drop_reason_;
  }
  ForgetContext();
  // Runs every pending callback with a null reply, which fails their batches; from inside a
  // reply callback, the wire does this as soon as that callback returns.
  wire->Free();
  ScheduleReconnect();
}

void RedisConnection::ForgetContext() {
  wire_ = nullptr;
  SetReady(false);
  connect_timer_.Cancel();
  stall_timer_.Cancel();
}

void RedisConnection::ScheduleReconnect() {
  if (state_ == State::kClosed) {
    return;
  }
  state_ = State::kDown;
  reconnect_timer_.Arm(backoff_.NextDelayMicros());
}

void RedisConnection::SetReady(bool ready) {
  if (ready_.load(std::memory_order_relaxed) == ready) {
    return;
  }
  ready_.store(ready, std::memory_order_release);
  if (!ready) {
    Bump(disconnects_);
  }
  if (on_ready_change_) {
    on_ready_change_(ready);
  }
}

void RedisConnection::NoteCommandSent() {
  ++sent_seq_;
  // A caller may not touch the loop's timers: AdoptCallerBatches arms this one for it.
  if (outstanding_++ == 0 && !writing_from_caller_) {
    WatchForStall();
  }
}

void RedisConnection::WatchForStall() {
  if (options_.stall_timeout_us > 0 && !stall_timer_.armed()) {
    replies_at_stall_check_ = replies_seen_;
    stall_timer_.Arm(options_.stall_timeout_us);
  }
}

void RedisConnection::OnStallCheck() {
  if (outstanding_ == 0 || wire_ == nullptr) {
    return;
  }
  if (replies_seen_ == replies_at_stall_check_) {
    Drop(absl::StrCat("no reply for ", options_.stall_timeout_us / 1000, " ms with ", outstanding_,
                      " commands outstanding"));
    return;
  }
  replies_at_stall_check_ = replies_seen_;
  stall_timer_.Arm(options_.stall_timeout_us);
}

void RedisConnection::Close() {
  MutexLock lock(mu_);
  if (state_ == State::kClosed) {
    return;
  }
  state_ = State::kClosed;
  reconnect_timer_.Cancel();
  RedisWire* wire = wire_;
  ForgetContext();
  if (wire != nullptr) {
    drop_reason_ = "redis client stopped";
    wire->Free();
  }
  for (PendingBatch* batch = submissions_.Close(); batch != nullptr;) {
    PendingBatch* next = batch->next;
    Complete(batch, absl::UnavailableError(absl::StrCat("redis ", address_, ": client stopped")));
    MaybeFree(batch);
    batch = next;
  }
  // Freeing the wire failed every batch callers wrote: let them go, and the watchdog too.
  FinishLoopWork();
}

// ---------------------------------------------------------------------------------------------
// Batches.

void RedisConnection::Submit(CommandBatch batch, int64_t deadline_us, BatchCallback done) {
  auto* pending = new PendingBatch;
  pending->owner = this;
  pending->commands = std::move(batch);
  pending->done = std::move(done);
  pending->deadline_us = deadline_us;
  pending->submitted_us = clock_.MonotonicMicros();
  if (TryWriteFromCaller(pending)) {
    return;
  }
  switch (submissions_.Push(pending)) {
    case decltype(submissions_)::PushResult::kWasEmpty:
      // One drain task per burst: everything pushed until it runs goes out in the same write.
      loop_.Post([this] { DrainSubmissions(); });
      return;
    case decltype(submissions_)::PushResult::kQueued:
      return;
    case decltype(submissions_)::PushResult::kClosed: {
      BatchCallback callback = std::move(pending->done);
      delete pending;
      // Not under mu_ (a callback run under it may Submit here), so without the address.
      std::move(callback)(absl::UnavailableError("redis: client stopped"), {});
      return;
    }
  }
}

bool RedisConnection::TryWriteFromCaller(PendingBatch* batch) {
  if (options_.caller_write_horizon_us <= 0 || !ready() || loop_.IsLoopThread()) {
    return false;
  }
  if (!mu_.TryLock()) {
    return false;  // the loop is at work on this connection: let it batch this one too
  }
  bool written = WriteFromCaller(batch);
  mu_.Unlock();
  return written;
}

bool RedisConnection::WriteFromCaller(PendingBatch* batch) {
  size_t n = batch->commands.size();
  // Only an idle connection: commands on the wire mean the loop will soon write anyway, and a
  // queued batch must go out first (one caller's batches reach Redis in the order submitted).
  // The loop handles the rest (an empty batch, failures, a deadline before the horizon).
  if (state_ != State::kReady || wire_ == nullptr || outstanding_ != 0 || n == 0 ||
      n > options_.max_pending_commands || !submissions_.empty() ||
      !horizon_.Admits(batch->deadline_us)) {
    return false;
  }
  batch->replies.resize(n);
  batch->slots.assign(n, CommandSlot{});
  batch->remaining = n;
  batch->awaiting_loop = true;
  caller_batches_.push_back(batch);
  writing_from_caller_ = true;
  for (size_t i = 0; i < n; ++i) {
    batch->slots[i].batch = batch;
    if (!SendCommand(batch, i)) {
      batch->send_failed = true;  // the loop fails the batch when it adopts it
      break;
    }
  }
  writing_from_caller_ = false;
  horizon_.NoteCallerWrite();
  Bump(caller_writes_);
  if (wire_->Flush() != RedisWire::FlushResult::kDone) {
    // A full socket buffer or a broken socket: the loop finishes the write or the disconnect as
    // if the socket had woken it. Posted tasks run before the connection can be destroyed.
    loop_.Post([this] {
      {
        MutexLock lock(mu_);
        if (wire_ != nullptr) {
          wire_->HandleWrite();  // may read too (see OnSocketWritable)
        }
        FinishLoopWork();
        answering_.swap(answered_);
      }
      RunAnswered(answering_);
    });
  }
  return true;
}

void RedisConnection::FinishLoopWork() {
  AdoptCallerBatches();
  // Every batch callers wrote is adopted, so the horizon may move: the loop runs again by then,
  // for a reply or for the watchdog.
  horizon_.LoopRan(state_ == State::kReady && wire_ != nullptr);
}

void RedisConnection::OnWatchdog() {
  if (horizon_.caller_wrote() || outstanding_ > 0) {
    FinishLoopWork();
    return;
  }
  // Quiet: stop waking. The next batch goes through the loop, which renews the horizon.
  AdoptCallerBatches();
  horizon_.Withdraw();
}

void RedisConnection::AdoptCallerBatches() {
  if (caller_batches_.empty()) {
    return;
  }
  // Completing a batch runs its callback, which may Submit to other connections (never to this
  // one's caller_batches_: on the loop thread Submit queues), but keep the list stable anyway.
  adopting_.swap(caller_batches_);
  int64_t now = clock_.MonotonicMicros();
  for (PendingBatch* batch : adopting_) {
    batch->awaiting_loop = false;
    if (batch->completed) {
      // Answered (or failed) already: the usual case.
    } else if (batch->send_failed) {
      Complete(batch,
               absl::UnavailableError(absl::StrCat("redis ", address_, ": cannot queue command")));
    } else if (batch->deadline_us <= now) {
      Bump(deadline_exceeded_);
      Complete(batch, absl::DeadlineExceededError(absl::StrCat(
                          "redis ", address_, ": no reply before the deadline")));
    } else {
      WatchDeadline(batch, batch->deadline_us - now);
    }
    MaybeFree(batch);
  }
  adopting_.clear();
  if (outstanding_ > 0 && wire_ != nullptr) {
    WatchForStall();
  }
}

void RedisConnection::DrainSubmissions() {
  MutexLock lock(mu_);
  // (Nothing here reads: WriteQueuedFromLoop only flushes, or fails the wire.)
  // The drained batches are written right after they are queued, as a caller writes: arming the
  // write event for them (the wire asks for it with each command) would cost two epoll_ctl and a
  // trip through epoll_wait per drain, for a socket that is almost always writable.
  writing_from_loop_ = true;
  for (PendingBatch* batch = submissions_.TakeAll(); batch != nullptr;) {
    PendingBatch* next = batch->next;
    batch->next = nullptr;
    Dispatch(batch);
    MaybeFree(batch);
    batch = next;
  }
  writing_from_loop_ = false;
  WriteQueuedFromLoop();
  FinishLoopWork();
}

void RedisConnection::WriteQueuedFromLoop() {
  // Only a ready connection: while connecting, the output buffer holds the handshake, which
  // the wire writes once the connect (and the TLS handshake) is done.
  if (state_ != State::kReady || wire_ == nullptr) {
    return;
  }
  switch (wire_->Flush()) {
    case RedisWire::FlushResult::kDone:
      return;
    case RedisWire::FlushResult::kPending:
      wire_->ArmWrite();  // a full socket buffer: the write event finishes the rest
      return;
    case RedisWire::FlushResult::kFailed:
      wire_->HandleWrite();  // meets the error again and disconnects, as the event would
      return;
  }
}

void RedisConnection::Dispatch(PendingBatch* batch) {
  if (state_ != State::kReady || wire_ == nullptr) {
    absl::Status status = absl::UnavailableError(
        absl::StrCat("redis ", address_, ": not connected",
                     last_error_.empty() ? "" : absl::StrCat(" (", last_error_, ")")));
    Complete(batch, last_error_tls_ ? WithFailureReason(std::move(status), FailureReason::kTls)
                                    : std::move(status));
    return;
  }
  size_t n = batch->commands.size();
  if (n == 0) {
    Complete(batch, absl::OkStatus());
    return;
  }
  // Time the batch waited for this thread is this process', not Redis': up to the grace of it
  // moves the deadline, so that a short wait leaves the whole budget (deadline minus
  // submission) in flight, and a long one costs no more than budget plus grace in all.
  const int64_t now = clock_.MonotonicMicros();
  const int64_t budget_us = batch->deadline_us - batch->submitted_us;
  const int64_t waited_us = now - batch->submitted_us;
  const int64_t deadline_us =
      std::min(now + budget_us, batch->deadline_us + options_.queue_grace_us);
  if (budget_us <= 0 || deadline_us <= now) {
    Bump(deadline_exceeded_);
    Complete(batch, WithFailureReason(
                        absl::DeadlineExceededError(absl::StrCat(
                            "redis ", address_, ": not sent within the budget (",
                            std::max<int64_t>(budget_us, 0) / 1000.0, " ms; waited ",
                            waited_us / 1000.0, " ms for the connection's thread)")),
                        FailureReason::kTimeoutBeforeSend));
    return;
  }
  const int64_t remaining_us = deadline_us - now;
  batch->deadline_us = deadline_us;
  if (outstanding_ + n > options_.max_pending_commands) {
    Complete(batch, absl::UnavailableError(absl::StrCat("redis ", address_, ": ", outstanding_,
                                                        " commands already in flight")));
    return;
  }
  batch->replies.resize(n);
  batch->slots.assign(n, CommandSlot{});
  batch->remaining = n;
  WatchDeadline(batch, remaining_us);
  for (size_t i = 0; i < n; ++i) {
    batch->slots[i].batch = batch;
    if (!SendCommand(batch, i)) {
      // Commands already queued keep their slots until the wire calls back; they are dropped then.
      Complete(batch,
               absl::UnavailableError(absl::StrCat("redis ", address_, ": cannot queue command")));
      return;
    }
  }
}

bool RedisConnection::SendCommand(PendingBatch* batch, size_t i) {
  std::string_view resp = batch->commands.resp(i);
  CommandSlot* slot = &batch->slots[i];
  if (wire_ == nullptr || !wire_->Command(&RedisConnection::OnCommandReply, slot, resp)) {
    return false;
  }
  NoteCommandSent();
  slot->sent_seq = sent_seq_;
  batch->replies_seen_at_send = replies_seen_;
  ++batch->refs;
  return true;
}

bool RedisConnection::SendScriptLoad(ScriptState* state) {
  std::string resp;
  AppendRespCommand({"SCRIPT", "LOAD", state->script->source()}, &resp);
  if (wire_ == nullptr || !wire_->Command(&RedisConnection::OnScriptLoaded, state, resp)) {
    return false;
  }
  NoteCommandSent();
  state->last_load_seq = sent_seq_;
  return true;
}

RedisConnection::ScriptState* RedisConnection::StateFor(const RedisScript& script) {
  auto id = static_cast<size_t>(script.id());
  if (script_states_.size() <= id) {
    script_states_.resize(id + 1);
  }
  if (script_states_[id] == nullptr) {
    script_states_[id] = std::make_unique<ScriptState>();
    script_states_[id]->owner = this;
    script_states_[id]->script = &script;
  }
  return script_states_[id].get();
}

void RedisConnection::OnScriptLoaded(RedisWire* /*wire*/, RedisReply* r, void* privdata) {
  auto* state = static_cast<ScriptState*>(privdata);
  RedisConnection* self = state->owner;
  self->mu_.AssertHeld();  // called back from a wire call under mu_
  --self->outstanding_;
  if (r == nullptr) {
    return;
  }
  ++self->replies_seen_;
  if (r->is_error()) {
    // The EVALSHAs behind it meet NOSCRIPT again and end with this error once out of retries.
    state->last_error = LogText(r->str());
    SLUICE_LOG_EVERY_SECONDS(ERROR, 10)
        << "redis " << self->address_ << ": SCRIPT LOAD of '" << state->script->name()
        << "' failed: " << state->last_error;
  } else if (r->str() != state->script->sha1()) {
    state->last_error = absl::StrCat("Redis named the script ", LogText(r->str()),
                                     ", expected ", state->script->sha1());
    SLUICE_LOG_EVERY_SECONDS(ERROR, 10) << "redis " << self->address_ << ": script '"
                                        << state->script->name() << "': " << state->last_error;
  } else {
    state->last_error.clear();
  }
}

void RedisConnection::OnCommandReply(RedisWire* wire, RedisReply* r, void* privdata) {
  auto* slot = static_cast<CommandSlot*>(privdata);
  PendingBatch* batch = slot->batch;
  RedisConnection* self = batch->owner;
  self->mu_.AssertHeld();  // called back from a wire call under mu_
  --self->outstanding_;
  --batch->refs;
  if (r != nullptr) {
    ++self->replies_seen_;
  }
  if (batch->completed) {
    if (r != nullptr) {
      Bump(self->late_replies_);  // its deadline passed: nobody waits for it any more
    }
  } else if (r == nullptr) {
    self->Complete(batch, self->LostStatus(wire));
  } else {
    size_t i = static_cast<size_t>(slot - batch->slots.data());
    if (batch->commands.script(i) != nullptr && IsNoScript(*r)) {
      self->HealNoScript(batch, i);
    } else {
      batch->replies[i] = std::move(*r);
      if (--batch->remaining == 0) {
        // A reply comes only from OnSocketReadable's read, which runs the callback after it.
        self->CompleteAfterRead(batch);
      }
    }
  }
  self->MaybeFree(batch);
}

void RedisConnection::HealNoScript(PendingBatch* batch, size_t i) {
  CommandSlot& slot = batch->slots[i];
  ScriptState* state = StateFor(*batch->commands.script(i));
  if (++slot.noscript_retries > kMaxNoScriptRetries) {
    std::string message =
        absl::StrCat("redis ", address_, ": cannot run script '", state->script->name(), "': ");
    // Redis refusing the script is a defect, not weather; a script that keeps vanishing is.
    Complete(batch, state->last_error.empty()
                        ? absl::UnavailableError(absl::StrCat(message, "it keeps disappearing"))
                        : absl::InternalError(absl::StrCat(message, state->last_error)));
    return;
  }
  // Redis runs one connection's commands in order. If a SCRIPT LOAD went out after this
  // EVALSHA, it is ahead of the resend; only an EVALSHA sent after the latest load proves the
  // script is gone again. So a pipeline of EVALSHAs that all fail after SCRIPT FLUSH costs one
  // load, and the resends follow it at once instead of waiting a round trip for its reply.
  if (state->last_load_seq < slot.sent_seq) {
    if (!SendScriptLoad(state)) {
      Complete(batch, absl::UnavailableError(
                          absl::StrCat("redis ", address_, ": cannot queue SCRIPT LOAD")));
      return;
    }
    Bump(script_loads_);
  }
  if (!SendCommand(batch, i)) {
    Complete(batch, absl::UnavailableError(absl::StrCat("redis ", address_, ": connection lost")));
    return;
  }
  Bump(noscript_retries_);
}

void RedisConnection::ExpireDeadlines() {
  deadline_timer_at_ = 0;
  const int64_t now = clock_.MonotonicMicros();
  int64_t earliest = 0;  // of the deadlines still to come
  for (PendingBatch* batch = deadlines_head_; batch != nullptr;) {
    // Completing a batch unlinks it and may free it, and its callback never completes another
    // batch of this connection (from the loop thread, Submit only queues): take the next first.
    PendingBatch* next = batch->deadline_next;
    if (batch->deadline_us > now) {
      // Still to come (also when libevent's clock ran ahead of the injected one).
      earliest = earliest == 0 ? batch->deadline_us : std::min(earliest, batch->deadline_us);
      batch = next;
      continue;
    }
    Bump(deadline_exceeded_);
    // A node that answered nothing since the batch was written may be gone (paused, cut off):
    // the circuit breaker counts it. One that kept answering others is slow, and a breaker
    // opened on slowness (a starved CPU, a burst) would hand a whole open period to the failure
    // policy.
    const bool silent = replies_seen_ == batch->replies_seen_at_send;
    Complete(batch,
             WithFailureReason(
                 absl::DeadlineExceededError(absl::StrCat(
                     "redis ", address_, ": no reply before the deadline",
                     silent ? " (nothing read from the node since it was written)"
                            : " (the node is answering others: slow)")),
                 silent ? FailureReason::kTimeoutInFlight : FailureReason::kTimeoutSlow));
    MaybeFree(batch);
    batch = next;
  }
  if (earliest != 0) {
    deadline_timer_at_ = earliest;
    deadline_timer_.Arm(earliest - now);
  }
}

void RedisConnection::NoteCompleted(PendingBatch* batch, const absl::Status& status) {
  batch->completed = true;
  if (breaker_ != nullptr) {
    breaker_->Record(status);
  }
  if (call_latency_ != nullptr &&
      (status.ok() || status.code() == absl::StatusCode::kDeadlineExceeded)) {
    call_latency_->Record(clock_.MonotonicMicros() - batch->submitted_us);
  }
  UnwatchDeadline(batch);
}

void RedisConnection::CompleteAfterRead(PendingBatch* batch) {
  if (batch->completed) {
    return;
  }
  NoteCompleted(batch, absl::OkStatus());
  batch->answer_pending = true;
  answered_.push_back(batch);
}

void RedisConnection::Complete(PendingBatch* batch, absl::Status status) {
  if (batch->completed) {
    return;
  }
  NoteCompleted(batch, status);
  BatchCallback done = std::move(batch->done);
  if (status.ok()) {
    std::move(done)(std::move(status), absl::MakeSpan(batch->replies));
  } else {
    std::move(done)(std::move(status), {});
  }
  // Late replies need only the slots; let the rest go now rather than when they come.
  batch->commands = CommandBatch();
  batch->replies.clear();  // frees what it holds
}

void RedisConnection::MaybeFree(PendingBatch* batch) {
  if (batch->completed && batch->refs == 0 && !batch->awaiting_loop && !batch->answer_pending) {
    delete batch;
  }
}

absl::Status RedisConnection::LostStatus(const RedisWire* wire) const {
  const char* why = !wire->error().empty() ? wire->error().c_str()
                    : drop_reason_.empty() ? "connection closed"
                                           : drop_reason_.c_str();
  return absl::UnavailableError(absl::StrCat("redis ", address_, ": connection lost: ", why));
}

void RedisConnection::WatchDeadline(PendingBatch* batch, int64_t remaining_us) {
  batch->deadline_watched = true;
  batch->deadline_prev = deadlines_tail_;
  batch->deadline_next = nullptr;
  (deadlines_tail_ != nullptr ? deadlines_tail_->deadline_next : deadlines_head_) = batch;
  deadlines_tail_ = batch;
  if (deadline_timer_at_ == 0 || batch->deadline_us < deadline_timer_at_) {
    deadline_timer_at_ = batch->deadline_us;
    deadline_timer_.Arm(remaining_us);
  }
}

void RedisConnection::UnwatchDeadline(PendingBatch* batch) {
  if (!batch->deadline_watched) {
    return;
  }
  batch->deadline_watched = false;
  (batch->deadline_prev != nullptr ? batch->deadline_prev->deadline_next : deadlines_head_) =
      batch->deadline_next;
  (batch->deadline_next != nullptr ? batch->deadline_next->deadline_prev : deadlines_tail_) =
      batch->deadline_prev;
  batch->deadline_prev = batch->deadline_next = nullptr;
}

}  // namespace sluice
