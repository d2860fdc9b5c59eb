#include "server/redis/socket_events.h"

#include <event2/event.h>
#include <hiredis/async.h>

#include "server/redis/event_loop.h"

namespace sluice {
namespace {

// What hiredis holds as ac->ev.data.
struct SocketEvents {
  SocketEventsOwner* owner = nullptr;
  redisAsyncContext* ac = nullptr;
  event* read = nullptr;
  event* write = nullptr;
};

void OnReadable(int /*fd*/, short /*events*/, void* arg) {
  auto* events = static_cast<SocketEvents*>(arg);
  events->owner->OnSocketReadable(events->ac);  // may free `events`
}

void OnWritable(int /*fd*/, short /*events*/, void* arg) {
  auto* events = static_cast<SocketEvents*>(arg);
  events->owner->OnSocketWritable(events->ac);
}

void Watch(void* privdata, bool read, bool arm) {
  auto* events = static_cast<SocketEvents*>(privdata);
  if (events->owner->SocketWatchPaused()) {
    return;
  }
  event* watched = read ? events->read : events->write;
  if (arm) {
    event_add(watched, nullptr);
  } else {
    event_del(watched);
  }
}

void Cleanup(void* privdata) {
  auto* events = static_cast<SocketEvents*>(privdata);
  event_free(events->read);
  event_free(events->write);
  delete events;
}

}  // namespace

void AttachSocketEvents(EventLoop& loop, redisAsyncContext* ac, SocketEventsOwner& owner) {
  auto* events = new SocketEvents;
  events->owner = &owner;
  events->ac = ac;
  int fd = ac->c.fd;
  // The read event persists: hiredis re-arms reading after every read, and re-adding an event
  // that is still added costs nothing, where a one-shot event costs two epoll_ctl per reply
  // (libevent removes it when it fires, hiredis adds it back).
  events->read = event_new(loop.base(), fd, EV_READ | EV_PERSIST, &OnReadable, events);
  events->write = event_new(loop.base(), fd, EV_WRITE, &OnWritable, events);
  ac->ev.data = events;
  ac->ev.addRead = [](void* privdata) { Watch(privdata, /*read=*/true, /*arm=*/true); };
  ac->ev.delRead = [](void* privdata) { Watch(privdata, /*read=*/true, /*arm=*/false); };
  ac->ev.addWrite = [](void* privdata) { Watch(privdata, /*read=*/false, /*arm=*/true); };
  ac->ev.delWrite = [](void* privdata) { Watch(privdata, /*read=*/false, /*arm=*/false); };
  ac->ev.cleanup = &Cleanup;
  event_add(events->read, nullptr);
  event_add(events->write, nullptr);
}

}  // namespace sluice
