#include "server/memcached/memcached_client.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/common/failure_reason.h"
#include "server/common/logging.h"
#include "server/common/status_macros.h"
#include "server/memcached/server_placement.h"
#include "server/redis/address.h"

namespace sluice {

// One server: its connections (spread over the client's loops), its breaker and its latency.
// Created and started by the client; Stop()ped before it is destroyed, never on a loop thread.
// A thread's cached list (placement_) may hold a stopped node past the client's end: once
// stopped, its destructor touches nothing of the client's.
class MemcachedClient::Node {
 public:
  Node(std::string address, RedisEndpoint endpoint, std::vector<EventLoop*> loops,
       const MemcachedClientOptions& options, std::shared_ptr<TlsClientContext> tls,
       const Clock& clock, RandomFn random)
      : address_(std::move(address)),
        endpoint_(std::move(endpoint)),
        loops_(std::move(loops)),
        options_(options),
        tls_(std::move(tls)),
        clock_(clock),
        random_(std::move(random)),
        breaker_(CircuitBreakerOptions{options.breaker_failures,
                                       absl::ToInt64Microseconds(options.breaker_open),
                                       absl::ToInt64Microseconds(options.breaker_open_min),
                                       absl::ToInt64Microseconds(options.breaker_budget)},
                 clock) {}

  ~Node() { Stop(); }

  const std::string& address() const { return address_; }

  void Start() {
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
    MemcachedConnectionOptions base;
    base.endpoint = endpoint_;
    base.tls = tls_;
    base.connect_timeout_us = absl::ToInt64Microseconds(options_.connect_timeout);
    base.backoff_min_us = absl::ToInt64Microseconds(options_.backoff_min);
    base.backoff_max_us = absl::ToInt64Microseconds(options_.backoff_max);
    base.stall_timeout_us = absl::ToInt64Microseconds(options_.stall_timeout);
    base.queue_grace_us = absl::ToInt64Microseconds(options_.queue_grace);
    base.max_pending_commands = options_.max_pending_commands;
    const size_t count = static_cast<size_t>(std::max(1, options_.connections));
    connections_.resize(count);
    RunOnLoops([&](size_t loop_index) {
      if (loop_index == 0) {
        probe_timer_ = std::make_unique<LoopTimer>(*loops_[0], [this] { OnProbeTimer(); });
      }
      for (size_t k = loop_index; k < count; k += loops_.size()) {
        connections_[k] = std::make_unique<MemcachedConnection>(
            *loops_[loop_index], base, clock_, random_, &breaker_, &latency_,
            [this](bool ready) { OnReadyChange(ready); });
        connections_[k]->Start();
      }
    });
  }

  void Execute(MemcachedBatchPtr batch) {
    // seq_cst pairs with Stop (a store-load pattern): either Stop sees this call in executing_
    // and waits for it, or this call sees stopped_. acq_rel/acquire would let both miss.
    executing_.fetch_add(1, std::memory_order_seq_cst);
    if (stopped_.load(std::memory_order_seq_cst)) {
      executing_.fetch_sub(1, std::memory_order_release);
      Fail(std::move(batch), WithFailureReason(absl::UnavailableError(absl::StrCat(
                                                   "memcached ", address_, ": client stopped")),
                                               FailureReason::kConnection));
      return;
    }
    const size_t pick = Pick();
    EventLoop& loop = *loops_[pick % loops_.size()];
    MemcachedBatch* raw = batch.release();
    bool posted;
    if (!breaker_.Allow()) {
      posted = loop.Post([this, raw] {
        Fail(MemcachedBatchPtr(raw),
             WithFailureReason(
                 absl::UnavailableError(absl::StrCat(
                     "memcached ", address_, ": circuit breaker open after ",
                     options_.breaker_failures,
                     " failures in a row; Sluice probes it until it answers")),
                 FailureReason::kCircuitOpen));
      });
    } else {
      MemcachedConnection* connection = connections_[pick].get();
      posted = loop.Post([connection, raw] { connection->Dispatch(MemcachedBatchPtr(raw)); });
    }
    if (!posted) {
      Fail(MemcachedBatchPtr(raw),
           WithFailureReason(absl::UnavailableError(
                                 absl::StrCat("memcached ", address_, ": client stopped")),
                             FailureReason::kConnection));
    }
    executing_.fetch_sub(1, std::memory_order_release);
  }

