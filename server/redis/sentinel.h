// Finds a Sentinel-managed master and follows it, for RedisClient. On a thread of its own (the
// sentinels are asked with blocking connections, RedisSyncClient), in rounds:
//   1. ask the sentinels in turn `SENTINEL get-master-addr-by-name <master>`, starting with the
//      one that answered last; take the first address whose server says `ROLE` master (during a
//      failover a sentinel may still name the old master, or the new one may not be promoted
//      yet: then the next sentinel is asked, and the round is repeated after retry_interval);
//   2. report it (`on_master`) when it differs from the one reported last;
//   3. subscribe to `+switch-master` on that sentinel and report the new master a failover
//      names; a new round begins when the subscription fails, when AskAgain is called (the
//      client lost a connection to the master), or after recheck_interval.
// TLS and the sentinels' credentials as the client's options say; the master's ROLE is asked
// with the master's credentials.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/time/time.h"
#include "server/common/mutex.h"
#include "server/redis/sentinel_options.h"
#include "server/redis/socket.h"
#include "server/redis/tls_context.h"

namespace sluice {

class RedisSyncClient;

struct SentinelWatcherOptions {
  RedisSentinelOptions sentinel{};
  // TLS to the sentinels and to the master (null: plain).
  std::shared_ptr<TlsClientContext> tls{};
  // The master's credentials, for its ROLE.
  std::string username{};
  std::string password{};
  // Bounds each connect and each command.
  absl::Duration timeout = absl::Seconds(1);
  // Between rounds that found no master: while the master is unreachable, the sentinels are
  // asked this often until they name one that answers as master (a promoted replica is used
  // within about this long of Sentinel naming it, even if its +switch-master is missed).
  absl::Duration retry_interval = absl::Milliseconds(100);
  // A new round even when nothing happened, in case a message was missed.
  absl::Duration recheck_interval = absl::Seconds(10);
};

class SentinelWatcher {
 public:
  // `on_master` runs on the watcher's thread with each new master (the first one too).
  SentinelWatcher(SentinelWatcherOptions options,
                  absl::AnyInvocable<void(const RedisEndpoint&)> on_master);
  // Stop()s.
  ~SentinelWatcher();
  SentinelWatcher(const SentinelWatcher&) = delete;
  SentinelWatcher& operator=(const SentinelWatcher&) = delete;

  void Start();
  // Stops the thread and waits for it: at once while it listens, or after the connect or
  // command it is blocked in (each bounded by the timeout). Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);
  // Begins a new round soon. Any thread.
  void AskAgain() ABSL_LOCKS_EXCLUDED(mu_);

  // Rounds that found a master, and masters reported (for tests and logs).
  int rounds_found() const ABSL_LOCKS_EXCLUDED(mu_);
  int masters_reported() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Run();
  // One round of asking: the confirmed master and the index of the sentinel that named it.
  std::optional<std::pair<RedisEndpoint, size_t>> FindMaster();
  // Connects to sentinel `index` and authenticates; null (logged) on failure.
  std::unique_ptr<RedisSyncClient> ConnectSentinel(size_t index);
  bool IsMaster(const RedisEndpoint& endpoint, std::string* why);
  // Listens on `sentinel` for +switch-master until a new round is due.
  void Listen(RedisSyncClient& sentinel);
  void Report(const RedisEndpoint& master) ABSL_LOCKS_EXCLUDED(mu_);
  // Sleeps up to `d`; false if stopped meanwhile.
  bool Sleep(absl::Duration d) ABSL_LOCKS_EXCLUDED(mu_);
  bool stopped() const ABSL_LOCKS_EXCLUDED(mu_);
  // Takes the AskAgain request, if any.
  bool TakeAskAgain() ABSL_LOCKS_EXCLUDED(mu_);

  const SentinelWatcherOptions options_;
  absl::AnyInvocable<void(const RedisEndpoint&)> on_master_;
  std::thread thread_;
  size_t next_sentinel_ = 0;  // the watcher thread's
  std::optional<RedisEndpoint> reported_;  // the watcher thread's

  mutable Mutex mu_;
  CondVar wake_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool ask_again_ ABSL_GUARDED_BY(mu_) = false;
  int rounds_found_ ABSL_GUARDED_BY(mu_) = 0;
  int masters_reported_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace sluice
