#include "server/redis/redis_client.h"

#include "server/redis/address.h"

#include <algorithm>
#include <charconv>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/common/failure_reason.h"
#include "server/common/logging.h"
#include "server/redis/node_call_trace.h"
#include "server/redis/node_metrics.h"

namespace sluice {
namespace {

absl::Status Validate(const RedisClientOptions& options, bool own_loops) {
  if (own_loops && options.io_threads < 1) {
    return absl::InvalidArgumentError("redis io_threads must be at least 1");
  }
  if (options.connections_per_thread < 1) {
    return absl::InvalidArgumentError("redis connections_per_thread must be at least 1");
  }
  if (options.db < 0) {
    return absl::InvalidArgumentError("redis db must not be negative");
  }
  if (options.connect_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("redis connect_timeout must be positive");
  }
  if (options.backoff_min <= absl::ZeroDuration() || options.backoff_max < options.backoff_min) {
    return absl::InvalidArgumentError("redis backoff needs 0 < backoff_min <= backoff_max");
  }
  if (options.stall_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("redis stall_timeout must not be negative");
  }
  if (options.breaker_failures < 0 || options.breaker_open <= absl::ZeroDuration() ||
      options.breaker_open_min <= absl::ZeroDuration() ||
      options.breaker_budget <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "redis breaker needs breaker_failures >= 0, and positive breaker_open, breaker_open_min "
        "and breaker_budget");
  }
  if (options.caller_write_horizon < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("redis caller_write_horizon must not be negative");
  }
  if (options.queue_grace < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("redis queue_grace must not be negative");
  }
  if (options.max_pending_commands < 1) {
    return absl::InvalidArgumentError("redis max_pending_commands must be at least 1");
  }
  if (!options.username.empty() && options.password.empty()) {
    return absl::InvalidArgumentError("a redis username needs a password");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisClient>> RedisClient::Create(RedisClientOptions options,
                                                                 const Clock& clock,
                                                                 RedisClientResources resources) {
  if (absl::Status status = Validate(options, resources.loops.empty()); !status.ok()) {
    return status;
  }
  RedisConnectionOptions connection_options;
  const bool sentinel = !options.sentinel.addresses.empty();
  if (sentinel) {
    // No address until the sentinels name the master; each connection checks it is one.
    if (options.sentinel.master.empty()) {
      return absl::InvalidArgumentError("redis sentinel: the master's name is missing");
    }
    for (const std::string& address : options.sentinel.addresses) {
      std::string host;
      int port = 0;
      if (absl::Status status = SplitHostPort(address, &host, &port); !status.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("redis sentinel address '", address, "': ", status.message()));
      }
    }
    connection_options.require_master = true;
    if (options.address.empty()) {
      options.address = absl::StrCat("sentinel:", options.sentinel.master);
    }
  } else if (IsUnixAddress(options.address)) {
    connection_options.unix_path = options.address.substr(kUnixAddressPrefix.size());
    if (connection_options.unix_path.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("redis address '", options.address, "' names no socket path"));
    }
  } else if (absl::Status status = SplitHostPort(options.address, &connection_options.host,
                                                 &connection_options.port);
             !status.ok()) {
    return status;
  }
  if (options.tls.enabled) {
    if (!connection_options.unix_path.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "redis address '", options.address, "': TLS is for TCP, not a unix socket"));
    }
    if (resources.tls != nullptr) {
      connection_options.tls = resources.tls;
    } else {
      absl::StatusOr<std::shared_ptr<TlsClientContext>> tls =
          TlsClientContext::Create(options.tls);
      if (!tls.ok()) {
        return tls.status();
      }
      connection_options.tls = *std::move(tls);
    }
  }
  connection_options.username = options.username;
  connection_options.password = options.password;
  connection_options.db = options.db;
  connection_options.connect_timeout_us = absl::ToInt64Microseconds(options.connect_timeout);
  connection_options.backoff_min_us = absl::ToInt64Microseconds(options.backoff_min);
  connection_options.backoff_max_us = absl::ToInt64Microseconds(options.backoff_max);
  connection_options.stall_timeout_us = absl::ToInt64Microseconds(options.stall_timeout);
  connection_options.max_pending_commands = options.max_pending_commands;
  connection_options.caller_write_horizon_us =
      absl::ToInt64Microseconds(options.caller_write_horizon);
  connection_options.queue_grace_us = absl::ToInt64Microseconds(options.queue_grace);

  std::unique_ptr<RedisClient> client(new RedisClient(std::move(options), clock));
  if (absl::Status status = client->Start(std::move(resources), std::move(connection_options));
      !status.ok()) {
    return status;
  }
  return client;
}