  void Stop() {
    // seq_cst: Execute's pairing, seen from this side.
    if (stopped_.exchange(true, std::memory_order_seq_cst)) {
      return;
    }
    while (executing_.load(std::memory_order_seq_cst) > 0) {
      std::this_thread::yield();
    }
    RunOnLoops([&](size_t loop_index) {
      for (size_t k = loop_index; k < connections_.size(); k += loops_.size()) {
        if (connections_[k] != nullptr) {
          connections_[k]->Close();
          connections_[k].reset();
        }
      }
      if (loop_index == 0) {
        probe_timer_.reset();
      }
    });
  }

  int ready_connections() const { return ready_.load(std::memory_order_relaxed); }

  NodeMetrics Metrics() const {
    NodeMetrics metrics;
    metrics.address = address_;
    metrics.ready_connections = ready_connections();
    for (const auto& connection : connections_) {
      if (connection == nullptr) {
        continue;
      }
      const MemcachedConnectionStats stats = connection->stats();
      metrics.reconnects += stats.connects > 0 ? stats.connects - 1 : 0;
      metrics.timeouts += stats.timeouts;
    }
    SetBreakerMetrics(breaker_, &metrics);
    metrics.call_latency = latency_.snapshot();
    return metrics;
  }

 private:
  static void Fail(MemcachedBatchPtr batch, absl::Status status) {
    MemcachedBatch::Done done = std::move(batch->done);
    std::move(done)(std::move(status), {});
  }

  // A ready connection, round-robin; else any (it fails the batch at once on its loop).
  size_t Pick() {
    const size_t n = connections_.size();
    const size_t start = static_cast<size_t>(next_.fetch_add(1, std::memory_order_relaxed));
    for (size_t k = 0; k < n; ++k) {
      const MemcachedConnection* connection = connections_[(start + k) % n].get();
      if (connection != nullptr && connection->ready()) {
        return (start + k) % n;
      }
    }
    return start % n;
  }

  void OnReadyChange(bool ready) {
    ready_.fetch_add(ready ? 1 : -1, std::memory_order_relaxed);
    if (ready && breaker_.open() && !stopped_.load(std::memory_order_acquire)) {
      breaker_.ExpediteProbe();
      loops_[0]->Post([this] {
        if (probe_timer_ != nullptr) {
          probe_timer_->Arm(0);
        }
      });
    }
  }

  // On loops_[0]: sends the breaker's probe (a meta no-op) when it is due.
  void OnProbeTimer() {
    if (stopped_.load(std::memory_order_acquire)) {
      return;
    }
    const int64_t due_in_us = breaker_.ProbeDueInMicros();
    if (due_in_us > 0) {
      probe_timer_->Arm(due_in_us);
      return;
    }
    if (due_in_us < 0 || !breaker_.StartProbe()) {
      return;
    }
    auto probe = std::make_unique<MemcachedBatch>();
    AppendNoOp(&probe->commands);
    probe->count = 1;
    probe->submitted_us = clock_.MonotonicMicros();
    probe->deadline_us =
        probe->submitted_us + absl::ToInt64Microseconds(options_.breaker_budget);
    probe->done = [this](absl::Status status, std::vector<MetaReply>&&) {
      breaker_.ProbeDone(status);
    };
    const size_t pick = Pick();
    MemcachedConnection* connection = connections_[pick].get();
    MemcachedBatch* raw = probe.release();
    if (!loops_[pick % loops_.size()]->Post(
            [connection, raw] { connection->Dispatch(MemcachedBatchPtr(raw)); })) {
      Fail(MemcachedBatchPtr(raw), absl::UnavailableError("stopped"));
    }
  }

  // Runs `work(i)` on each loop i (inline when that loop no longer runs) and waits.
  void RunOnLoops(const std::function<void(size_t)>& work) {
    Mutex mu;
    CondVar done_cv;
    size_t left = loops_.size();
    for (size_t i = 0; i < loops_.size(); ++i) {
      auto task = [&, i] {
        work(i);
        MutexLock lock(mu);
        --left;
        done_cv.NotifyAll();
      };
      if (loops_[i]->IsLoopThread() || !loops_[i]->Post(task)) {
        task();
      }
    }
    MutexLock lock(mu);
    while (left > 0) {
      done_cv.Wait(mu);
    }
  }

