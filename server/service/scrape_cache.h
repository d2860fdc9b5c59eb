// A metrics page rendered on a thread of its own, at most once per `max_age`, and shared by
// every scrape that asks meanwhile. A page with every per-rule series can take many milliseconds
// to render and megabytes to hold, and the event threads that serve it also answer health
// checks and decisions: they never render, and concurrent scrapers share one page rather than
// each making, and buffering, their own.
//
// A page stays alive while a connection still sends it. At most `max_live_pages` are alive at
// once: past that, a scrape gets the newest page however old it is, so clients that ask and then
// read slowly (or never) cannot make the process hold more than that many pages (the HTTP
// listeners also cut a connection whose answer is not written in time: http_connections.h).
//
// Thread-safe. Callbacks run on the caller's thread when a page can be given at once,
// otherwise on the renderer's thread once rendered.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/time/time.h"
#include "server/common/clock.h"
#include "server/common/mutex.h"

namespace sluice {

class ScrapeCache {
 public:
  using Page = std::shared_ptr<const std::string>;
  using Done = absl::AnyInvocable<void(Page) &&>;

  struct Options {
    // A page younger than this is given as it is.
    absl::Duration max_age = absl::Seconds(1);
    // Pages alive at once (the newest included) before a scrape is given the newest, stale or
    // not. At least 1.
    size_t max_live_pages = 3;
  };

  // `render` makes a page; it runs on the renderer's thread. `clock` must outlive the cache.
  ScrapeCache(std::function<std::string()> render, Options options,
              const Clock& clock = RealClock::Get());
  // Waits for a render in progress; callbacks of renders not done are dropped, never called.
  ~ScrapeCache();
  ScrapeCache(const ScrapeCache&) = delete;
  ScrapeCache& operator=(const ScrapeCache&) = delete;

  // Calls `done` with a page: at once, on this thread, if the newest is fresh or no other page
  // may be made now; otherwise on the renderer's thread once a new one is rendered (scrapes that
  // ask meanwhile wait for the same render).
  void Get(Done done);

  // Renders so far; pages given without a render (fresh, or at the live-page bound).
  int64_t renders() const;
  int64_t reused() const;

 private:
  void Run();
  // Pages alive now, the newest included.
  size_t LivePages() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::function<std::string()> render_;
  const Options options_;
  const Clock& clock_;
  mutable Mutex mu_;
  CondVar work_;
  Page newest_ ABSL_GUARDED_BY(mu_);
  int64_t newest_at_us_ ABSL_GUARDED_BY(mu_) = 0;
  // Every page made that may still be alive, oldest first, the newest last (expired ones are
  // pruned when counted).
  std::vector<std::weak_ptr<const std::string>> given_ ABSL_GUARDED_BY(mu_);
  // Scrapes waiting for the render in progress or about to start.
  std::vector<Done> waiters_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int64_t renders_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t reused_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread worker_;  // started by the first Get that has to render
};

}  // namespace sluice
