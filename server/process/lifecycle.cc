#include "server/process/lifecycle.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>

#include "absl/random/distributions.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/common/log_text.h"
#include "server/common/logging.h"
#include "server/common/status_macros.h"
#include "server/process/backend_wait.h"

namespace sluice {
namespace {

sigset_t ProcessSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  return signals;
}

// The signal `signal_fd` has ready; nullopt on a short read.
std::optional<int> ReadSignal(int signal_fd) {
  signalfd_siginfo info;
  if (read(signal_fd, &info, sizeof(info)) != static_cast<ssize_t>(sizeof(info))) {
    return std::nullopt;
  }
  return static_cast<int>(info.ssi_signo);
}

// An update is often several events (a ConfigMap writes a directory, then renames a symlink):
// waits until the path has been quiet for 50 ms, at most half a second.
void SettleChanges(ConfigChangeNotifier& notifier) {
  const absl::Time settle_by = absl::Now() + absl::Milliseconds(500);
  while (notifier.Drain() && absl::Now() < settle_by) {
    pollfd quiet = {notifier.fd(), POLLIN, 0};
    ::poll(&quiet, 1, 50);
  }
}

// inotify on --config when --config_watch; polling alone (a warning) when it cannot be had.
std::unique_ptr<ConfigChangeNotifier> WatchConfig(const ConfigSettings& config) {
  if (!config.watch) {
    return nullptr;
  }
  auto created = ConfigChangeNotifier::Create(config.path, config.recursive);
  if (!created.ok()) {
    SLUICE_LOG(WARNING) << "config changes are seen by polling only: "
                        << LogStatus(created.status());
    return nullptr;
  }
  return *std::move(created);
}

}  // namespace

void TakeProcessSignals() {
  signal(SIGPIPE, SIG_IGN);
  const sigset_t signals = ProcessSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
}

absl::StatusOr<std::unique_ptr<StopSignalWaiter>> StopSignalWaiter::Create(
    absl::Duration poll_interval, ConfigChangeNotifier* notifier,
    std::function<void(bool force)> request_reload) {
  const sigset_t signals = ProcessSignals();
  const int signal_fd = signalfd(-1, &signals, SFD_CLOEXEC);
  if (signal_fd < 0) {
    return absl::InternalError(absl::StrCat("signalfd: ", std::strerror(errno)));
  }
  return std::unique_ptr<StopSignalWaiter>(
      new StopSignalWaiter(signal_fd, poll_interval, notifier, std::move(request_reload)));
}

StopSignalWaiter::StopSignalWaiter(int signal_fd, absl::Duration poll_interval,
                                   ConfigChangeNotifier* notifier,
                                   std::function<void(bool force)> request_reload)
    : signal_fd_(signal_fd),
      poll_interval_(poll_interval),
      notifier_(notifier),
      request_reload_(std::move(request_reload)),
      next_poll_(absl::Now() + poll_interval) {}

StopSignalWaiter::~StopSignalWaiter() { close(signal_fd_); }

std::optional<int> StopSignalWaiter::WaitUntil(absl::Time deadline) {
  // The poll stays as a fallback for file systems inotify does not see into.
  const bool polling = poll_interval_ > absl::ZeroDuration();
  while (true) {
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return std::nullopt;
    }
    pollfd fds[2] = {{signal_fd_, POLLIN, 0}, {notifier_ ? notifier_->fd() : -1, POLLIN, 0}};
    const absl::Time wake = std::min(deadline, polling ? next_poll_ : now + absl::Hours(1));
    const absl::Duration wait =
        std::min(std::max(wake - now, absl::ZeroDuration()), absl::Hours(1));
    // Rounded up, so that a wait does not end a little before its deadline and spin.
    const int timeout_ms =
        static_cast<int>(absl::ToInt64Milliseconds(absl::Ceil(wait, absl::Milliseconds(1))));
    const int ready = ::poll(fds, 2, timeout_ms);
    if (ready > 0 && (fds[0].revents & POLLIN) != 0) {
      const std::optional<int> signal = ReadSignal(signal_fd_);
      if (!signal.has_value()) {
        continue;
      }
      if (*signal == SIGHUP) {
        request_reload_(/*force=*/true);
        continue;
      }
      return *signal;
    }
    if (ready > 0 && (fds[1].revents & POLLIN) != 0) {
      SettleChanges(*notifier_);
      request_reload_(/*force=*/false);
      continue;
    }
    if (polling && absl::Now() >= next_poll_) {
      request_reload_(/*force=*/false);
      next_poll_ = absl::Now() + poll_interval_;
    }
  }
}

int StopSignalWaiter::Wait() {
  // WaitUntil returns nullopt only once its deadline has passed, which this one never does.
  return *WaitUntil(absl::InfiniteFuture());
}

absl::StatusOr<bool> Lifecycle::AwaitFirstConfig() {
  if (!parts_.NeedsFirstConfig()) {
    return true;
  }
  SLUICE_LOG(INFO) << "waiting for the first config from the xDS server before serving "
                      "(--force_start_without_initial_config serves without one)";
  const sigset_t signals = ProcessSignals();
  const int signal_fd = signalfd(-1, &signals, SFD_CLOEXEC);
  if (signal_fd < 0) {
    return absl::InternalError(absl::StrCat("signalfd: ", std::strerror(errno)));
  }
  while (!parts_.WaitForConfig(absl::Milliseconds(100))) {
    pollfd fd = {signal_fd, POLLIN, 0};
    if (::poll(&fd, 1, 0) > 0) {
      const std::optional<int> signal = ReadSignal(signal_fd);
      if (signal.has_value() && *signal != SIGHUP) {
        SLUICE_LOG(INFO) << "signal " << *signal << " before the first config: stopping";
        close(signal_fd);
        return false;
      }
    }
  }
  close(signal_fd);
  return true;
}