RedisClient::RedisClient(RedisClientOptions options, const Clock& clock)
    : options_(std::move(options)),
      clock_(clock),
      breaker_({.failure_threshold = options_.breaker_failures,
                .open_us = absl::ToInt64Microseconds(options_.breaker_open),
                .open_min_us = absl::ToInt64Microseconds(options_.breaker_open_min),
                .min_failing_us = absl::ToInt64Microseconds(options_.breaker_budget)},
               clock) {}

absl::Status RedisClient::Start(RedisClientResources resources,
                                RedisConnectionOptions connection_options) {
  scripts_ =
      resources.scripts != nullptr ? std::move(resources.scripts) : std::make_shared<ScriptCache>();
  RandomFn random = resources.random ? std::move(resources.random) : DefaultRandom();
  on_ready_change_ = std::move(resources.on_ready_change);
  breaker_.set_window_listener([this](int64_t window_us, bool answered) {
    // Short ones are a starved scheduler or one lost connection: the histogram has them.
    if (window_us >= 100000) {
      SLUICE_LOG_EVERY_SECONDS(WARNING, 1)
          << "redis " << options_.address << ": batches failed for "
          << absl::FormatDuration(absl::Trunc(absl::Microseconds(window_us), absl::Milliseconds(1)))
          << (answered ? " until the node answered again"
                       : " until its keys moved to another node");
    }
  });
  if (resources.loops.empty()) {
    for (int i = 0; i < options_.io_threads; ++i) {
      absl::StatusOr<std::unique_ptr<EventLoop>> loop =
          EventLoop::Create(absl::StrCat("redis-io-", i));
      if (!loop.ok()) {
        return loop.status();
      }
      loops_.push_back(loop->get());
      owned_loops_.push_back(*std::move(loop));
    }
  } else {
    loops_ = std::move(resources.loops);
  }

  // Connections are built on their own loop's thread: from then on nothing else touches them.
  size_t per_loop = static_cast<size_t>(options_.connections_per_thread);
  connections_.resize(loops_.size() * per_loop);
  // The breaker's probe runs on the first loop. The listener posts there: the failure that
  // opens the breaker is recorded on whichever loop its connection runs.
  breaker_.set_open_listener([this](int64_t probe_due_in_us) {
    if (stopped_.load(std::memory_order_acquire)) {
      return;
    }
    loops_[0]->Post([this, probe_due_in_us] {
      if (probe_timer_ != nullptr) {
        probe_timer_->Arm(probe_due_in_us);
      }
    });
  });
  if (!options_.sentinel.addresses.empty()) {
    // Made before the connections (which read sentinel_ when their readiness changes), started
    // after them.
    SentinelWatcherOptions watch;
    watch.sentinel = options_.sentinel;
    watch.tls = connection_options.tls;
    watch.username = options_.username;
    watch.password = options_.password;
    watch.timeout = options_.connect_timeout;
    sentinel_ = std::make_unique<SentinelWatcher>(
        std::move(watch), [this](const RedisEndpoint& master) { Retarget(master); });
  }
  RunOnEachLoop([&](size_t loop_index) {
    if (loop_index == 0) {
      probe_timer_ = std::make_unique<LoopTimer>(*loops_[0], [this] { OnProbeTimer(); });
    }
    for (size_t k = 0; k < per_loop; ++k) {
      auto connection =
          std::make_unique<RedisConnection>(*loops_[loop_index], connection_options, clock_,
                                            std::shared_ptr<const ScriptCache>(scripts_), random,
                                            [this](bool ready) { OnReadyChange(ready); },
                                            &breaker_, &call_latency_);
      connection->Start();
      connections_[loop_index * per_loop + k] = std::move(connection);
    }
  });
  if (sentinel_ != nullptr) {
    sentinel_->Start();  // after the connections: its reports retarget them
  }
  return absl::OkStatus();
}

void RedisClient::Retarget(const RedisEndpoint& master) {
  if (std::exchange(have_master_, true)) {
    // A new master (the watcher reports only changes): the breaker's failures were the old
    // one's.
    topology_changes_.fetch_add(1, std::memory_order_relaxed);
    breaker_.Reset();
  }
  for (size_t i = 0; i < loops_.size(); ++i) {
    // Not waited for: the watcher's thread goes back to listening. Stop stops the watcher
    // before it closes the connections, so these run first.
    loops_[i]->Post([this, i, master] {
      for (auto* connection : ConnectionsOn(i)) {
        (*connection)->Retarget(master);
      }
    });
  }
}

