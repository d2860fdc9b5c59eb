// hiredis' event-adapter interface (redisAsyncContext::ev) on an EventLoop. RedisConnection uses
// it in place of hiredis' own libevent adapter for two reasons:
// - every read and write of the socket happens inside the owner's callbacks, so under its lock;
// - the owner can keep hiredis away from the loop's event_base (which only the loop thread may
//   touch) while another thread queues commands on the context.
#pragma once

struct redisAsyncContext;

namespace sluice {

class EventLoop;

class SocketEventsOwner {
 public:
  // The socket can be read (or written): the owner calls redisAsyncHandleRead (or
  // redisAsyncHandleWrite) on `ac`, which may free `ac`. On the loop thread.
  virtual void OnSocketReadable(redisAsyncContext* ac) = 0;
  virtual void OnSocketWritable(redisAsyncContext* ac) = 0;
  // Whether to ignore hiredis' requests to arm or disarm the socket's events for now. hiredis
  // asks only from inside the redisAsync* calls the owner makes.
  virtual bool SocketWatchPaused() const = 0;

 protected:
  ~SocketEventsOwner() = default;
};

// Watches `ac`'s socket on `loop` for `owner` from now until hiredis frees `ac` (which frees the
// events too). Both events start armed: whichever fires first completes the non-blocking
// connect. REQUIRES: `ac` has just been created and has no adapter; on the loop thread; `owner`
// outlives `ac`.
void AttachSocketEvents(EventLoop& loop, redisAsyncContext* ac, SocketEventsOwner& owner);

}  // namespace sluice
