// The server's life once its parts are built (assembly.h), on the main thread:
//   first config: with --config_source=xds and no --force_start_without_initial_config,
//           nothing listens until the management server's first valid snapshot is in force;
//           SIGTERM or SIGINT meanwhile stops the process.
//   start:  gRPC listens and its health follows the config in force; HTTP listens;
//           "sluice serving: ..." is logged.
//   backend: with --wait_for_backend and a backend that has not answered yet, health stays
//           unhealthy (calls are answered, by the failure policy) while the backend is checked
//           on BackendWaitSchedule's times; its first answer makes health follow the config
//           alone. Past --wait_for_backend_max_elapsed, Run returns an error (the process exits
//           1, as envoyproxy/ratelimit panics then). SIGTERM or SIGINT meanwhile drains and
//           stops as below; reloads go on.
//   reload: SIGHUP forces a reload; a change under --config that inotify sees (--config_watch)
//           and every --config_poll_interval ask for one. ConfigReloader runs them on its own
//           thread, so SIGTERM is taken however long a load takes.
//   drain:  on SIGTERM or SIGINT: no reload is applied any more (one still loading is
//           abandoned); /healthz answers 503 and gRPC health NOT_SERVING; gRPC stops accepting
//           and in-flight calls get --shutdown_grace; the Redis backends stop (completing /json
//           calls still waiting on them); HTTP stops.
//   stop:   "stopped" is logged and Run returns. With a load abandoned, the process exits 0 at
//           once (_Exit), running no destructor under the load.
//
// Not thread-safe: the main thread only.
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/config/config_notifier.h"
#include "server/process/assembly.h"
#include "server/settings/settings.h"

namespace sluice {

// Ignores SIGPIPE (a write to a socket whose peer has gone, by OpenSSL or libevent with
// write(2), then fails with EPIPE instead of ending the process) and blocks SIGINT, SIGTERM
// and SIGHUP, so that only the signalfds read them (StopSignalWaiter's, and Lifecycle's while it
// waits for the first config).
// REQUIRES: before any thread starts (threads inherit the calling thread's mask).
void TakeProcessSignals();

// Waits for SIGTERM or SIGINT; meanwhile calls `request_reload(true)` on SIGHUP,
// `request_reload(false)` when `notifier` (optional) sees a change (once the path has been quiet
// for 50 ms, or after at most half a second of changes) and every `poll_interval` (zero: never).
// REQUIRES: SIGINT, SIGTERM and SIGHUP blocked in every thread (TakeProcessSignals).
class StopSignalWaiter {
 public:
  // An error when the signalfd cannot be made. `notifier` and `request_reload` must outlive the
  // waiter.
  static absl::StatusOr<std::unique_ptr<StopSignalWaiter>> Create(
      absl::Duration poll_interval, ConfigChangeNotifier* notifier,
      std::function<void(bool force)> request_reload);
  ~StopSignalWaiter();
  StopSignalWaiter(const StopSignalWaiter&) = delete;
  StopSignalWaiter& operator=(const StopSignalWaiter&) = delete;

  // The number of the stop signal once one comes, or nullopt once `deadline` passes first.
  std::optional<int> WaitUntil(absl::Time deadline);
  // WaitUntil with no deadline: the number of the stop signal.
  int Wait();

 private:
  StopSignalWaiter(int signal_fd, absl::Duration poll_interval, ConfigChangeNotifier* notifier,
                   std::function<void(bool force)> request_reload);

  const int signal_fd_;
  const absl::Duration poll_interval_;
  ConfigChangeNotifier* const notifier_;
  const std::function<void(bool force)> request_reload_;
  absl::Time next_poll_;
};

class Lifecycle {
 public:
  // `parts` and `settings` must outlive the lifecycle.
  Lifecycle(Assembly& parts, const Settings& settings) : parts_(parts), settings_(settings) {}

  // Start, reloads until SIGTERM or SIGINT, drain, stop. OK once stopped (or does not return,
  // see "stop" above); an error, naming what failed, when a listener or the signalfd cannot
  // be had (the parts are then left for their destructors).
  absl::Status Run();

 private:
  // True once there is a config to serve (at once unless Assembly::NeedsFirstConfig); false
  // when a stop signal came first.
  absl::StatusOr<bool> AwaitFirstConfig();
  absl::Status Start();
  // With --wait_for_backend: until the backend has answered once (nullopt), or a stop signal
  // comes first (its number). An error once --wait_for_backend_max_elapsed has passed.
  absl::StatusOr<std::optional<int>> AwaitBackend(StopSignalWaiter& waiter);
  // True if no reload was left loading.
  bool Drain();
  void Stop(bool reloads_stopped);

  Assembly& parts_;
  const Settings& settings_;
};

}  // namespace sluice