RedisClient::~RedisClient() {
  Stop();
  // Closed connections have nothing registered on their loop any more, but their timers still
  // belong to it: release them there.
  RunOnEachLoop([&](size_t loop_index) {
    if (loop_index == 0) {
      probe_timer_.reset();
    }
    for (auto* connection : ConnectionsOn(loop_index)) {
      connection->reset();
    }
  });
  owned_loops_.clear();
}

void RedisClient::RunOnEachLoop(const std::function<void(size_t loop_index)>& work) {
  Mutex mu;
  CondVar finished;
  size_t remaining = loops_.size();
  for (size_t i = 0; i < loops_.size(); ++i) {
    auto run = [&, i] {
      work(i);
      MutexLock lock(mu);
      if (--remaining == 0) {
        finished.NotifyAll();
      }
    };
    if (!loops_[i]->Post(run)) {
      run();  // the loop has stopped, so its thread is gone: this thread may act for it
    }
  }
  MutexLock lock(mu);
  while (remaining != 0) {
    finished.Wait(mu);
  }
}

void RedisClient::Execute(CommandBatch batch, int64_t deadline_monotonic_us, BatchCallback done) {
  if (!batch.traces().empty()) {
    done = TraceNodeCall(batch, options_.address, std::move(done));
  }
  // seq_cst pairs with Stop: either Stop sees this call in executing_ and waits for it, or this
  // call sees stopped_.
  executing_.fetch_add(1, std::memory_order_seq_cst);
  if (stopped_.load(std::memory_order_seq_cst)) {
    executing_.fetch_sub(1, std::memory_order_release);
    std::move(done)(
        absl::UnavailableError(absl::StrCat("redis ", options_.address, ": client stopped")), {});
    return;
  }
  if (!breaker_.Allow()) {
    // Failed on a loop thread, like every other failure: callers rely on `done` not running on
    // their own stack while the client runs. The status is built there too (see
    // RedisClusterClient::Fail on sharing a Status between threads under TSan). Posted before
    // executing_ drops, so Stop cannot have stopped the loop yet.
    auto* pending = new BatchCallback(std::move(done));
    auto fail = [this, pending] {
      std::unique_ptr<BatchCallback> callback(pending);
      std::move (*callback)(
          WithFailureReason(absl::UnavailableError(absl::StrCat(
                                "redis ", options_.address, ": circuit open after ",
                                options_.breaker_failures,
                                " failures in a row; Sluice probes it until it answers")),
                            FailureReason::kCircuitOpen),
          {});
    };
    if (!Pick()->loop().Post(fail)) {
      fail();  // the loop has stopped (a shared loop, stopped by its owner): fail here
    }
    executing_.fetch_sub(1, std::memory_order_release);
    return;
  }
  Pick()->Submit(std::move(batch), deadline_monotonic_us, std::move(done));
  executing_.fetch_sub(1, std::memory_order_release);
}

void RedisClient::OnProbeTimer() {
  if (stopped_.load(std::memory_order_acquire)) {
    return;
  }
  const int64_t due_in_us = breaker_.ProbeDueInMicros();
  if (due_in_us > 0) {
    probe_timer_->Arm(due_in_us);  // fired early, or the breaker opened again since
    return;
  }
  if (due_in_us < 0 || !breaker_.StartProbe()) {
    return;  // closed already (a late reply proved the node alive), or a probe is out
  }
  CommandBatch ping;
  ping.Add({"PING"});
  Pick()->Submit(std::move(ping),
                 clock_.MonotonicMicros() + absl::ToInt64Microseconds(options_.breaker_budget),
                 [this](absl::Status status, absl::Span<RedisReply>) { breaker_.ProbeDone(status); });
}

std::vector<std::unique_ptr<RedisConnection>*> RedisClient::ConnectionsOn(size_t loop_index) {
  std::vector<std::unique_ptr<RedisConnection>*> on_loop;
  size_t per_loop = static_cast<size_t>(options_.connections_per_thread);
  for (size_t k = loop_index * per_loop; k < (loop_index + 1) * per_loop; ++k) {
    // Fewer if Create failed half-way.
    if (k < connections_.size() && connections_[k] != nullptr) {
      on_loop.push_back(&connections_[k]);
    }
  }
  return on_loop;
}

RedisConnection* RedisClient::Pick() {
  size_t n = connections_.size();
  size_t start = static_cast<size_t>(next_connection_.fetch_add(1, std::memory_order_relaxed));
  for (size_t k = 0; k < n; ++k) {
    RedisConnection* connection = connections_[(start + k) % n].get();
    if (connection->ready()) {
      return connection;
    }
  }
  // None ready: this one fails the batch at once on its thread.
  return connections_[start % n].get();
}

