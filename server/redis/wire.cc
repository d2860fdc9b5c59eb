#include "server/redis/wire.h"

#include <event2/event.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/log_text.h"
#include "server/redis/event_loop.h"
#include "server/redis/tls_context.h"

namespace sluice {
namespace {

// Bytes read per read call, as hiredis reads.
constexpr size_t kReadChunk = 16 * 1024;
// Written output is dropped from the buffer's front once this much has gone out of a buffer
// still partly unwritten (a fully written buffer is simply cleared).
constexpr size_t kCompactAfter = 64 * 1024;

}  // namespace

RedisWire* RedisWire::Connect(EventLoop& loop, const RedisEndpoint& endpoint,
                              TlsClientContext* tls, Owner& owner, std::string* error) {
  SslPtr ssl;
  if (tls != nullptr) {
    absl::StatusOr<SslPtr> session = tls->NewSession(endpoint.host);
    if (!session.ok()) {
      *error = std::string(session.status().message());
      return nullptr;
    }
    ssl = std::move(*session);
  }
  absl::StatusOr<int> fd = StartSocketConnect(endpoint);
  if (!fd.ok()) {
    *error = std::string(fd.status().message());
    return nullptr;
  }
  return new RedisWire(loop, *fd, std::move(ssl), owner);
}

RedisWire::RedisWire(EventLoop& loop, int fd, SslPtr ssl, Owner& owner)
    : owner_(owner), fd_(fd), stream_(fd, std::move(ssl)) {
  // The read event persists from the connect to the end: re-adding an added event costs
  // nothing, where a one-shot one costs two epoll_ctl per reply.
  read_event_ = event_new(loop.base(), fd_, EV_READ | EV_PERSIST, &RedisWire::OnReadable, this);
  write_event_ = event_new(loop.base(), fd_, EV_WRITE, &RedisWire::OnWritable, this);
  event_add(read_event_, nullptr);
  SetWriteWatched(true);  // writable: the connect is done
}

RedisWire::~RedisWire() {
  event_free(read_event_);
  event_free(write_event_);
  close(fd_);
}

void RedisWire::OnReadable(int /*fd*/, short /*events*/, void* arg) {
  auto* wire = static_cast<RedisWire*>(arg);
  wire->owner_.OnSocketReadable(wire);  // may free the wire
}

void RedisWire::OnWritable(int /*fd*/, short /*events*/, void* arg) {
  auto* wire = static_cast<RedisWire*>(arg);
  wire->write_watched_ = false;  // a one-shot event: fired, it is no longer added
  wire->owner_.OnSocketWritable(wire);
}

void RedisWire::SetWriteWatched(bool watched) {
  if (watched == write_watched_) {
    return;
  }
  write_watched_ = watched;
  if (watched) {
    event_add(write_event_, nullptr);
  } else {
    event_del(write_event_);
  }
}

bool RedisWire::Command(ReplyFn fn, void* privdata, std::string_view resp) {
  if (going_ || free_requested_) {
    return false;
  }
  out_.append(resp);
  waiting_.push_back(Waiting{fn, privdata});
  if (!owner_.SocketWatchPaused()) {
    SetWriteWatched(true);
  }
  return true;
}

void RedisWire::ArmWrite() { SetWriteWatched(true); }

RedisWire::FlushResult RedisWire::Flush() {
  if (!error_.empty()) {
    return FlushResult::kFailed;
  }
  if (state_ != State::kConnected) {
    return FlushResult::kPending;
  }
  write_waits_for_read_ = false;
  while (out_sent_ < out_.size()) {
    StreamIo io = stream_.Write(absl::string_view(out_).substr(out_sent_));
    if (io.kind == StreamIo::kDone) {
      out_sent_ += io.bytes;
      continue;
    }
    if (io.kind == StreamIo::kFailed) {
      tls_failed_ = io.tls_error;
      error_ = std::move(io.error);
      return FlushResult::kFailed;
    }
    write_waits_for_read_ = io.kind == StreamIo::kWantRead;
    if (out_sent_ >= kCompactAfter) {
      out_.erase(0, out_sent_);
      out_sent_ = 0;
    }
    return FlushResult::kPending;
  }
  out_.clear();  // keeps its capacity
  out_sent_ = 0;
  return FlushResult::kDone;
}

bool RedisWire::ReadyForIo() {
  if (!error_.empty()) {
    Fail(error_);  // a failed Flush, seen at the next event
    return false;
  }
  if (state_ != State::kConnected) {
    ContinueConnect();
    return false;
  }
  return true;
}

void RedisWire::HandleWrite() {
  if (!ReadyForIo()) {
    return;
  }
  // A TLS read that had to wait for the socket to take a write (the session answering a key
  // update) goes on now, before the write, so that what it must send goes first.
  bool keep = true;
  if (read_waits_for_write_) {
    read_waits_for_write_ = false;
    keep = ReadIntoReader();
  }
  const FlushResult flushed = Flush();
  switch (flushed) {
    case FlushResult::kDone:
      SetWriteWatched(read_waits_for_write_);
      break;
    case FlushResult::kPending:
      // A TLS write waiting for a read is retried by HandleRead, not by a writable socket.
      SetWriteWatched(!write_waits_for_read_ || read_waits_for_write_);
      break;
    case FlushResult::kFailed:
      break;
  }
  if (!DeliverReplies()) {
    return;  // freed
  }
  if (!keep || flushed == FlushResult::kFailed) {
    Fail(error_);
  }
}

void RedisWire::ContinueConnect() {
  if (state_ == State::kConnecting) {
    if (absl::Status connected = SocketConnectResult(fd_); !connected.ok()) {
      Fail(std::string(connected.message()));
      return;
    }
    if (!stream_.tls()) {
      BecomeConnected();
      return;
    }
    state_ = State::kHandshaking;
  }
  StreamIo io = stream_.Handshake();
  switch (io.kind) {
    case StreamIo::kDone:
      BecomeConnected();
      return;
    case StreamIo::kWantRead:
      SetWriteWatched(false);  // the persistent read event brings the next step
      return;
    case StreamIo::kWantWrite:
      SetWriteWatched(true);
      return;
    case StreamIo::kClosed:
    case StreamIo::kFailed:
      tls_failed_ = true;
      Fail(std::move(io.error));
      return;
  }
}

void RedisWire::BecomeConnected() {
  state_ = State::kConnected;
  // What was queued while connecting (the handshake's commands) goes out now.
  HandleWrite();
}

void RedisWire::HandleRead() {
  if (!ReadyForIo()) {
    return;
  }
  const bool keep = ReadIntoReader();
  // What was read before an error still answers its commands.
  if (!DeliverReplies()) {
    return;  // freed (by a callback's Free, or a protocol error)
  }
  if (!keep) {
    Fail(error_);
    return;
  }
  if (write_waits_for_read_) {
    HandleWrite();
  }
}

bool RedisWire::ReadIntoReader() {
  char buf[kReadChunk];
  // Once per event (level-triggered: what the socket still holds wakes the loop again), and
  // under TLS again while the session holds bytes it has read, which no event would announce.
  do {
    StreamIo io = stream_.Read(buf, sizeof(buf));
    switch (io.kind) {
      case StreamIo::kDone:
        if (!reader_.Feed(buf, io.bytes)) {
          error_ = "out of memory reading replies";
          return false;
        }
        break;
      case StreamIo::kWantRead:
        return true;
      case StreamIo::kWantWrite:
        read_waits_for_write_ = true;  // TLS: HandleWrite reads on once the socket is writable
        SetWriteWatched(true);
        return true;
      case StreamIo::kClosed:
        error_ = "Server closed the connection";
        return false;
      case StreamIo::kFailed:
        tls_failed_ = io.tls_error;
        error_ = std::move(io.error);
        return false;
    }
  } while (stream_.pending());
  return true;
}

bool RedisWire::DeliverReplies() {
  while (!free_requested_) {
    switch (reader_.Next()) {
      case RedisReplyReader::Result::kError:
        Fail(absl::StrCat("protocol error: ", LogText(reader_.error())));
        return false;
      case RedisReplyReader::Result::kNone:
        return true;
      case RedisReplyReader::Result::kReply:
        break;
    }
    if (waiting_.empty()) {
      Fail("a reply to no command (the connection is out of step)");
      return false;
    }
    Waiting next = waiting_.front();
    waiting_.pop_front();
    in_callback_ = true;
    next.fn(this, reader_.reply(), next.privdata);
    in_callback_ = false;
  }
  Destroy(/*notify_owner=*/false);  // a callback asked for it
  return false;
}

void RedisWire::Free() {
  if (in_callback_) {
    free_requested_ = true;
    return;
  }
  Destroy(/*notify_owner=*/false);
}

void RedisWire::Fail(std::string error) {
  if (going_) {
    return;
  }
  error_ = std::move(error);
  if (error_.empty()) {
    error_ = "connection failed";
  }
  Destroy(/*notify_owner=*/true);
}

void RedisWire::Destroy(bool notify_owner) {
  if (going_) {
    return;
  }
  going_ = true;
  const bool was_connected = state_ == State::kConnected;
  while (!waiting_.empty()) {
    Waiting next = waiting_.front();
    waiting_.pop_front();
    next.fn(this, nullptr, next.privdata);
  }
  if (notify_owner) {
    if (was_connected) {
      owner_.OnDisconnected(this);
    } else {
      owner_.OnConnectFailed(this);
    }
  }
  delete this;
}

}  // namespace sluice
