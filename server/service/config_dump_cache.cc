#include "server/service/config_dump_cache.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace sluice {

std::string CapConfigDump(std::string dump, size_t max_bytes) {
  if (dump.size() <= max_bytes) {
    return dump;
  }
  const size_t total = dump.size();
  size_t keep = max_bytes;
  if (max_bytes > 0) {
    const size_t last_newline = dump.rfind('\n', max_bytes - 1);
    if (last_newline != std::string::npos) {
      keep = last_newline + 1;
    }
  }
  dump.resize(keep);
  absl::StrAppend(&dump, "... truncated: ", keep, " of ", total,
                  " bytes shown; raise --config_dump_max_bytes to see them all\n");
  return dump;
}

ConfigDumpCache::~ConfigDumpCache() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  work_.NotifyAll();
  if (worker_.joinable()) {
    worker_.join();
  }
}

int64_t ConfigDumpCache::renders() const {
  MutexLock lock(mu_);
  return renders_;
}

void ConfigDumpCache::Get(std::shared_ptr<const Config> config, Done done) {
  if (config == nullptr) {
    std::move(done)(std::make_shared<const std::string>());
    return;
  }
  Page page;
  {
    MutexLock lock(mu_);
    if (cached_page_ != nullptr && cached_config_.lock() == config) {
      page = cached_page_;
    } else if (rendering_ != nullptr && rendering_->config == config) {
      rendering_->waiters.push_back(std::move(done));
      return;
    } else {
      for (Job& job : queue_) {
        if (job.config == config) {
          job.waiters.push_back(std::move(done));
          return;
        }
      }
      queue_.push_back(Job{std::move(config), {}});
      queue_.back().waiters.push_back(std::move(done));
      if (!worker_.joinable()) {
        worker_ = std::thread([this] { Run(); });
      }
      work_.NotifyOne();
      return;
    }
  }
  std::move(done)(std::move(page));
}

void ConfigDumpCache::Run() {
  MutexLock lock(mu_);
  while (true) {
    while (!stop_ && queue_.empty()) {
      work_.Wait(mu_);
    }
    if (stop_) {
      return;
    }
    Job job = std::move(queue_.front());
    queue_.pop_front();
    rendering_ = &job;
    mu_.Unlock();
    Page page = std::make_shared<const std::string>(CapConfigDump(job.config->Dump(), max_bytes_));
    mu_.Lock();
    rendering_ = nullptr;
    ++renders_;
    cached_config_ = job.config;
    cached_page_ = page;
    std::vector<Done> waiters = std::move(job.waiters);
    if (stop_) {
      return;
    }
    mu_.Unlock();
    for (Done& waiter : waiters) {
      std::move(waiter)(page);
    }
    mu_.Lock();
  }
}

}  // namespace sluice