absl::StatusOr<const RedisScript*> RedisClient::RegisterScript(std::string_view name,
                                                               std::string_view source) {
  return scripts_->Register(name, source);
}

void RedisClient::Refresh() {
  breaker_.Reset();
  for (size_t i = 0; i < loops_.size(); ++i) {
    loops_[i]->Post([this, i] {
      for (auto* connection : ConnectionsOn(i)) {
        (*connection)->ReconnectIfDown();
      }
    });
  }
}

void RedisClient::AppendClientMetrics(std::string* out) const {
  if (sentinel_ == nullptr) {
    return;
  }
  AppendTopologyChanges(topology_changes_.load(std::memory_order_relaxed), out);
}

void RedisClient::OnReadyChange(bool ready) {
  if (ready && breaker_.open() && !stopped_.load(std::memory_order_acquire)) {
    // A connection has just completed its handshake: the node answers. Probe now rather than
    // when the (possibly long, after failed probes) open period ends.
    breaker_.ExpediteProbe();
    loops_[0]->Post([this] {
      if (probe_timer_ != nullptr) {
        probe_timer_->Arm(0);
      }
    });
  }
  if (!ready && sentinel_ != nullptr && !stopped_.load(std::memory_order_acquire)) {
    sentinel_->AskAgain();  // the master may have moved
  }
  if (on_ready_change_ && !stopped_.load(std::memory_order_acquire)) {
    on_ready_change_(ready);
  }
  MutexLock lock(mu_);
  ready_count_ += ready ? 1 : -1;
  changed_.NotifyAll();
}

bool RedisClient::WaitUntilReady(absl::Duration timeout) {
  int all = static_cast<int>(connections_.size());
  // Clamped so that an infinite timeout does not overflow the clock arithmetic.
  auto deadline = std::chrono::steady_clock::now() +
                  absl::ToChronoMicroseconds(std::min(timeout, absl::Hours(24 * 365)));
  MutexLock lock(mu_);
  while (!stopping_ && ready_count_ != all && std::chrono::steady_clock::now() < deadline) {
    changed_.WaitUntil(mu_, deadline);
  }
  return !stopping_ && ready_count_ == all;
}

int RedisClient::ready_connections() const {
  MutexLock lock(mu_);
  return ready_count_;
}

void RedisClient::CollectNodeMetrics(std::vector<NodeMetrics>* out) const {
  NodeMetrics node;
  node.address = options_.address;
  node.ready_connections = ready_connections();
  for (const auto& connection : connections_) {
    const RedisConnectionStats stats = connection->stats();
    node.reconnects += stats.connects > 1 ? stats.connects - 1 : 0;
    node.timeouts += stats.deadline_exceeded;
  }
  SetBreakerMetrics(breaker_, &node);
  node.call_latency = call_latency_.snapshot();
  out->push_back(std::move(node));
}

RedisClientStats RedisClient::stats() const {
  RedisClientStats stats;
  stats.connections = static_cast<int>(connections_.size());
  stats.ready_connections = ready_connections();
  for (const auto& connection : connections_) {
    stats.totals += connection->stats();
  }
  stats.breaker_open = breaker_.open();
  stats.breaker_opens = breaker_.opens();
  stats.breaker_rejected = breaker_.rejected();
  return stats;
}

void RedisClient::Stop() {
  {
    MutexLock lock(mu_);
    if (stopping_) {
      while (!stop_done_) {
        changed_.Wait(mu_);
      }
      return;
    }
    stopping_ = true;
    changed_.NotifyAll();  // WaitUntilReady gives up
  }
  for (EventLoop* loop : loops_) {
    if (loop->IsLoopThread()) {
      SLUICE_LOG(FATAL) << "RedisClient::Stop called on one of its I/O threads";
    }
  }
  stopped_.store(true, std::memory_order_seq_cst);
  if (sentinel_ != nullptr) {
    sentinel_->Stop();  // nothing retargets the connections from here on
  }
  // Short: an Execute in this window is only pushing onto a queue.
  while (executing_.load(std::memory_order_seq_cst) != 0) {
    std::this_thread::yield();
  }
  // Every Submit has now posted its drain task, so each loop runs those before this Close.
  RunOnEachLoop([&](size_t loop_index) {
    for (auto* connection : ConnectionsOn(loop_index)) {
      (*connection)->Close();
    }
  });
  for (auto& loop : owned_loops_) {
    loop->Stop();
  }
  MutexLock lock(mu_);
  stop_done_ = true;
  changed_.NotifyAll();
}

}  // namespace sluice
