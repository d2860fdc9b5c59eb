// The /config page (Config::Dump, every rule one per line), rendered on a thread of its own and
// kept for the config snapshot it lists: a large config takes seconds to render (37 MB in
// 2.6 s), and the HTTP thread that serves the page also answers health checks and decisions.
// Renders run one at a time; callers asking for the same snapshot share its render. The page is
// cut, at a line boundary, to a size cap, with a last line saying so.
// Thread-safe. Callbacks run on the caller's thread when the page is ready at once, otherwise
// on the renderer's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "server/common/mutex.h"
#include "server/config/config.h"

namespace sluice {

// `dump` if it is at most `max_bytes` long; otherwise its longest prefix of whole lines within
// `max_bytes` (cut mid-line only if the first line is longer), followed by a line saying how
// much was shown and naming --config_dump_max_bytes.
std::string CapConfigDump(std::string dump, size_t max_bytes);

class ConfigDumpCache {
 public:
  using Page = std::shared_ptr<const std::string>;
  using Done = absl::AnyInvocable<void(Page) &&>;

  explicit ConfigDumpCache(size_t max_bytes) : max_bytes_(max_bytes) {}
  // Waits for a render in progress; callbacks of renders not done are dropped, never called.
  ~ConfigDumpCache();
  ConfigDumpCache(const ConfigDumpCache&) = delete;
  ConfigDumpCache& operator=(const ConfigDumpCache&) = delete;

  // Calls `done` with the page of `config` (empty for nullptr): at once, on this thread, if it
  // is the page rendered last; otherwise on the renderer's thread once rendered.
  void Get(std::shared_ptr<const Config> config, Done done);

  // Renders so far (each a call of Config::Dump).
  int64_t renders() const;

 private:
  struct Job {
    std::shared_ptr<const Config> config;
    std::vector<Done> waiters;
  };

  void Run();

  const size_t max_bytes_;
  mutable Mutex mu_;
  CondVar work_;
  // The page rendered last, and the config it lists (not kept alive by the cache).
  std::weak_ptr<const Config> cached_config_ ABSL_GUARDED_BY(mu_);
  Page cached_page_ ABSL_GUARDED_BY(mu_);
  std::deque<Job> queue_ ABSL_GUARDED_BY(mu_);
  // The job being rendered, whose waiters new callers for its config join.
  Job* rendering_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int64_t renders_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread worker_;  // started by the first Get that has to render
};

}  // namespace sluice
