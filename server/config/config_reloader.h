// Runs config reloads on a thread of their own, so that a slow load (a large config, or a
// hostile one up to the loader's budget) never holds up the thread that asks for it: in the
// server, the main loop, which also takes SIGTERM. One reload runs at a time; requests made
// while one runs are coalesced into a single run after it (forced if any of them was).
//
// Shutdown does not wait for a load in progress: Stop returns at once, the load finishes on its
// own (its result is dropped, never applied) and the process may exit before it does. A load is
// bounded (ConfigLoadOptions) but can still take seconds, and a terminating pod should not.
//
// Thread-safe: Request and Stop may be called from any thread.
#pragma once

#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "server/common/mutex.h"

namespace sluice {

class ConfigReloader {
 public:
  // Puts one load's outcome in force (swaps the config, updates metrics). Quick.
  using Apply = std::function<void()>;
  // One reload's slow half (see ConfigWatcher::Load): runs on the reloader's thread, without
  // the reloader's lock, and returns what puts its outcome in force, or nullptr when there is
  // nothing to do. It may outlive Stop and the reloader itself, so it must own (or share) what
  // it uses, and touch nothing its owner destroys at shutdown. The Apply it returns runs on the
  // same thread under the reloader's lock, and never once Stop has been called.
  using Load = std::function<Apply(bool force)>;

  explicit ConfigReloader(Load load);
  // Stop().
  ~ConfigReloader();
  ConfigReloader(const ConfigReloader&) = delete;
  ConfigReloader& operator=(const ConfigReloader&) = delete;

  // Asks for a reload; `force` reloads even if the files look unchanged (SIGHUP). Returns at
  // once. Ignored after Stop.
  void Request(bool force);

  // Stops the thread. Waits for an Apply in progress (quick), never for a Load: returns true if
  // the thread was idle and has ended, false if it was left to finish a load (whose result is
  // then dropped). Later calls return what the first one did.
  bool Stop();

 private:
  struct State {
    explicit State(Load load) : load(std::move(load)) {}

    const Load load;
    Mutex mu;
    CondVar wake;
    bool requested ABSL_GUARDED_BY(mu) = false;
    bool force ABSL_GUARDED_BY(mu) = false;  // of the requests not yet started
    bool loading ABSL_GUARDED_BY(mu) = false;
    bool stopped ABSL_GUARDED_BY(mu) = false;
  };

  // The thread's body; `state` is shared so that it outlives the reloader if the thread is
  // left to finish a load.
  static void Run(const std::shared_ptr<State>& state);

  const std::shared_ptr<State> state_;
  std::thread thread_;
  bool joined_ = false;  // what Stop returned; touched by Stop's caller only
};

}  // namespace sluice
