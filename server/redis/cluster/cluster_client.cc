#include "server/redis/cluster/cluster_client.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/common/failure_reason.h"
#include "server/common/log_text.h"
#include "server/common/logging.h"
#include "server/redis/address.h"
#include "server/redis/cluster/cluster_error.h"
#include "server/redis/cluster/hash_slot.h"
#include "server/redis/node_metrics.h"
#include "server/redis/reply.h"

namespace sluice {
namespace {

constexpr std::string_view kAsking = "*1\r\n$6\r\nASKING\r\n";

// The batch whose first Dispatch runs on this thread's stack inside Execute: a completion
// that happens there is posted to a loop instead, so that callers never see `done` inline.
thread_local const void* tls_executing_batch = nullptr;

absl::Status Validate(const RedisClusterClientOptions& options) {
  if (options.seeds.empty()) {
    return absl::InvalidArgumentError("redis cluster needs at least one seed address");
  }
  for (const std::string& seed : options.seeds) {
    if (IsUnixAddress(seed)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "redis cluster seed '", seed, "': a cluster is reached over TCP (HOST:PORT); unix "
          "sockets are for a standalone Redis"));
    }
    std::string host;
    int port = 0;
    if (absl::Status status = SplitHostPort(seed, &host, &port); !status.ok()) {
      return status;
    }
  }
  const RedisClientOptions& node = options.node;
  if (node.io_threads < 1) {
    return absl::InvalidArgumentError("redis io_threads must be at least 1");
  }
  if (node.connections_per_thread < 1) {
    return absl::InvalidArgumentError("redis connections_per_thread must be at least 1");
  }
  if (node.db != 0) {
    return absl::InvalidArgumentError("redis cluster has only db 0");
  }
  if (node.connect_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("redis connect_timeout must be positive");
  }
  if (node.backoff_min <= absl::ZeroDuration() || node.backoff_max < node.backoff_min) {
    return absl::InvalidArgumentError("redis backoff needs 0 < backoff_min <= backoff_max");
  }
  if (!node.username.empty() && node.password.empty()) {
    return absl::InvalidArgumentError("a redis username needs a password");
  }
  if (options.refresh_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("redis cluster refresh_interval must be positive");
  }
  if (options.min_refresh_gap < absl::ZeroDuration() ||
      options.min_refresh_gap > options.refresh_interval) {
    return absl::InvalidArgumentError(
        "redis cluster min_refresh_gap must be within [0, refresh_interval]");
  }
  if (options.outage_refresh_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("redis cluster outage_refresh_interval must be positive");
  }
  if (options.max_redirects < 0 || options.max_redirects > 100 || options.max_retries < 0 ||
      options.max_retries > 100) {
    return absl::InvalidArgumentError(
        "redis cluster max_redirects and max_retries must be within [0, 100]");
  }
  if (options.retry_backoff_min <= absl::ZeroDuration() ||
      options.retry_backoff_max < options.retry_backoff_min) {
    return absl::InvalidArgumentError(
        "redis cluster retry backoff needs 0 < retry_backoff_min <= retry_backoff_max");
  }
  return absl::OkStatus();
}

}  // namespace

// What routing reads: a slot map and the client of each of its masters.
struct RedisClusterClient::Routing {
  std::shared_ptr<const SlotMap> map;
  // clients[k] serves map->nodes()[k]; nullptr if its client could not be created.
  std::vector<RedisClient*> clients;

  RedisClient* ClientAt(std::string_view address) const {
    int node = map->FindNode(address);
    return node >= 0 ? clients[static_cast<size_t>(node)] : nullptr;
  }
};

// Per command of a batch. Only the path that currently holds the command (its sub-batch's
// callback, or its retry task) touches it; hand-offs go through RedisClient or DelayQueue,
// which order them.
struct RedisClusterClient::CommandState {
  uint8_t redirects = 0;
  uint8_t retries = 0;
  bool asking = false;   // send the next time as [ASKING, command]
  std::string redirect;  // where to send it next (MOVED/ASK); empty: where the slot map says
};

// One Execute call, shared by its sub-batches' callbacks and retry tasks.
struct RedisClusterClient::Batch {
  CommandBatch commands;
  BatchCallback done;
  int64_t deadline_us = 0;
  // replies[i] is written once, by the path that finalizes command i, before it decrements
  // `remaining`; so whoever brings `remaining` to zero sees every reply.
  std::vector<RedisReply> replies;
  std::unique_ptr<CommandState[]> states;
  std::atomic<size_t> remaining{0};
  std::atomic<bool> finished{false};
};

// A command of the batch inside a sub-batch: batch index and the position of its reply.
struct RedisClusterClient::Sent {
  uint32_t command;
  uint32_t reply;
};

struct RedisClusterClient::SubBatch {
  RedisClient* client = nullptr;
  CommandBatch commands;
  std::vector<Sent> sent;
};

absl::StatusOr<std::unique_ptr<RedisClusterClient>> RedisClusterClient::Create(
    RedisClusterClientOptions options, const Clock& clock, RandomFn random) {
  if (absl::Status status = Validate(options); !status.ok()) {
    return status;
  }
  std::shared_ptr<TlsClientContext> tls;
  if (options.node.tls.enabled) {
    absl::StatusOr<std::shared_ptr<TlsClientContext>> made =
        TlsClientContext::Create(options.node.tls);
    if (!made.ok()) {
      return made.status();
    }
    tls = *std::move(made);
  }
  std::unique_ptr<RedisClusterClient> client(new RedisClusterClient(
      std::move(options), clock, random ? random : DefaultRandom(), std::move(tls)));
  if (absl::Status status = client->Start(); !status.ok()) {
    return status;
  }
  return client;
}

RedisClusterClient::RedisClusterClient(RedisClusterClientOptions options, const Clock& clock,
                                       RandomFn random, std::shared_ptr<TlsClientContext> tls)
    : options_(std::move(options)),
      clock_(clock),
      random_(std::move(random)),
      tls_(std::move(tls)),
      loader_(SlotMapLoaderOptions{options_.node.username, options_.node.password,
                                   options_.node.connect_timeout, tls_}),
      scripts_(options_.scripts ? options_.scripts : std::make_shared<ScriptCache>()) {}

absl::Status RedisClusterClient::Start() {
  for (int i = 0; i < options_.node.io_threads; ++i) {
    absl::StatusOr<std::unique_ptr<EventLoop>> loop =
        EventLoop::Create(absl::StrCat("redis-io-", i));
    if (!loop.ok()) {
      return loop.status();
    }
    loops_.push_back(*std::move(loop));
  }
  retry_queue_ = std::make_unique<DelayQueue>(clock_, "redis-retry");
  refresh_thread_ = std::thread([this] { RefreshLoop(); });
  return absl::OkStatus();
}

RedisClusterClient::~RedisClusterClient() {
  Stop();
  // The loops have stopped, so each client releases its connections on this thread.
  std::unordered_map<std::string, std::unique_ptr<RedisClient>> clients;
  {
    MutexLock lock(clients_mu_);
    clients.swap(clients_);
  }
  clients.clear();
  retry_queue_.reset();
  loops_.clear();
}

// ---------------------------------------------------------------------------------------------
// The request path.

void RedisClusterClient::Execute(CommandBatch commands, int64_t deadline_monotonic_us,
                                 BatchCallback done) {
  // seq_cst pairs with Stop, as in RedisClient::Execute.
  executing_.fetch_add(1, std::memory_order_seq_cst);
  if (stopped_.load(std::memory_order_seq_cst)) {
    executing_.fetch_sub(1, std::memory_order_release);
    Bump(failed_batches_);
    std::move(done)(absl::UnavailableError("redis cluster: client stopped"), {});
    return;
  }
  auto batch = std::make_shared<Batch>();
  size_t n = commands.size();
  batch->commands = std::move(commands);
  batch->done = std::move(done);
  batch->deadline_us = deadline_monotonic_us;
  batch->replies.resize(n);
  batch->states = std::make_unique<CommandState[]>(n);
  batch->remaining.store(n, std::memory_order_relaxed);
  const void* outer = tls_executing_batch;
  tls_executing_batch = batch.get();
  if (n == 0) {
    Succeed(batch);
  } else {
    std::vector<uint32_t> all(n);
    std::iota(all.begin(), all.end(), 0u);
    Dispatch(batch, all);
  }
  tls_executing_batch = outer;
  executing_.fetch_sub(1, std::memory_order_release);
}

void RedisClusterClient::Dispatch(const std::shared_ptr<Batch>& batch,
                                  const std::vector<uint32_t>& commands) {
  if (batch->finished.load(std::memory_order_acquire)) {
    return;
  }
  std::shared_ptr<const Routing> routing = routing_.Load();
  if (routing == nullptr) {
    RequestRefresh();
    Fail(batch, absl::UnavailableError(
                    "redis cluster: no slot map yet (no node has answered CLUSTER SLOTS)"));
    return;
  }
  const SlotMap& map = *routing->map;
  // Few: one per master the batch touches.
  std::vector<SubBatch> subs;
  std::vector<uint32_t> waiting;
  std::string waiting_for;
  for (uint32_t i : commands) {
    CommandState& state = batch->states[i];
    RedisClient* client = nullptr;
    bool asking = false;
    if (!state.redirect.empty()) {
      client = routing->ClientAt(state.redirect);
      if (client == nullptr) {
        client = FindClient(state.redirect);
      }
      if (client == nullptr) {
        // A node no map named yet: the topology thread creates its client.
        RequestNode(state.redirect);
        waiting_for = state.redirect;
        waiting.push_back(i);
        continue;
      }
      asking = state.asking;
      state.redirect.clear();
      state.asking = false;
    } else {
      int node;
      if (batch->commands.has_routing_key(i)) {
        int slot = HashSlot(batch->commands.routing_key(i));
        node = map.NodeForSlot(slot);
        if (node < 0) {
          NoteTrouble();
          Fail(batch, absl::UnavailableError(
                          absl::StrCat("redis cluster: slot ", slot, " not served by any node")));
          return;
        }
      } else {
        // A published map always has a master (a map serving no slot is never published).
        node = static_cast<int>(next_keyless_.fetch_add(1, std::memory_order_relaxed) %
                                map.nodes().size());
      }
      client = routing->clients[static_cast<size_t>(node)];
      if (client == nullptr) {
        const std::string& address = map.nodes()[static_cast<size_t>(node)].address;
        RequestNode(address);
        waiting_for = address;
        waiting.push_back(i);
        continue;
      }
    }
    auto sub = std::find_if(subs.begin(), subs.end(),
                            [client](const SubBatch& s) { return s.client == client; });
    if (sub == subs.end()) {
      sub = subs.emplace(subs.end());
      sub->client = client;
    }
    if (asking) {
      sub->commands.AddFormatted(kAsking, nullptr);
    }
    sub->sent.push_back(Sent{i, static_cast<uint32_t>(sub->commands.size())});
    sub->commands.AddFrom(batch->commands, i);
  }
  if (!waiting.empty()) {
    RetryLater(batch, std::move(waiting), absl::StrCat("no connection to ", waiting_for, " yet"),
               FailureReason::kConnection);
  }
  for (SubBatch& sub : subs) {
    Send(batch, sub.client, std::move(sub));
  }
}

void RedisClusterClient::Send(const std::shared_ptr<Batch>& batch, RedisClient* client,
                              SubBatch sub) {
  sub.commands.CopyTracesFrom(batch->commands);
  client->Execute(std::move(sub.commands), batch->deadline_us,
                  [this, batch, client, sent = std::move(sub.sent)](
                      absl::Status status, absl::Span<RedisReply> replies) mutable {
                    OnReplies(batch, client, sent, std::move(status), replies);
                  });
}

void RedisClusterClient::OnReplies(const std::shared_ptr<Batch>& batch, RedisClient* client,
                                   std::vector<Sent>& sent, absl::Status status,
                                   absl::Span<RedisReply> replies) {
  if (cluster_down_seen_.load(std::memory_order_relaxed) && status.ok() && !replies.empty() &&
      !replies.front().is_error() && cluster_down_seen_.exchange(false, std::memory_order_relaxed)) {
    // A node serves commands again after CLUSTERDOWN: the cluster's state is ok again, which
    // (with full coverage required, Redis' default) means the failed master's slots have a new
    // master. Look now rather than at the next outage period. Checked before anything else:
    // the batch may have failed already on the dead node.
    urgent_refresh_.store(true, std::memory_order_relaxed);
    RequestRefresh();
  }
  if (batch->finished.load(std::memory_order_acquire)) {
    return;
  }
  if (!status.ok()) {
    if (FailureReasonOf(status) == FailureReason::kCircuitOpen) {
      // The node's breaker is open: waiting out the budget on retries would defeat it. Fail
      // now, and look for a failover, which moves the slots to a node whose breaker is closed.
      Bump(node_failures_);
      NoteTrouble();
      Fail(batch, std::move(status));
      return;
    }
    if (status.code() == absl::StatusCode::kUnavailable &&
        !stopped_.load(std::memory_order_acquire)) {
      // The node is down or unreachable: perhaps failed over. Ask where its slots went and
      // re-route after a short pause.
      Bump(node_failures_);
      NoteTrouble();
      std::vector<uint32_t> commands;
      commands.reserve(sent.size());
      for (const Sent& s : sent) {
        commands.push_back(s.command);
      }
      absl::string_view message = status.message();
      RetryLater(batch, std::move(commands), std::string_view(message.data(), message.size()),
                 FailureReasonOf(status));
    } else {
      Fail(batch, std::move(status));
    }
    return;
  }
  std::vector<uint32_t> resend;
  std::vector<uint32_t> later;
  std::string later_why;  // cut (LogText): the error text of a node
  FailureReason later_reason = FailureReason::kClusterDown;
  size_t finals = 0;
  for (const Sent& s : sent) {
    RedisReply& reply = replies[s.reply];
    uint32_t i = s.command;
    ClusterError error;
    if (reply.is_error()) {
      error = ParseClusterError(reply, client->address());
    }
    CommandState& state = batch->states[i];
    switch (error.kind) {
      case ClusterErrorKind::kNone:
        batch->replies[i] = std::move(reply);
        ++finals;
        break;
      case ClusterErrorKind::kMoved:
      case ClusterErrorKind::kAsk: {
        bool moved = error.kind == ClusterErrorKind::kMoved;
        Bump(moved ? moved_ : ask_);
        if (++state.redirects > options_.max_redirects) {
          Fail(batch, absl::UnavailableError(absl::StrCat("redis cluster: still redirected after ",
                                                          options_.max_redirects,
                                                          " redirects: ",
                                                          LogText(reply.str()))));
          return;
        }
        if (moved) {
          PatchSlot(error.slot, error.address);
          RequestRefresh();
        }
        state.redirect = std::move(error.address);
        state.asking = !moved;
        resend.push_back(i);
        break;
      }
      case ClusterErrorKind::kTryAgain:
        Bump(try_again_);
        later_why = "TRYAGAIN";
        later.push_back(i);
        break;
      case ClusterErrorKind::kClusterDown:
      case ClusterErrorKind::kNodeNotServing:
        Bump(cluster_down_);
        if (error.kind == ClusterErrorKind::kClusterDown) {
          cluster_down_seen_.store(true, std::memory_order_relaxed);
        }
        NoteTrouble();
        later_why = LogText(reply.str());
        if (error.kind == ClusterErrorKind::kNodeNotServing) {
          // LOADING and READONLY have reasons of their own; MASTERDOWN stays cluster_down.
          const FailureReason own = FailureReasonOf(ErrorReplyStatus(reply));
          if (own != FailureReason::kOther) later_reason = own;
        }
        later.push_back(i);
        break;
    }
  }
  if (!resend.empty()) {
    Dispatch(batch, resend);
  }
  if (!later.empty()) {
    RetryLater(batch, std::move(later), later_why, later_reason);
  }
  if (finals > 0 && batch->remaining.fetch_sub(finals, std::memory_order_acq_rel) == finals) {
    Succeed(batch);
  }
}

void RedisClusterClient::RetryLater(const std::shared_ptr<Batch>& batch,
                                    std::vector<uint32_t> commands, std::string_view why,
                                    FailureReason reason) {
  if (batch->finished.load(std::memory_order_acquire)) {
    return;
  }
  int attempt = 0;
  for (uint32_t i : commands) {
    CommandState& state = batch->states[i];
    if (++state.retries > options_.max_retries) {
      Fail(batch, WithFailureReason(
                      absl::UnavailableError(absl::StrCat(
                          "redis cluster: ", absl::string_view(why.data(), why.size()),
                          " (gave up after ", options_.max_retries, " retries)")),
                      reason));
      return;
    }
    attempt = std::max<int>(attempt, state.retries);
  }
  int64_t min_us = absl::ToInt64Microseconds(options_.retry_backoff_min);
  int64_t max_us = absl::ToInt64Microseconds(options_.retry_backoff_max);
  int64_t step = max_us;
  if (attempt - 1 < 30 && (min_us << (attempt - 1)) < max_us) {
    step = min_us << (attempt - 1);
  }
  int64_t half = step / 2;
  int64_t delay = half + static_cast<int64_t>(random_() % static_cast<uint64_t>(step - half + 1));
  int64_t due = clock_.MonotonicMicros() + delay;
  // A retry needs time for its round trip too; one that would leave less than the minimum
  // backoff is pointless, and failing now says why better than a deadline later would.
  if (batch->deadline_us - due < min_us) {
    Fail(batch, WithFailureReason(
                    absl::UnavailableError(absl::StrCat(
                        "redis cluster: ", absl::string_view(why.data(), why.size()),
                        " (no time left to retry)")),
                    reason));
    return;
  }
  retries_.fetch_add(commands.size(), std::memory_order_relaxed);
  retry_queue_->Schedule(due, [this, batch, commands = std::move(commands)](bool cancelled) {
    if (cancelled) {
      Fail(batch, absl::UnavailableError("redis cluster: client stopped"));
      return;
    }
    Dispatch(batch, commands);
  });
}

void RedisClusterClient::Fail(const std::shared_ptr<Batch>& batch, absl::Status status) {
  if (batch->finished.exchange(true, std::memory_order_acq_rel)) {
    return;
  }
  Bump(failed_batches_);
  if (tls_executing_batch == batch.get() && !loops_.empty()) {
    // The status is rebuilt on the loop thread rather than shared with it: Debian's abseil is not
    // TSan-instrumented, so a Status rep whose refcount two threads touch reads as a race.
    EventLoop& loop =
        *loops_[next_keyless_.fetch_add(1, std::memory_order_relaxed) % loops_.size()];
    if (loop.Post([batch, code = status.code(), message = std::string(status.message()),
                   reason = FailureReasonOf(status)] {
          BatchCallback done = std::move(batch->done);
          std::move(done)(WithFailureReason(absl::Status(code, message), reason), {});
        })) {
      return;
    }
  }
  BatchCallback done = std::move(batch->done);
  std::move(done)(std::move(status), {});
}

void RedisClusterClient::Succeed(const std::shared_ptr<Batch>& batch) {
  if (batch->finished.exchange(true, std::memory_order_acq_rel)) {
    return;
  }
  auto run = [batch] {
    BatchCallback done = std::move(batch->done);
    std::move(done)(absl::OkStatus(), absl::MakeSpan(batch->replies));
  };
  if (tls_executing_batch == batch.get() && !loops_.empty()) {
    EventLoop& loop =
        *loops_[next_keyless_.fetch_add(1, std::memory_order_relaxed) % loops_.size()];
    if (loop.Post(run)) {
      return;
    }
  }
  run();
}

RedisClient* RedisClusterClient::FindClient(std::string_view address) const {
  MutexLock lock(clients_mu_);
  auto it = clients_.find(std::string(address));
  return it != clients_.end() ? it->second.get() : nullptr;
}

void RedisClusterClient::PatchSlot(int slot, const std::string& address) {
  RedisClient* client = FindClient(address);
  if (client == nullptr) {
    return;  // the refresh this MOVED triggers creates it and brings the full map
  }
  for (;;) {
    std::shared_ptr<const Routing> current = routing_.Load();
    if (current == nullptr) {
      return;
    }
    int node = current->map->NodeForSlot(slot);
    if (node >= 0 && current->map->nodes()[static_cast<size_t>(node)].address == address) {
      return;  // someone patched it already
    }
    auto next = std::make_shared<Routing>();
    next->map = std::make_shared<const SlotMap>(current->map->WithSlotOwner(slot, address));
    next->clients = current->clients;
    if (next->map->nodes().size() > next->clients.size()) {
      next->clients.push_back(client);
    }
    if (routing_.CompareAndStore(current.get(), std::move(next))) {
      Bump(slot_patches_);
      return;
    }
  }
}

void RedisClusterClient::RequestNode(const std::string& address) {
  {
    MutexLock lock(refresh_mu_);
    // Bounded: a handful of new nodes at a time is all a real cluster produces.
    if (wanted_nodes_.size() < 64 &&
        std::find(wanted_nodes_.begin(), wanted_nodes_.end(), address) == wanted_nodes_.end()) {
      wanted_nodes_.push_back(address);
    }
  }
  RequestRefresh();
}

void RedisClusterClient::NoteTrouble() {
  last_trouble_us_.store(std::max<int64_t>(clock_.MonotonicMicros(), 1),
                         std::memory_order_relaxed);
  RequestRefresh();
}

bool RedisClusterClient::InOutage() const {
  // How long a sign of trouble keeps the refreshes fast: long enough to span the gap between a
  // node's connection dropping and its breaker opening, short enough that a healed cluster is
  // left alone within a second.
  constexpr int64_t kTroubleMemoryUs = 1000000;
  const int64_t trouble = last_trouble_us_.load(std::memory_order_relaxed);
  if (trouble != 0 && clock_.MonotonicMicros() - trouble < kTroubleMemoryUs) {
    return true;
  }
  std::shared_ptr<const Routing> routing = routing_.Load();
  if (routing == nullptr) {
    return false;  // the first refresh has its own backoff
  }
  for (RedisClient* client : routing->clients) {
    if (client == nullptr || client->unusable()) {
      return true;
    }
  }
  return false;
}

void RedisClusterClient::RequestRefresh() {
  if (refresh_requested_.exchange(true, std::memory_order_acq_rel)) {
    return;  // one is pending already
  }
  MutexLock lock(refresh_mu_);
  refresh_wanted_.NotifyOne();
}

// ---------------------------------------------------------------------------------------------
// Topology.

void RedisClusterClient::RefreshLoop() {
  pthread_setname_np(pthread_self(), "redis-topology");
  const int64_t interval_us = absl::ToInt64Microseconds(options_.refresh_interval);
  const int64_t gap_us = absl::ToInt64Microseconds(options_.min_refresh_gap);
  const int64_t outage_us = absl::ToInt64Microseconds(options_.outage_refresh_interval);
  // After a failed refresh: from the gap (at least 10 ms) up to the interval.
  ExponentialBackoff failure_backoff(
      std::max<int64_t>(gap_us, 10000),
      std::max<int64_t>(std::max<int64_t>(gap_us, 10000), std::min<int64_t>(interval_us, 2000000)),
      random_);
  // The next outage period: jittered into [0.75, 1.25] of the interval, so that the replicas of
  // a deployment do not ask the cluster in step.
  auto next_outage_gap = [&] {
    const int64_t quarter = std::max<int64_t>(outage_us / 4, 1);
    return outage_us - quarter +
           static_cast<int64_t>(random_() % static_cast<uint64_t>(2 * quarter + 1));
  };
  int64_t outage_gap_us = next_outage_gap();
  int64_t last_us = std::numeric_limits<int64_t>::min() / 2;
  int64_t next_periodic_us = clock_.MonotonicMicros();  // the first refresh runs at once
  refresh_mu_.Lock();
  while (!refresh_stopping_) {
    // Node clients' locks are not taken under refresh_mu_.
    refresh_mu_.Unlock();
    const bool outage = InOutage();
    refresh_mu_.Lock();
    if (refresh_stopping_) {
      break;
    }
    int64_t now = clock_.MonotonicMicros();
    int64_t due = next_periodic_us;
    if (urgent_refresh_.load(std::memory_order_relaxed)) {
      due = std::min(due, last_us + gap_us);
    }
    if (outage) {
      // Requests or not, one refresh per outage period.
      due = std::min(due, last_us + outage_gap_us);
    } else if (refresh_requested_.load(std::memory_order_acquire)) {
      due = std::min(due, last_us + gap_us);
    }
    if (now < due) {
      // While in an outage a request changes nothing (but an urgent one does), so wake only
      // when due; otherwise a request (or trouble) may bring the refresh forward. Wake at least every outage period
      // to notice trouble that no request reports (a node's breaker opening).
      refresh_wanted_.WaitFor(refresh_mu_, std::min(due - now, outage_gap_us));
      continue;
    }
    refresh_requested_.store(false, std::memory_order_release);
    urgent_refresh_.store(false, std::memory_order_relaxed);
    refresh_mu_.Unlock();
    bool ok = RefreshOnce();
    refresh_mu_.Lock();
    last_us = clock_.MonotonicMicros();
    outage_gap_us = next_outage_gap();
    if (ok) {
      failure_backoff.Reset();
      next_periodic_us = last_us + interval_us;
    } else {
      next_periodic_us = last_us + failure_backoff.NextDelayMicros();
    }
  }
  refresh_mu_.Unlock();
}

bool RedisClusterClient::RefreshOnce() {
  std::vector<std::string> wanted;
  {
    MutexLock lock(refresh_mu_);
    wanted.swap(wanted_nodes_);
  }
  for (const std::string& address : wanted) {
    bool created = false;
    EnsureClient(address, &created);
  }
  // The masters this process reaches now first (they answer at once, and with the map they
  // agree on), then the seeds, then every other node the current map names; the nodes whose
  // clients cannot reach them last, so that a dead node (which may cost a whole connect
  // timeout when it does not refuse) delays no refresh that another node can answer.
  std::vector<std::string> candidates;
  std::vector<std::string> unreachable;
  std::shared_ptr<const Routing> routing = routing_.Load();
  if (routing != nullptr) {
    for (size_t k = 0; k < routing->clients.size(); ++k) {
      RedisClient* client = routing->clients[k];
      (client != nullptr && !client->unusable() ? candidates : unreachable)
          .push_back(routing->map->nodes()[k].address);
    }
  }
  for (const std::string& seed : options_.seeds) {
    candidates.push_back(seed);
  }
  if (routing != nullptr) {
    for (const SlotMap::Node& node : routing->map->nodes()) {
      candidates.insert(candidates.end(), node.replicas.begin(), node.replicas.end());
    }
  }
  candidates.insert(candidates.end(), wanted.begin(), wanted.end());
  // An unreachable master that is also a seed is still tried last.
  candidates.erase(std::remove_if(candidates.begin(), candidates.end(),
                                  [&](const std::string& address) {
                                    return std::find(unreachable.begin(), unreachable.end(),
                                                     address) != unreachable.end();
                                  }),
                   candidates.end());
  candidates.insert(candidates.end(), unreachable.begin(), unreachable.end());
  std::vector<std::string> tried;
  std::string errors;
  for (const std::string& address : candidates) {
    if (std::find(tried.begin(), tried.end(), address) != tried.end()) {
      continue;
    }
    tried.push_back(address);
    {
      MutexLock lock(refresh_mu_);
      if (refresh_stopping_) {
        return false;
      }
    }
    absl::StatusOr<SlotMap> map = loader_.Load(address);
    if (map.ok() && map->covered_slots() == 0) {
      map = absl::FailedPreconditionError(
          absl::StrCat("redis ", address, ": CLUSTER SLOTS covers no slot"));
    }
    if (!map.ok()) {
      absl::StrAppend(&errors, errors.empty() ? "" : "; ", map.status().message());
      continue;
    }
    Publish(*std::move(map));
    Bump(refreshes_);
    return true;
  }
  Bump(refresh_failures_);
  SLUICE_LOG_EVERY_SECONDS(WARNING, 10)
      << "redis cluster: cannot refresh the slot map from any node: " << errors;
  return false;
}

void RedisClusterClient::Publish(SlotMap map) {
  std::shared_ptr<const Routing> current = routing_.Load();
  std::vector<RedisClient*> clients;
  // New masters: nodes the current map does not name as masters, whose clients were just made
  // or knew them dead or as replicas.
  std::vector<RedisClient*> promoted;
  for (const SlotMap::Node& node : map.nodes()) {
    bool created = false;
    clients.push_back(EnsureClient(node.address, &created));
    if (clients.back() != nullptr &&
        (created || current == nullptr || current->map->FindNode(node.address) < 0)) {
      promoted.push_back(clients.back());
    }
  }
  if (current != nullptr && current->clients == clients && *current->map == map) {
    return;  // nothing changed
  }
  // The new masters connect first, so that the commands routed to them do not fail at once: a
  // client that knew the node dead reconnects now rather than when its backoff ends, and its
  // breaker forgets what it saw then.
  int64_t deadline_us =
      clock_.MonotonicMicros() + absl::ToInt64Microseconds(options_.node.connect_timeout);
  for (RedisClient* client : promoted) {
    client->Refresh();
  }
  for (RedisClient* client : promoted) {
    int64_t left_us = deadline_us - clock_.MonotonicMicros();
    if (left_us <= 0 || !client->WaitUntilReady(absl::Microseconds(left_us))) {
      break;
    }
  }
  // A summary: the full map of a resharded cluster can run to thousands of ranges.
  int moved_slots = 0;
  for (int slot = 0; current != nullptr && slot < kClusterSlots; ++slot) {
    int before = current->map->NodeForSlot(slot);
    int after = map.NodeForSlot(slot);
    if ((before < 0) != (after < 0) ||
        (before >= 0 && current->map->nodes()[static_cast<size_t>(before)].address !=
                            map.nodes()[static_cast<size_t>(after)].address)) {
      ++moved_slots;
    }
  }
  std::vector<std::string> joined;
  std::vector<std::string> left;
  if (current != nullptr) {
    for (const SlotMap::Node& node : map.nodes()) {
      if (current->map->FindNode(node.address) < 0) joined.push_back(node.address);
    }
    for (size_t k = 0; k < current->map->nodes().size(); ++k) {
      const std::string& address = current->map->nodes()[k].address;
      if (map.FindNode(address) < 0) {
        left.push_back(address);
        if (RedisClient* client = current->clients[k]) {
          client->CloseFailureWindow();  // its keys are served elsewhere from now on
        }
      }
    }
    if (moved_slots > 0 || !joined.empty() || !left.empty()) {
      Bump(topology_changes_);
    }
  }
  SLUICE_LOG(INFO) << "redis cluster: slot map with " << map.nodes().size() << " masters, "
                   << map.covered_slots() << "/" << kClusterSlots << " slots served"
                   << (current == nullptr
                           ? std::string(" (first map)")
                           : absl::StrCat(", ", moved_slots, " slots moved since the last map",
                                          joined.empty() ? "" : "; new masters ",
                                          absl::StrJoin(joined, ","),
                                          left.empty() ? "" : "; no longer masters ",
                                          absl::StrJoin(left, ",")));
  auto next = std::make_shared<Routing>();
  next->map = std::make_shared<const SlotMap>(std::move(map));
  next->clients = std::move(clients);
  routing_.Store(std::move(next));
  MutexLock lock(mu_);
  changed_.NotifyAll();
}

RedisClient* RedisClusterClient::EnsureClient(const std::string& address, bool* created) {
  *created = false;
  {
    MutexLock lock(clients_mu_);
    auto it = clients_.find(address);
    if (it != clients_.end()) {
      return it->second.get();
    }
  }
  RedisClientOptions options = options_.node;
  options.address = address;
  RedisClientResources resources;
  for (const auto& loop : loops_) {
    resources.loops.push_back(loop.get());
  }
  resources.scripts = scripts_;
  resources.random = random_;
  resources.tls = tls_;
  // A lost connection may be a failover beginning: idle or not, look for the new map.
  resources.on_ready_change = [this](bool ready) {
    if (!ready) {
      NoteTrouble();
    }
  };
  absl::StatusOr<std::unique_ptr<RedisClient>> client =
      RedisClient::Create(std::move(options), clock_, std::move(resources));
  if (!client.ok()) {
    SLUICE_LOG_EVERY_SECONDS(ERROR, 10)
        << "redis cluster: cannot create a client for node " << address << ": " << client.status();
    return nullptr;
  }
  RedisClient* raw = client->get();
  MutexLock lock(clients_mu_);
  clients_.emplace(address, *std::move(client));
  *created = true;
  return raw;
}

// ---------------------------------------------------------------------------------------------
// The rest of the interface.

absl::StatusOr<const RedisScript*> RedisClusterClient::RegisterScript(std::string_view name,
                                                                      std::string_view source) {
  return scripts_->Register(name, source);
}

bool RedisClusterClient::WaitUntilReady(absl::Duration timeout) {
  int64_t deadline_us = clock_.MonotonicMicros() +
                        absl::ToInt64Microseconds(std::min(timeout, absl::Hours(24 * 365)));
  std::shared_ptr<const Routing> routing;
  {
    MutexLock lock(mu_);
    while (!stopping_ && (routing = routing_.Load()) == nullptr) {
      int64_t left_us = deadline_us - clock_.MonotonicMicros();
      if (left_us <= 0) {
        return false;
      }
      changed_.WaitFor(mu_, left_us);
    }
    if (stopping_) {
      return false;
    }
  }
  for (RedisClient* client : routing->clients) {
    int64_t left_us = deadline_us - clock_.MonotonicMicros();
    if (client == nullptr || left_us <= 0 || !client->WaitUntilReady(absl::Microseconds(left_us))) {
      return false;
    }
  }
  return true;
}

int RedisClusterClient::ready_connections() const {
  std::shared_ptr<const Routing> routing = routing_.Load();
  if (routing == nullptr) {
    return 0;
  }
  int ready = 0;
  for (RedisClient* client : routing->clients) {
    if (client != nullptr) {
      ready += client->ready_connections();
    }
  }
  return ready;
}

std::shared_ptr<const SlotMap> RedisClusterClient::slot_map() const {
  std::shared_ptr<const Routing> routing = routing_.Load();
  return routing != nullptr ? routing->map : nullptr;
}

void RedisClusterClient::CollectNodeMetrics(std::vector<NodeMetrics>* out) const {
  MutexLock lock(clients_mu_);
  for (const auto& [address, client] : clients_) {
    client->CollectNodeMetrics(out);
  }
}

void RedisClusterClient::AppendClientMetrics(std::string* out) const {
  const RedisClusterClientStats s = stats();
  absl::StrAppend(
      out,
      "# HELP sluice_redis_cluster_redirections_total MOVED and ASK replies followed\n"
      "# TYPE sluice_redis_cluster_redirections_total counter\n"
      "sluice_redis_cluster_redirections_total{kind=\"moved\"} ", s.moved, "\n",
      "sluice_redis_cluster_redirections_total{kind=\"ask\"} ", s.ask, "\n",
      "# HELP sluice_redis_cluster_retries_total Replies and failures retried after a backoff, by "
      "cause (cluster_down includes LOADING, MASTERDOWN and READONLY)\n"
      "# TYPE sluice_redis_cluster_retries_total counter\n"
      "sluice_redis_cluster_retries_total{cause=\"try_again\"} ", s.try_again, "\n",
      "sluice_redis_cluster_retries_total{cause=\"cluster_down\"} ", s.cluster_down, "\n",
      "sluice_redis_cluster_retries_total{cause=\"node_failure\"} ", s.node_failures, "\n",
      "# HELP sluice_redis_cluster_refreshes_total Topology refreshes (CLUSTER SLOTS), by result\n"
      "# TYPE sluice_redis_cluster_refreshes_total counter\n"
      "sluice_redis_cluster_refreshes_total{result=\"ok\"} ", s.refreshes, "\n",
      "sluice_redis_cluster_refreshes_total{result=\"failed\"} ", s.refresh_failures, "\n",
      "# HELP sluice_redis_cluster_masters Masters in the slot map in use\n"
      "# TYPE sluice_redis_cluster_masters gauge\n"
      "sluice_redis_cluster_masters ", s.masters, "\n");
  AppendTopologyChanges(s.topology_changes, out);
}

RedisClusterClientStats RedisClusterClient::stats() const {
  RedisClusterClientStats stats;
  stats.moved = moved_.load(std::memory_order_relaxed);
  stats.ask = ask_.load(std::memory_order_relaxed);
  stats.try_again = try_again_.load(std::memory_order_relaxed);
  stats.cluster_down = cluster_down_.load(std::memory_order_relaxed);
  stats.node_failures = node_failures_.load(std::memory_order_relaxed);
  stats.retries = retries_.load(std::memory_order_relaxed);
  stats.slot_patches = slot_patches_.load(std::memory_order_relaxed);
  stats.refreshes = refreshes_.load(std::memory_order_relaxed);
  stats.refresh_failures = refresh_failures_.load(std::memory_order_relaxed);
  stats.failed_batches = failed_batches_.load(std::memory_order_relaxed);
  stats.topology_changes = topology_changes_.load(std::memory_order_relaxed);
  {
    MutexLock lock(clients_mu_);
    stats.nodes = static_cast<int>(clients_.size());
    for (const auto& [address, client] : clients_) {
      stats.connections += client->stats().totals;
    }
  }
  if (std::shared_ptr<const Routing> routing = routing_.Load()) {
    stats.masters = static_cast<int>(routing->map->nodes().size());
  }
  stats.ready_connections = ready_connections();
  return stats;
}

void RedisClusterClient::Stop() {
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
  for (const auto& loop : loops_) {
    if (loop->IsLoopThread()) {
      SLUICE_LOG(FATAL) << "RedisClusterClient::Stop called on one of its I/O threads";
    }
  }
  if (retry_queue_ != nullptr && retry_queue_->IsQueueThread()) {
    SLUICE_LOG(FATAL) << "RedisClusterClient::Stop called on its retry thread";
  }
  stopped_.store(true, std::memory_order_seq_cst);
  while (executing_.load(std::memory_order_seq_cst) != 0) {
    std::this_thread::yield();
  }
  {
    MutexLock lock(refresh_mu_);
    refresh_stopping_ = true;
    refresh_wanted_.NotifyAll();
  }
  if (refresh_thread_.joinable()) {
    refresh_thread_.join();
  }
  // Batches waiting to retry fail now; from here on a retry fails inline.
  if (retry_queue_ != nullptr) {
    retry_queue_->Stop();
  }
  // No client is created any more (the topology thread is gone). Closing them completes their
  // pending sub-batches, whose callbacks see stopped_ and fail their batches.
  std::vector<RedisClient*> clients;
  {
    MutexLock lock(clients_mu_);
    for (auto& [address, client] : clients_) {
      clients.push_back(client.get());
    }
  }
  for (RedisClient* client : clients) {
    client->Stop();
  }
  for (auto& loop : loops_) {
    loop->Stop();
  }
  MutexLock lock(mu_);
  stop_done_ = true;
  changed_.NotifyAll();
}

}  // namespace sluice
