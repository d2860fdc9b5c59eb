#include "server/config/config_reloader.h"

#include <utility>

namespace sluice {

ConfigReloader::ConfigReloader(Load load) : state_(std::make_shared<State>(std::move(load))) {
  thread_ = std::thread([state = state_] { Run(state); });
}

ConfigReloader::~ConfigReloader() { Stop(); }

void ConfigReloader::Request(bool force) {
  MutexLock lock(state_->mu);
  if (state_->stopped) {
    return;
  }
  state_->requested = true;
  state_->force = state_->force || force;
  state_->wake.NotifyOne();
}

bool ConfigReloader::Stop() {
  if (!thread_.joinable()) {
    return joined_;
  }
  bool loading = false;
  {
    MutexLock lock(state_->mu);
    state_->stopped = true;
    loading = state_->loading;
    state_->wake.NotifyOne();
  }
  if (loading) {
    thread_.detach();
    joined_ = false;
  } else {
    thread_.join();  // idle, or about to see `stopped` before it starts anything
    joined_ = true;
  }
  return joined_;
}

void ConfigReloader::Run(const std::shared_ptr<State>& state) {
  while (true) {
    bool force = false;
    {
      MutexLock lock(state->mu);
      while (!state->requested && !state->stopped) {
        state->wake.Wait(state->mu);
      }
      if (state->stopped) {
        return;
      }
      force = state->force;
      state->requested = false;
      state->force = false;
      state->loading = true;
    }
    Apply apply = state->load(force);
    MutexLock lock(state->mu);
    state->loading = false;
    if (state->stopped) {
      return;  // dropped: what it would change may be gone
    }
    if (apply) {
      apply();
    }
  }
}

}  // namespace sluice
