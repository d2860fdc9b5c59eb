// One Redis connection's socket on an EventLoop: the connect (and the TLS handshake over it), the
// output buffer of RESP commands, the reply reader (RedisReplyReader), and the queue of callbacks
// waiting for replies in order. It is what hiredis' async context was to RedisConnection, with
// the socket's I/O our own, because hiredis 0.14 reads and writes the file descriptor itself
// and so cannot speak TLS (docs/redis-backend.md, "TLS").
//
// Contract (the same as hiredis' async context's, which RedisConnection was built on):
// - Every method runs under the owner's lock: on the loop thread, except Command, Flush and the
//   accessors, which a caller thread may use while it holds the owner's lock.
// - Reply callbacks run, in the order the commands were queued, from HandleRead (or from
//   HandleWrite, when a TLS read had to wait for the socket to take a write); with a null
//   reply when the wire goes away first (Free, or an error), then the owner hears of it
//   (OnConnectFailed before the connection was up, else OnDisconnected) and the wire frees
//   itself. So after HandleRead, HandleWrite or Free the wire may be gone.
// - Free from inside a reply callback takes effect once the callback returns.
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <string_view>

#include "server/redis/reply.h"
#include "server/redis/socket.h"

struct event;

namespace sluice {

class EventLoop;
class TlsClientContext;

class RedisWire {
 public:
  class Owner {
   public:
    // The socket can be read (or written): the owner takes its lock and calls HandleRead (or
    // HandleWrite). On the loop thread.
    virtual void OnSocketReadable(RedisWire* wire) = 0;
    virtual void OnSocketWritable(RedisWire* wire) = 0;
    // Whether Command should leave the write event alone: the owner writes itself (Flush).
    virtual bool SocketWatchPaused() const = 0;
    // The connect or the TLS handshake failed (error(), tls_failed()); the wire frees itself
    // right after.
    virtual void OnConnectFailed(RedisWire* wire) = 0;
    // A connected wire failed or the server closed it (error()); it frees itself right after.
    virtual void OnDisconnected(RedisWire* wire) = 0;

   protected:
    ~Owner() = default;
  };
  // `reply` is null when the wire fails before the reply came; the callback may move from it.
  using ReplyFn = void (*)(RedisWire* wire, RedisReply* reply, void* privdata);

  // Starts connecting to `endpoint`, with TLS when `tls` is given; both socket events are armed
  // and the first completes the connect. Commands may be queued at once: they are written when
  // the connection is up. nullptr with `error` set when the connect cannot even start.
  // REQUIRES: on the loop thread; `owner` and `tls` outlive the wire.
  static RedisWire* Connect(EventLoop& loop, const RedisEndpoint& endpoint, TlsClientContext* tls,
                            Owner& owner, std::string* error);

  RedisWire(const RedisWire&) = delete;
  RedisWire& operator=(const RedisWire&) = delete;

  // Queues one RESP command whose reply goes to `fn(wire, reply, privdata)`; asks for the write
  // event unless the owner pauses it. False once the wire is going away.
  bool Command(ReplyFn fn, void* privdata, std::string_view resp);

  enum class FlushResult { kDone, kPending, kFailed };
  // Writes as much of the output as the socket takes now, never calling back: kDone (all
  // written), kPending (the rest waits for the socket), kFailed (kept in error(); the next
  // HandleWrite or HandleRead disconnects). Before the connection is up, nothing is written.
  FlushResult Flush();
  // Arms the write event, so HandleWrite finishes what Flush left.
  void ArmWrite();

  void HandleRead();
  void HandleWrite();
  // Fails every waiting callback with a null reply and frees the wire (once the running reply
  // callback returns, when called from one). The owner is not told.
  void Free();

  Owner& owner() const { return owner_; }
  bool connected() const { return state_ == State::kConnected; }
  // Why the wire failed; empty while it has not.
  const std::string& error() const { return error_; }
  // Whether the failure was TLS' own (the handshake, or an alert later: a server refusing the
  // client's certificate after a TLS 1.3 handshake says so only then).
  bool tls_failed() const { return tls_failed_; }

 private:
  enum class State { kConnecting, kHandshaking, kConnected };
  struct Waiting {
    ReplyFn fn;
    void* privdata;
  };

  RedisWire(EventLoop& loop, int fd, SslPtr ssl, Owner& owner);
  ~RedisWire();

  static void OnReadable(int fd, short events, void* arg);
  static void OnWritable(int fd, short events, void* arg);

  // Whether HandleRead or HandleWrite may do I/O; otherwise it has done what the state asks
  // (failed the wire, or moved the connect on), and the wire may be gone.
  bool ReadyForIo();
  // Moves the connect on.
  void ContinueConnect();
  void BecomeConnected();
  // Reads what the socket holds into the reader; false (error_ set) when the wire must go.
  bool ReadIntoReader();
  // Hands every complete reply to its callback; false when the wire is gone (a callback freed
  // it, or the replies made no sense).
  bool DeliverReplies();
  void SetWriteWatched(bool watched);
  // Records `error` and goes away: the callbacks, then the owner, then the memory.
  void Fail(std::string error);
  void Destroy(bool notify_owner);

  Owner& owner_;
  const int fd_;
  State state_ = State::kConnecting;
  Stream stream_;
  event* read_event_ = nullptr;
  event* write_event_ = nullptr;
  bool write_watched_ = false;
  // TLS: a write that must wait for a read, or a read that must wait for a write (the session
  // is updating its keys).
  bool write_waits_for_read_ = false;
  bool read_waits_for_write_ = false;
  RedisReplyReader reader_;
  std::string out_;
  size_t out_sent_ = 0;
  std::deque<Waiting> waiting_;
  std::string error_;
  bool tls_failed_ = false;
  bool in_callback_ = false;
  bool free_requested_ = false;
  bool going_ = false;  // Destroy has begun
};

}  // namespace sluice
