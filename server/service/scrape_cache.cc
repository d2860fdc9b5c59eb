#include "server/service/scrape_cache.h"

#include <algorithm>
#include <utility>

namespace sluice {

ScrapeCache::ScrapeCache(std::function<std::string()> render, Options options,
                         const Clock& clock)
    : render_(std::move(render)), options_(options), clock_(clock) {}

ScrapeCache::~ScrapeCache() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  work_.NotifyAll();
  if (worker_.joinable()) {
    worker_.join();
  }
}

int64_t ScrapeCache::renders() const {
  MutexLock lock(mu_);
  return renders_;
}

int64_t ScrapeCache::reused() const {
  MutexLock lock(mu_);
  return reused_;
}

size_t ScrapeCache::LivePages() {
  given_.erase(std::remove_if(given_.begin(), given_.end(),
                              [](const std::weak_ptr<const std::string>& page) {
                                return page.expired();
                              }),
               given_.end());
  // The newest is among them: it is held here, and was given out when it was made.
  return given_.size();
}

void ScrapeCache::Get(Done done) {
  Page page;
  {
    MutexLock lock(mu_);
    const bool fresh = newest_ != nullptr &&
                       clock_.MonotonicMicros() - newest_at_us_ <
                           absl::ToInt64Microseconds(options_.max_age);
    // A render is due, unless one is under way (then join it) or one more page would pass the
    // bound (then the newest page serves, however old).
    if (fresh || (waiters_.empty() && newest_ != nullptr &&
                  LivePages() >= std::max<size_t>(1, options_.max_live_pages))) {
      page = newest_;
      ++reused_;
    } else {
      waiters_.push_back(std::move(done));
      if (!worker_.joinable()) {
        worker_ = std::thread([this] { Run(); });
      }
      work_.NotifyOne();
      return;
    }
  }
  std::move(done)(std::move(page));
}

void ScrapeCache::Run() {
  MutexLock lock(mu_);
  while (true) {
    while (!stop_ && waiters_.empty()) {
      work_.Wait(mu_);
    }
    if (stop_) {
      return;
    }
    mu_.Unlock();
    Page page = std::make_shared<const std::string>(render_());
    mu_.Lock();
    ++renders_;
    newest_ = page;
    newest_at_us_ = clock_.MonotonicMicros();
    // Scrapes that asked while it rendered get it too: it is at most a render's time old.
    std::vector<Done> waiters = std::move(waiters_);
    waiters_.clear();
    if (stop_) {
      return;
    }
    given_.push_back(page);
    mu_.Unlock();
    for (Done& waiter : waiters) {
      std::move(waiter)(page);
    }
    page.reset();
    mu_.Lock();
  }
}

}  // namespace sluice