  const std::string address_;
  const RedisEndpoint endpoint_;
  const std::vector<EventLoop*> loops_;
  const MemcachedClientOptions& options_;
  const std::shared_ptr<TlsClientContext> tls_;
  const Clock& clock_;
  RandomFn random_;
  MetricHistogram latency_;
  CircuitBreaker breaker_;
  std::unique_ptr<LoopTimer> probe_timer_;  // on loops_[0]
  // connections_[k] lives on loops_[k % loops_.size()].
  std::vector<std::unique_ptr<MemcachedConnection>> connections_;
  std::atomic<int> ready_{0};
  std::atomic<uint64_t> next_{0};
  std::atomic<bool> stopped_{false};
  std::atomic<int64_t> executing_{0};
};

namespace {

absl::StatusOr<RedisEndpoint> ParseServer(const std::string& address) {
  RedisEndpoint endpoint;
  if (IsUnixAddress(address)) {
    endpoint.unix_path = address.substr(kUnixAddressPrefix.size());
    if (endpoint.unix_path.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("memcached server '", address,
                                                     "' names no socket"));
    }
    return endpoint;
  }
  if (absl::Status split = SplitHostPort(address, &endpoint.host, &endpoint.port); !split.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("memcached server '", address, "' is not HOST:PORT or unix:PATH"));
  }
  return endpoint;
}

// The state of one Execute across its servers' batches.
struct Call {
  std::vector<MetaReply> replies;
  std::atomic<size_t> pending{0};
  Mutex mu;
  absl::Status failure ABSL_GUARDED_BY(mu);
  MemcachedClient::Done done;
};

void Finish(const std::shared_ptr<Call>& call) {
  absl::Status failure;
  {
    MutexLock lock(call->mu);
    failure = call->failure;
  }
  MemcachedClient::Done done = std::move(call->done);
  if (!failure.ok()) {
    std::move(done)(std::move(failure), {});
    return;
  }
  std::move(done)(absl::OkStatus(), std::move(call->replies));
}

}  // namespace

absl::StatusOr<std::unique_ptr<MemcachedClient>> MemcachedClient::Create(
    MemcachedClientOptions options, const Clock& clock, MemcachedClientResources resources) {
  if (options.servers.empty() == options.srv.empty()) {
    return absl::InvalidArgumentError("memcached: give the servers or an SRV name, not both");
  }
  if (options.io_threads < 1 || options.connections < 1) {
    return absl::InvalidArgumentError("memcached: io_threads and connections must be >= 1");
  }
  if (options.max_pending_commands < 1) {
    return absl::InvalidArgumentError("memcached: max_pending_commands must be >= 1");
  }
  std::unique_ptr<MemcachedClient> client(
      new MemcachedClient(std::move(options), clock, std::move(resources)));
  RETURN_IF_ERROR(client->Start());
  return client;
}

MemcachedClient::MemcachedClient(MemcachedClientOptions options, const Clock& clock,
                                 MemcachedClientResources resources)
    : options_(std::move(options)), clock_(clock), resources_(std::move(resources)) {
  if (resources_.resolver == nullptr) {
    resources_.resolver = std::make_shared<DnsSrvResolver>();
  }
  if (!resources_.random) {
    resources_.random = DefaultRandom();
  }
}

