#include "server/service/loop_mailbox.h"

#include <event2/event.h>

#include <utility>

namespace sluice {

LoopMailbox::LoopMailbox(event_base* base)
    : ready_(event_new(base, -1, 0, &LoopMailbox::RunPosted, this)) {}

LoopMailbox::~LoopMailbox() { event_free(ready_); }

void LoopMailbox::Post(Task task) {
  {
    MutexLock lock(mu_);
    tasks_.push_back(std::move(task));
  }
  event_active(ready_, EV_TIMEOUT, 0);
}

void LoopMailbox::RunPosted(int /*fd*/, short /*what*/, void* self) {
  auto* mailbox = static_cast<LoopMailbox*>(self);
  std::vector<Task> tasks;
  {
    MutexLock lock(mailbox->mu_);
    tasks.swap(mailbox->tasks_);
  }
  for (Task& task : tasks) {
    std::move(task)();
  }
}

}  // namespace sluice