absl::Status Lifecycle::Run() {
  ASSIGN_OR_RETURN(const bool configured, AwaitFirstConfig());
  if (!configured) {
    parts_.StopReloads();
    return absl::OkStatus();
  }
  // A backend that answers by now needs no wait: health is right from the first moment.
  if (parts_.BackendReady()) {
    parts_.BackendAnswered();
  }
  RETURN_IF_ERROR(Start());
  std::unique_ptr<ConfigChangeNotifier> notifier =
      settings_.config.source == ConfigSourceKind::kFiles ? WatchConfig(settings_.config) : nullptr;
  ASSIGN_OR_RETURN(std::unique_ptr<StopSignalWaiter> waiter,
                   StopSignalWaiter::Create(settings_.config.source == ConfigSourceKind::kFiles
                                                ? settings_.config.poll_interval
                                                : absl::ZeroDuration(),
                                            notifier.get(),
                                            [this](bool force) { parts_.RequestReload(force); }));
  std::optional<int> signal;
  if (settings_.wait_for_backend.enabled) {
    ASSIGN_OR_RETURN(signal, AwaitBackend(*waiter));
  }
  if (!signal.has_value()) {
    signal = waiter->Wait();
  }
  SLUICE_LOG(INFO) << "signal " << *signal << ": draining";
  Stop(Drain());
  return absl::OkStatus();
}

absl::StatusOr<std::optional<int>> Lifecycle::AwaitBackend(StopSignalWaiter& waiter) {
  absl::BitGen random;
  BackendWaitSchedule schedule(settings_.wait_for_backend, parts_.backend_started(),
                               [&random] { return absl::Uniform<double>(random, 0.0, 1.0); });
  while (!parts_.BackendReady()) {
    const absl::Time now = absl::Now();
    const absl::Duration elapsed = now - parts_.backend_started();
    const std::optional<absl::Duration> wait = schedule.AfterSilentCheck(now);
    if (!wait.has_value()) {
      return absl::UnavailableError(absl::StrCat(
          "backend ", parts_.backend_name(), " has not answered ",
          absl::FormatDuration(absl::Trunc(elapsed, absl::Milliseconds(1))),
          " after it began connecting (--wait_for_backend_max_elapsed=",
          absl::FormatDuration(settings_.wait_for_backend.max_elapsed), ", ",
          schedule.silent_checks(), " checks): stopping"));
    }
    SLUICE_LOG(WARNING) << "health unhealthy until backend " << parts_.backend_name()
                        << " answers (--wait_for_backend): silent "
                        << absl::FormatDuration(absl::Trunc(elapsed, absl::Milliseconds(1)))
                        << " after it began connecting; next check in "
                        << absl::FormatDuration(absl::Trunc(*wait, absl::Milliseconds(1)));
    if (std::optional<int> signal = waiter.WaitUntil(now + *wait)) {
      return signal;
    }
  }
  if (schedule.silent_checks() > 0) {
    SLUICE_LOG(INFO) << "backend " << parts_.backend_name() << " answered "
                     << absl::FormatDuration(absl::Trunc(
                            absl::Now() - parts_.backend_started(), absl::Milliseconds(1)))
                     << " after it began connecting: healthy (the failure policy answers if it "
                        "goes away later)";
  }
  parts_.BackendAnswered();
  return std::optional<int>();
}

absl::Status Lifecycle::Start() {
  RETURN_IF_ERROR(parts_.StartGrpc());
  parts_.FollowConfigHealth();
  RETURN_IF_ERROR(parts_.StartHttp());
  SLUICE_LOG(INFO) << "sluice serving: " << parts_.ServingSummary();
  return absl::OkStatus();
}

bool Lifecycle::Drain() {
  const bool reloads_stopped = parts_.StopReloads();
  parts_.http().SetDraining();
  parts_.SetHealth(false);
  // Envoys holding quota assignments fall back to their expired-assignment behaviour now, not
  // when their TTLs run out.
  parts_.DrainQuota();
  // Stop accepting, let in-flight calls finish (up to the grace period), then stop.
  parts_.grpc_server().Shutdown(std::chrono::system_clock::now() +
                                absl::ToChronoNanoseconds(settings_.shutdown_grace));
  parts_.grpc_server().Wait();
  parts_.StopResetFollower();
  for (RedisBackend* redis : parts_.redis_backends()) {
    // Completes any /json call still waiting on Redis before the HTTP loop goes away.
    redis->Stop();
  }
  if (parts_.memcached_backend() != nullptr) {
    parts_.memcached_backend()->Stop();
  }
  parts_.http().Stop();
  return reloads_stopped;
}

void Lifecycle::Stop(bool reloads_stopped) {
  if (!reloads_stopped) {
    // A config load is still running on the reloader's thread: exit without waiting for it,
    // and without running static destructors under it.
    SLUICE_LOG(INFO) << "stopped (a config reload still loading was abandoned)";
    std::fflush(nullptr);
    std::_Exit(0);
  }
  SLUICE_LOG(INFO) << "stopped";
}

}  // namespace sluice