absl::Status MemcachedClient::Start() {
  if (options_.tls.enabled) {
    ASSIGN_OR_RETURN(tls_, TlsClientContext::Create(options_.tls));
  }
  std::vector<std::string> addresses = options_.servers;
  if (!options_.srv.empty()) {
    absl::StatusOr<std::vector<std::string>> found = LookupServers();
    if (!found.ok()) {
      return absl::Status(found.status().code(),
                          absl::StrCat("memcached: unable to fetch servers from SRV ",
                                       options_.srv, ": ", found.status().message()));
    }
    addresses = std::move(*found);
  }
  for (const std::string& address : addresses) {
    RETURN_IF_ERROR(ParseServer(address).status());
  }
  for (int i = 0; i < options_.io_threads; ++i) {
    ASSIGN_OR_RETURN(std::unique_ptr<EventLoop> loop,
                     EventLoop::Create(absl::StrCat("memcached-io-", i)));
    loops_.push_back(std::move(loop));
  }
  ASSIGN_OR_RETURN(std::shared_ptr<const Placement> first, MakePlacement(addresses));
  placement_.Store(std::move(first));
  SLUICE_LOG(INFO) << "memcached: servers " << absl::StrJoin(addresses, ",")
                   << (options_.srv.empty() ? "" : absl::StrCat(" (SRV ", options_.srv, ")"));
  if (!options_.srv.empty() && options_.srv_refresh > absl::ZeroDuration()) {
    refresher_ = std::thread([this] { RefreshLoop(); });
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> MemcachedClient::LookupServers() {
  ASSIGN_OR_RETURN(std::vector<std::string> found, resources_.resolver->Lookup(options_.srv));
  // The answer is the name server's to write: a bound on what one answer can make us build.
  if (found.size() > kMaxSrvTargets) {
    return absl::ResourceExhaustedError(absl::StrCat("the answer names ", found.size(),
                                                     " targets, more than the ", kMaxSrvTargets,
                                                     " Sluice takes"));
  }
  for (const std::string& address : found) {
    RETURN_IF_ERROR(ParseServer(address).status());
  }
  return found;
}

absl::StatusOr<std::shared_ptr<const MemcachedClient::Placement>> MemcachedClient::MakePlacement(
    const std::vector<std::string>& addresses) {
  std::shared_ptr<const Placement> current = placement();
  auto next = std::make_shared<Placement>();
  std::vector<EventLoop*> loops;
  for (const auto& loop : loops_) {
    loops.push_back(loop.get());
  }
  absl::flat_hash_map<std::string, std::shared_ptr<Node>> made;
  for (const std::string& address : addresses) {
    std::shared_ptr<Node> node;
    if (current != nullptr) {
      for (const auto& existing : current->nodes) {
        if (existing->address() == address) {
          node = existing;
          break;
        }
      }
    }
    if (node == nullptr) {
      auto found = made.find(address);
      if (found != made.end()) {
        node = found->second;  // listed twice: one server, weighing twice
      }
    }
    if (node == nullptr) {
      ASSIGN_OR_RETURN(RedisEndpoint endpoint, ParseServer(address));
      // Rotate the loops so that servers with one connection each spread over them.
      std::vector<EventLoop*> rotated = loops;
      std::rotate(rotated.begin(),
                  rotated.begin() + static_cast<std::ptrdiff_t>(
                                        next_loop_.fetch_add(1) % rotated.size()),
                  rotated.end());
      node = std::make_shared<Node>(address, std::move(endpoint), std::move(rotated), options_,
                                    tls_, clock_, resources_.random);
      node->Start();
      made.emplace(address, node);
    }
    if (std::find(next->unique_nodes.begin(), next->unique_nodes.end(), node.get()) ==
        next->unique_nodes.end()) {
      next->unique_nodes.push_back(node.get());
    }
    next->nodes.push_back(std::move(node));
  }
  return std::shared_ptr<const Placement>(std::move(next));
}

MemcachedClient::~MemcachedClient() { Stop(); }

void MemcachedClient::Execute(std::vector<MemcachedOp> ops, int64_t deadline_monotonic_us,
                              Done done) {
  if (ops.empty()) {
    std::move(done)(absl::OkStatus(), {});
    return;
  }
  // seq_cst pairs with Stop (a store-load pattern): either Stop sees this call in executing_ and
  // waits for it, or this call sees stopped_. acq_rel/acquire would let both miss.
  executing_.fetch_add(1, std::memory_order_seq_cst);
  if (stopped_.load(std::memory_order_seq_cst)) {
    executing_.fetch_sub(1, std::memory_order_release);
    std::move(done)(WithFailureReason(absl::UnavailableError("memcached: client stopped"),
                                      FailureReason::kConnection),
                    {});
    return;
  }
  const std::shared_ptr<const Placement> placement = this->placement();
  const size_t servers = placement->nodes.size();
  const int64_t now = clock_.MonotonicMicros();
  // Each server's batch, with its operations' indices.
  absl::flat_hash_map<Node*, size_t> batch_of;
  std::vector<std::pair<Node*, std::vector<size_t>>> batches;
  for (size_t i = 0; i < ops.size(); ++i) {
    Node* node = placement->nodes[PickServer(ops[i].key, servers)].get();
    auto [it, inserted] = batch_of.emplace(node, batches.size());
    if (inserted) {
      batches.emplace_back(node, std::vector<size_t>());
    }
    batches[it->second].second.push_back(i);
  }
  auto call = std::make_shared<Call>();
  call->replies.resize(ops.size());
  call->pending.store(batches.size(), std::memory_order_relaxed);
  call->done = std::move(done);
  for (auto& [node, indices] : batches) {
    auto batch = std::make_unique<MemcachedBatch>();
    for (size_t i : indices) {
      batch->commands.append(ops[i].command);
    }
    batch->count = indices.size();
    batch->deadline_us = deadline_monotonic_us;
    batch->submitted_us = now;
    batch->done = [call, indices = std::move(indices)](absl::Status status,
                                                       std::vector<MetaReply>&& replies) {
      if (status.ok()) {
        for (size_t k = 0; k < indices.size() && k < replies.size(); ++k) {
          call->replies[indices[k]] = std::move(replies[k]);
        }
      } else {
        MutexLock lock(call->mu);
        if (call->failure.ok()) {
          call->failure = std::move(status);
        }
      }
      if (call->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        Finish(call);
      }
    };
    node->Execute(std::move(batch));
  }
  executing_.fetch_sub(1, std::memory_order_release);
}

bool MemcachedClient::WaitUntilReady(absl::Duration timeout) {
  const absl::Time until = absl::Now() + timeout;
  while (true) {
    if (ready_servers() == servers()) {
      return true;
    }
    if (absl::Now() >= until) {
      return false;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
}

int MemcachedClient::ready_servers() const {
  std::shared_ptr<const Placement> current = placement();
  int ready = 0;
  if (current != nullptr) {
    for (const Node* node : current->unique_nodes) {
      ready += node->ready_connections() > 0 ? 1 : 0;
    }
  }
  return ready;
}

int MemcachedClient::servers() const {
  std::shared_ptr<const Placement> current = placement();
  return current == nullptr ? 0 : static_cast<int>(current->unique_nodes.size());
}

std::vector<std::string> MemcachedClient::server_addresses() const {
  std::vector<std::string> addresses;
  std::shared_ptr<const Placement> current = placement();
  if (current != nullptr) {
    for (const auto& node : current->nodes) {
      addresses.push_back(node->address());
    }
  }
  return addresses;
}

void MemcachedClient::CollectNodeMetrics(std::vector<NodeMetrics>* out) const {
  std::shared_ptr<const Placement> current = placement();
  if (current == nullptr) {
    return;
  }
  for (const Node* node : current->unique_nodes) {
    out->push_back(node->Metrics());
  }
}

absl::Status MemcachedClient::RefreshServers() {
  absl::StatusOr<std::vector<std::string>> found = LookupServers();
  srv_refreshes_.fetch_add(1, std::memory_order_relaxed);
  if (!found.ok()) {
    srv_failures_.fetch_add(1, std::memory_order_relaxed);
    SLUICE_LOG_EVERY_SECONDS(WARNING, 60)
        << "memcached: failed to refresh the servers of SRV " << options_.srv << ": "
        << found.status().message() << "; keeping " << absl::StrJoin(server_addresses(), ",");
    return found.status();
  }
  if (*found == server_addresses()) {
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(std::shared_ptr<const Placement> next, MakePlacement(*found));
  std::shared_ptr<const Placement> previous;
  {
    MutexLock lock(mu_);
    previous = placement_.Load();
    placement_.Store(next);
    for (const auto& node : previous->nodes) {
      if (std::find(next->nodes.begin(), next->nodes.end(), node) == next->nodes.end() &&
          std::find(retired_.begin(), retired_.end(), node) == retired_.end()) {
        retired_.push_back(node);
      }
    }
  }
  SLUICE_LOG(INFO) << "memcached: servers of SRV " << options_.srv << " now "
                   << absl::StrJoin(*found, ",");
  return absl::OkStatus();
}

void MemcachedClient::RefreshLoop() {
  while (true) {
    std::vector<std::shared_ptr<Node>> leaving;
    {
      MutexLock lock(mu_);
      const auto until = std::chrono::steady_clock::now() +
                         std::chrono::microseconds(absl::ToInt64Microseconds(options_.srv_refresh));
      while (!stopping_ && std::chrono::steady_clock::now() < until) {
        changed_.WaitUntil(mu_, until);
      }
      if (stopping_) {
        return;
      }
      // Servers that left at least an interval ago: every call that read a list naming them
      // has long posted its batch (one still racing this Stop fails cleanly, Node::Execute).
      // Not use_count(): threads keep the last list they read (placement_).
      leaving = std::move(retired_);
      retired_.clear();
    }
    for (const auto& node : leaving) {
      node->Stop();  // off the lock; a thread's old list may hold the stopped node a while
    }
    leaving.clear();
    RefreshServers().IgnoreError();
  }
}

void MemcachedClient::Stop() {
  // seq_cst: Execute's pairing, seen from this side.
  if (stopped_.exchange(true, std::memory_order_seq_cst)) {
    return;
  }
  while (executing_.load(std::memory_order_seq_cst) > 0) {
    std::this_thread::yield();
  }
  {
    MutexLock lock(mu_);
    stopping_ = true;
    changed_.NotifyAll();
  }
  if (refresher_.joinable()) {
    refresher_.join();
  }
  std::shared_ptr<const Placement> current;
  std::vector<std::shared_ptr<Node>> retired;
  {
    MutexLock lock(mu_);
    current = placement_.Load();
    retired = std::move(retired_);
  }
  if (current != nullptr) {
    for (const auto& node : current->nodes) {
      node->Stop();
    }
  }
  for (const auto& node : retired) {
    node->Stop();
  }
  for (auto& loop : loops_) {
    loop->Stop();
  }
}

}  // namespace sluice
