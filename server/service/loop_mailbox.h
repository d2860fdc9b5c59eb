// Runs closures posted from any thread on the thread of one libevent loop, in the order posted:
// how work finished elsewhere (a rendered page, say) gets back to the HTTP thread that owns the
// connection it answers.
// Post is thread-safe; construction and destruction happen while the loop is not running.
#pragma once

#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "server/common/mutex.h"

struct event;
struct event_base;

namespace sluice {

class LoopMailbox {
 public:
  using Task = absl::AnyInvocable<void() &&>;

  // `base` must outlive the mailbox.
  explicit LoopMailbox(event_base* base);
  // Closures not run yet are dropped. REQUIRES: nothing posts any more.
  ~LoopMailbox();
  LoopMailbox(const LoopMailbox&) = delete;
  LoopMailbox& operator=(const LoopMailbox&) = delete;

  // `task` runs on the loop's thread, soon.
  void Post(Task task);

 private:
  static void RunPosted(int fd, short what, void* self);

  event* ready_;
  Mutex mu_;
  std::vector<Task> tasks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice
