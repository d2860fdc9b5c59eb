#include "server/backend/redis_backend.h"

#include <algorithm>
#include <charconv>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "lua/lua_scripts.h"
#include "server/backend/script_codec.h"
#include "server/backend/storage_key.h"

namespace sluice {
namespace {

// Redis commands take std::string_view; Debian's abseil has its own string_view.
std::string_view StdView(absl::string_view s) { return std::string_view(s.data(), s.size()); }

// A script's reply of `count` decisions, each stored by store(i, decision).
absl::Status DecodeScriptReply(const RedisReply& reply, size_t count,
                               absl::FunctionRef<void(size_t i, const Decision&)> store) {
  if (reply.is_error()) {
    return absl::UnavailableError(absl::StrCat("redis: ", reply.str()));
  }
  if (!reply.is_string()) {
    return absl::InternalError(
        absl::StrCat("redis: unexpected script reply ", reply.DebugString()));
  }
  return DecodeScriptDecisions(reply.str(), count, store);
}

}  // namespace

// How the replies of one part of a batch are read: a script's decisions, or a lone fixed
// window's INCRBY + PEXPIRE, or a decision made without Redis (a limit of 0).
struct RedisBackend::Part {
  enum class Kind : uint8_t { kScript, kFixedWindow, kLocal } kind = Kind::kScript;
  uint32_t size = 1;  // decisions (checks)
  // kFixedWindow:
  LimitParams params;
  uint64_t hits = 0;
  std::string window_key;
  // kLocal:
  Decision decision;
};

absl::StatusOr<std::unique_ptr<RedisBackend>> RedisBackend::Create(RedisBackendOptions options,
                                                                   const Clock& clock) {
  // The scripts are registered before any connection exists, so that every connection loads
  // them during its handshake and the first requests never meet NOSCRIPT.
  auto scripts = std::make_shared<ScriptCache>();
  std::array<const RedisScript*, 6> single_key_scripts{};
  std::array<const RedisScript*, 6> batch_scripts{};
  const RedisScript* group_script = nullptr;
  const RedisScript* give_back_script = nullptr;
  for (const LuaScript& script : LuaScripts()) {
    auto registered = scripts->Register(StdView(script.name), StdView(script.source));
    if (!registered.ok()) {
      return registered.status();
    }
    // "<algorithm>" decides one key, "<algorithm>_batch" several independent ones.
    absl::string_view name = script.name;
    const bool batch = absl::ConsumeSuffix(&name, "_batch");
    if (name == "group") {
      group_script = *registered;
    } else if (name == "give_back") {
      give_back_script = *registered;
    } else if (auto algorithm = ParseAlgorithm(name)) {
      (batch ? batch_scripts : single_key_scripts)[static_cast<size_t>(*algorithm)] = *registered;
    }
  }
  for (size_t a = 0; a < single_key_scripts.size(); ++a) {
    // A lone fixed window needs no script (script_codec.h).
    if ((single_key_scripts[a] == nullptr || batch_scripts[a] == nullptr) &&
        static_cast<Algorithm>(a) != Algorithm::kFixedWindow) {
      return absl::InternalError(absl::StrCat("no embedded Lua scripts for ",
                                              AlgorithmName(static_cast<Algorithm>(a))));
    }
  }
  if (group_script == nullptr || give_back_script == nullptr) {
    return absl::InternalError("no embedded Lua script named group or give_back");
  }

  std::unique_ptr<RedisExecutor> executor;
  if (options.cluster) {
    RedisClusterClientOptions cluster;
    cluster.seeds = options.cluster_seeds;
    cluster.node = options.client;
    cluster.scripts = scripts;
    auto client = RedisClusterClient::Create(std::move(cluster), clock);
    if (!client.ok()) {
      return client.status();
    }
    executor = std::move(*client);
  } else {
    RedisClientResources resources;
    resources.scripts = scripts;
    auto client = RedisClient::Create(options.client, clock, std::move(resources));
    if (!client.ok()) {
      return client.status();
    }
    executor = std::move(*client);
  }
  std::unique_ptr<RedisBackend> backend(
      new RedisBackend(std::move(options), clock, std::move(executor)));
  backend->single_key_scripts_ = single_key_scripts;
  backend->batch_scripts_ = batch_scripts;
  backend->group_script_ = group_script;
  backend->give_back_script_ = give_back_script;
  return backend;
}

RedisBackend::RedisBackend(RedisBackendOptions options, const Clock& clock,
                           std::unique_ptr<RedisExecutor> client)
    : options_(std::move(options)),
      clock_(clock),
      max_lane_calls_(std::max(2, options_.client.io_threads *
                                      options_.client.connections_per_thread)),
      client_(std::move(client)) {}

RedisBackend::~RedisBackend() {
  // While every member is alive: the failed calls' callbacks send the lanes' waiting checks,
  // which fail at once.
  client_->Stop();
}

bool RedisBackend::WaitUntilReady(absl::Duration timeout) {
  // Real time, whatever clock_ is: a test's fake clock would never let this end.
  const absl::Time deadline = absl::Now() + timeout;
  if (!client_->WaitUntilReady(timeout)) {
    return false;
  }
  if (options_.use_caller_clock) {
    return true;
  }
  while (clock_samples_kept_.load(std::memory_order_acquire) == 0) {
    if (absl::Now() >= deadline) {
      return false;
    }
    MaybeSyncClock();
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

int64_t RedisBackend::NowMicros() {
  if (options_.use_caller_clock) {
    return clock_.NowMicros();
  }
  MaybeSyncClock();
  return clock_.NowMicros() + clock_offset_us_.load(std::memory_order_relaxed);
}

void RedisBackend::MaybeSyncClock() {
  const int64_t monotonic = clock_.MonotonicMicros();
  int64_t due = next_clock_sync_us_.load(std::memory_order_relaxed);
  if (monotonic < due) {
    return;
  }
  // One sampler at a time: whoever moves the due time forward sends the TIME. A sample that
  // fails is retried after a tenth of the interval.
  const int64_t interval = absl::ToInt64Microseconds(options_.clock_sync_interval);
  if (!next_clock_sync_us_.compare_exchange_strong(due, monotonic + interval,
                                                   std::memory_order_relaxed)) {
    return;
  }
  CommandBatch batch;
  batch.Add({"TIME"});
  const int64_t sent = clock_.NowMicros();
  client_->Execute(
      std::move(batch), monotonic + absl::ToInt64Microseconds(options_.timeout),
      [this, sent, interval](absl::Status status, absl::Span<RedisReply> replies) {
        const int64_t received = clock_.NowMicros();
        int64_t seconds = 0;
        int64_t micros = 0;
        const bool ok = status.ok() && replies.size() == 1 && replies[0].is_array() &&
                        replies[0].elements().size() == 2 &&
                        replies[0].elements()[0].is_string() &&
                        replies[0].elements()[1].is_string() &&
                        absl::SimpleAtoi(replies[0].elements()[0].str(), &seconds) &&
                        absl::SimpleAtoi(replies[0].elements()[1].str(), &micros);
        if (!ok) {
          clock_samples_failed_.fetch_add(1, std::memory_order_relaxed);
          next_clock_sync_us_.store(clock_.MonotonicMicros() + interval / 10,
                                    std::memory_order_relaxed);
          return;
        }
        // Redis read its clock somewhere in [sent, received]: assume the middle, so the error
        // is at most half the round trip. A sample whose round trip is more than twice the
        // last one kept (a slow moment) is skipped, unless the kept one is a minute old.
        const int64_t rtt = received - sent;
        const int64_t monotonic_now = clock_.MonotonicMicros();
        const bool first = clock_samples_kept_.load(std::memory_order_acquire) == 0;
        const int64_t kept_rtt = clock_rtt_us_.load(std::memory_order_relaxed);
        const int64_t kept_at = clock_sampled_at_us_.load(std::memory_order_relaxed);
        if (!first && rtt > std::max<int64_t>(1000, 2 * kept_rtt) &&
            monotonic_now - kept_at < 60'000'000) {
          clock_samples_skipped_.fetch_add(1, std::memory_order_relaxed);
          return;
        }
        const int64_t redis_now = seconds * 1'000'000 + micros;
        clock_offset_us_.store(redis_now - (sent + rtt / 2), std::memory_order_relaxed);
        clock_rtt_us_.store(rtt, std::memory_order_relaxed);
        clock_sampled_at_us_.store(monotonic_now, std::memory_order_relaxed);
        clock_samples_kept_.fetch_add(1, std::memory_order_release);
      });
}

void RedisBackend::AppendMetrics(std::string* out) const {
  if (!options_.cluster && options_.max_batch > 1) {
    std::string calls, checks;
    for (size_t a = 0; a < lanes_.size(); ++a) {
      if (static_cast<Algorithm>(a) == Algorithm::kFixedWindow) {
        continue;  // no lane: a lone fixed window runs without a script
      }
      const absl::string_view name = AlgorithmName(static_cast<Algorithm>(a));
      absl::StrAppend(&calls, "sluice_redis_lane_calls_total{algorithm=\"", name, "\"} ",
                      lanes_[a].calls.load(std::memory_order_relaxed), "\n");
      absl::StrAppend(&checks, "sluice_redis_lane_checks_total{algorithm=\"", name, "\"} ",
                      lanes_[a].checks.load(std::memory_order_relaxed), "\n");
    }
    absl::StrAppend(out,
                    "# HELP sluice_redis_lane_calls_total Script calls sent by the algorithm's "
                    "lane (--redis_max_batch)\n"
                    "# TYPE sluice_redis_lane_calls_total counter\n",
                    calls,
                    "# HELP sluice_redis_lane_checks_total Checks decided by those calls (checks "
                    "per call: the mean batch)\n"
                    "# TYPE sluice_redis_lane_checks_total counter\n",
                    checks);
  }
  if (options_.use_caller_clock) {
    return;
  }
  const RedisClockSamples samples = clock_samples();
  absl::StrAppend(
      out,
      "# HELP sluice_redis_clock_offset_microseconds Redis' clock minus this process's, as "
      "decisions use it (--redis_clock=redis)\n"
      "# TYPE sluice_redis_clock_offset_microseconds gauge\n"
      "sluice_redis_clock_offset_microseconds ",
      clock_offset_us_.load(std::memory_order_relaxed),
      "\n# HELP sluice_redis_clock_round_trip_microseconds Round trip of the clock sample in use "
      "(its error is at most half of it)\n"
      "# TYPE sluice_redis_clock_round_trip_microseconds gauge\n"
      "sluice_redis_clock_round_trip_microseconds ",
      clock_rtt_us_.load(std::memory_order_relaxed),
      "\n# HELP sluice_redis_clock_samples_total Samples of Redis' clock (TIME), by result\n"
      "# TYPE sluice_redis_clock_samples_total counter\n"
      "sluice_redis_clock_samples_total{result=\"kept\"} ", samples.kept,
      "\nsluice_redis_clock_samples_total{result=\"skipped\"} ", samples.skipped,
      "\nsluice_redis_clock_samples_total{result=\"failed\"} ", samples.failed, "\n");
}

RedisClockSamples RedisBackend::clock_samples() const {
  return RedisClockSamples{clock_samples_kept_.load(std::memory_order_relaxed),
                           clock_samples_skipped_.load(std::memory_order_relaxed),
                           clock_samples_failed_.load(std::memory_order_relaxed)};
}

void RedisBackend::Evaluate(absl::Span<const LimitCheck> checks, EvaluateCallback done) {
  if (checks.empty()) {
    std::move(done)(absl::OkStatus(), {});
    return;
  }
  const int64_t now = NowMicros();
  const int64_t deadline = clock_.MonotonicMicros() + absl::ToInt64Microseconds(options_.timeout);
  // Standalone: lone script checks go to their algorithm's lane, which decides them with other
  // requests' (see Lane). A cluster keeps a request's checks to itself.
  const bool lanes = !options_.cluster && options_.max_batch > 1;

  CommandBatch batch;
  absl::InlinedVector<Part, 4> parts;
  // The check of each decision the replies will hold, in reply order: check order, except that
  // a batch script call brings later lone checks forward to the first of them.
  absl::InlinedVector<uint32_t, 8> order;
  absl::InlinedVector<bool, 8> batched(checks.size(), false);  // sent with an earlier check
  absl::InlinedVector<uint32_t, 4> to_lanes;                    // lone checks for the lanes
  absl::InlinedVector<std::string, 8> keys;  // a group's keys (fixed windows: window keys)
  absl::InlinedVector<std::string_view, 8> key_views;
  std::string args;
  char hits_text[24];
  char ttl_text[24];
  // A lone check: a group of one (groups are runs of equal LimitCheck::group).
  const auto lone = [&](size_t c) {
    return (c == 0 || checks[c - 1].group != checks[c].group) &&
           (c + 1 == checks.size() || checks[c + 1].group != checks[c].group);
  };
  for (size_t i = 0; i < checks.size();) {
    size_t end = i + 1;
    while (end < checks.size() && checks[end].group == checks[i].group) {
      ++end;
    }
    const size_t size = end - i;
    const LimitCheck& first = checks[i];
    if (size == 1 && batched[i]) {
      i = end;
      continue;
    }
    if (size == 1 && first.params.algorithm != Algorithm::kFixedWindow &&
        first.params.limit != 0 && lanes) {
      to_lanes.push_back(static_cast<uint32_t>(i));
      i = end;
      continue;
    }
    Part& part = parts.emplace_back();
    part.size = static_cast<uint32_t>(size);
    if (size == 1 && first.params.limit == 0) {
      // A limit of 0 replenishes nothing, so every algorithm decides it without its state
      // (ZeroLimitDecision): no Redis call for a rule that blocks everything.
      order.push_back(static_cast<uint32_t>(i));
      part.kind = Part::Kind::kLocal;
      AlgorithmState state = NewState(first.params.algorithm);
      part.decision = sluice::Evaluate(first.params, state, now, first.hits);
      i = end;
      continue;
    }
    if (size == 1 && first.params.algorithm == Algorithm::kFixedWindow) {
      order.push_back(static_cast<uint32_t>(i));
      part.kind = Part::Kind::kFixedWindow;
      part.params = first.params;
      part.hits = first.hits;
      AppendFixedWindowKey(first.key, now, first.params.period_us, &part.window_key);
      const std::string_view hits(
          hits_text, std::to_chars(hits_text, hits_text + sizeof(hits_text), first.hits).ptr -
                         hits_text);
      const std::string_view ttl(
          ttl_text, std::to_chars(ttl_text, ttl_text + sizeof(ttl_text),
                                  FixedWindowTtlMs(now, first.params.period_us))
                            .ptr -
                        ttl_text);
      batch.Add({"INCRBY", part.window_key, hits});
      batch.Add({"PEXPIRE", part.window_key, ttl, "NX"});
      i = end;
      continue;
    }
    keys.clear();
    key_views.clear();
    args.clear();
    const RedisScript* script;
    if (size > 1) {
      script = group_script_;
      AppendGroupScriptNow(now, &args);
      for (size_t c = i; c < end; ++c) {
        const LimitCheck& check = checks[c];
        order.push_back(static_cast<uint32_t>(c));
        if (check.params.algorithm == Algorithm::kFixedWindow) {
          std::string& key = keys.emplace_back();
          AppendFixedWindowKey(check.key, now, check.params.period_us, &key);
          key_views.push_back(key);
        } else {
          key_views.push_back(StdView(check.key));
        }
        AppendGroupScriptCheck(check.params, check.hits, &args);
      }
    } else {
      // A lone check on a cluster, with every later lone check of its algorithm whose key has
      // its hash tag (so its slot): one batch script call for them all, or the single-key
      // script when it has no company.
      const size_t algorithm = static_cast<size_t>(first.params.algorithm);
      for (size_t c = i; c < checks.size(); ++c) {
        const LimitCheck& check = checks[c];
        if (c == i || (!batched[c] && check.params.algorithm == first.params.algorithm &&
                       check.params.limit != 0 && lone(c) &&
                       (!options_.cluster || HashTagOf(check.key) == HashTagOf(first.key)))) {
          batched[c] = true;
          order.push_back(static_cast<uint32_t>(c));
          key_views.push_back(StdView(check.key));
          AppendSingleScriptArgs(now, check.params, check.hits, &args);
        }
      }
      part.size = static_cast<uint32_t>(key_views.size());
      script = part.size > 1 ? batch_scripts_[algorithm] : single_key_scripts_[algorithm];
    }
    const std::string_view arg_view = args;
    batch.AddEvalSha(*script, key_views, absl::MakeConstSpan(&arg_view, 1));
    i = end;
  }

  if (to_lanes.empty()) {
    // Everything in this request's own batch.
    client_->Execute(
        std::move(batch), deadline,
        [this, now, parts = std::move(parts), order = std::move(order), total = checks.size(),
         done = std::move(done)](absl::Status status, absl::Span<RedisReply> replies) mutable {
          std::vector<Decision> decisions(total);
          if (status.ok()) {
            status = DecodeParts(absl::MakeConstSpan(parts), order, now, replies, decisions);
          }
          if (!status.ok()) {
            std::move(done)(std::move(status), {});
            return;
          }
          std::move(done)(absl::OkStatus(), decisions);
        });
    return;
  }

  // Some checks go to the lanes: the request completes when they and its own batch (if any)
  // have all answered.
  auto request = std::make_shared<Request>(std::move(done), checks.size(),
                                           to_lanes.size() + (parts.empty() ? 0 : 1));
  if (!parts.empty()) {
    client_->Execute(std::move(batch), deadline,
                     [this, now, request, parts = std::move(parts), order = std::move(order)](
                         absl::Status status, absl::Span<RedisReply> replies) mutable {
                       if (status.ok()) {
                         status = DecodeParts(absl::MakeConstSpan(parts), order, now, replies,
                                              request->decisions);
                       }
                       request->Finish(std::move(status), 1);
                     });
  }
  // One lane at a time, so that a request's checks of one algorithm travel together.
  uint32_t queued_lanes = 0;  // bit a: this request's checks of algorithm a are queued
  for (size_t k = 0; k < to_lanes.size(); ++k) {
    const Algorithm algorithm = checks[to_lanes[k]].params.algorithm;
    const uint32_t bit = 1u << static_cast<uint32_t>(algorithm);
    if ((queued_lanes & bit) != 0) {
      continue;  // queued with the first check of its algorithm
    }
    queued_lanes |= bit;
    Lane& lane = lanes_[static_cast<size_t>(algorithm)];
    LaneCalls ready;
    {
      std::lock_guard<std::mutex> lock(lane.mu);
      for (size_t m = k; m < to_lanes.size(); ++m) {
        const LimitCheck& check = checks[to_lanes[m]];
        if (check.params.algorithm != algorithm) {
          continue;
        }
        LaneCheck& queued = lane.waiting.emplace_back();
        queued.request = request;
        queued.index = to_lanes[m];
        queued.key.assign(check.key.data(), check.key.size());
        queued.params = check.params;
        queued.hits = check.hits;
        queued.now_us = now;
        queued.deadline_us = deadline;
      }
      ready = TakeCalls(lane);
    }
    for (std::vector<LaneCheck>& call : ready) {
      SendLaneCall(algorithm, std::move(call));
    }
  }
}

RedisBackend::LaneCalls RedisBackend::TakeCalls(Lane& lane) {
  LaneCalls calls;
  const auto take = [&](size_t n) {
    ++lane.in_flight;
    lane.calls.store(lane.calls.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    lane.checks.store(lane.checks.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    std::vector<LaneCheck>& call = calls.emplace_back();
    if (n == lane.waiting.size()) {
      call.swap(lane.waiting);
      return;
    }
    const auto split = lane.waiting.begin() + static_cast<ptrdiff_t>(n);
    call.assign(std::make_move_iterator(lane.waiting.begin()), std::make_move_iterator(split));
    lane.waiting.erase(lane.waiting.begin(), split);
  };
  // Full calls leave at once, however many are out: a lane never caps throughput.
  while (lane.waiting.size() >= options_.max_batch) {
    take(options_.max_batch);
  }
  // The rest waits for company while the lane has its calls out.
  if (!lane.waiting.empty() && lane.in_flight < max_lane_calls_) {
    take(lane.waiting.size());
  }
  return calls;
}

void RedisBackend::SendLaneCall(Algorithm algorithm, std::vector<LaneCheck> call) {
  absl::InlinedVector<std::string_view, 16> key_views;
  std::string args;
  args.reserve(call.size() * kScriptCheckBytes);
  int64_t deadline = call.front().deadline_us;
  for (const LaneCheck& check : call) {
    key_views.push_back(check.key);
    AppendSingleScriptArgs(check.now_us, check.params, check.hits, &args);
    deadline = std::min(deadline, check.deadline_us);  // no check waits past its own budget
  }
  const size_t a = static_cast<size_t>(algorithm);
  const RedisScript& script = call.size() > 1 ? *batch_scripts_[a] : *single_key_scripts_[a];
  const std::string_view arg_view = args;
  CommandBatch batch;
  batch.AddEvalSha(script, key_views, absl::MakeConstSpan(&arg_view, 1));
  client_->Execute(
      std::move(batch), deadline,
      [this, algorithm, call = std::move(call)](absl::Status status,
                                                absl::Span<RedisReply> replies) mutable {
        // The lane's next call first: the checks that waited for this one go out now.
        Lane& lane = lanes_[static_cast<size_t>(algorithm)];
        LaneCalls next;
        {
          std::lock_guard<std::mutex> lock(lane.mu);
          --lane.in_flight;
          next = TakeCalls(lane);
        }
        for (std::vector<LaneCheck>& next_call : next) {
          SendLaneCall(algorithm, std::move(next_call));
        }

        if (status.ok()) {
          status = DecodeScriptReply(replies[0], call.size(), [&](size_t i, const Decision& d) {
            call[i].request->decisions[call[i].index] = d;
          });
        }
        for (LaneCheck& check : call) {
          check.request->Finish(status, 1);
        }
      });
}

RedisBackend::Request::Request(EvaluateCallback done, size_t checks, size_t parts)
    : decisions(checks), done_(std::move(done)), outstanding_(parts) {}

void RedisBackend::Request::Finish(absl::Status status, size_t parts) {
  if (!status.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    if (status_.ok()) {
      status_ = std::move(status);
    }
  }
  // acq_rel: the last part sees every decision and status the others wrote.
  if (outstanding_.fetch_sub(parts, std::memory_order_acq_rel) != parts) {
    return;
  }
  absl::Status final_status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    final_status = status_;
  }
  if (!final_status.ok()) {
    std::move(done_)(std::move(final_status), {});
  } else {
    std::move(done_)(absl::OkStatus(), decisions);
  }
}

absl::Status RedisBackend::DecodeParts(absl::Span<const Part> parts,
                                       absl::Span<const uint32_t> order,
                                       int64_t now, absl::Span<RedisReply> replies,
                                       std::vector<Decision>& decisions) {
  size_t r = 0;  // the next reply
  size_t d = 0;  // the next decision, in reply order
  for (const Part& part : parts) {
    switch (part.kind) {
      case Part::Kind::kLocal:
        decisions[order[d++]] = part.decision;
        continue;
      case Part::Kind::kScript: {
        absl::Status s = DecodeScriptReply(
            replies[r++], part.size,
            [&](size_t i, const Decision& decision) { decisions[order[d + i]] = decision; });
        if (!s.ok()) {
          return s;
        }
        d += part.size;
        continue;
      }
      case Part::Kind::kFixedWindow: {
        const RedisReply& count = replies[r];
        const RedisReply& expire = replies[r + 1];
        r += 2;
        for (const RedisReply* reply : {&count, &expire}) {
          if (reply->is_error()) {
            return absl::UnavailableError(absl::StrCat("redis: ", reply->str()));
          }
        }
        if (!count.is_integer()) {
          return absl::InternalError(
              absl::StrCat("redis: unexpected INCRBY reply ", count.DebugString()));
        }
        const Decision decision = FixedWindowDecision(part.params, now, part.hits, count.integer());
        // INCRBY counted the hits; a denial gives them back unless denied hits are meant to
        // count (--count_denied_hits, envoyproxy/ratelimit's increment-first).
        if (!decision.allowed && part.hits > 0 && !part.params.count_denied) {
          GiveBack(part.window_key, part.hits);
        }
        decisions[order[d++]] = decision;
        continue;
      }
    }
  }
  return absl::OkStatus();
}

void RedisBackend::GiveBack(const std::string& window_key, uint64_t hits) {
  char text[24];
  const std::string_view hits_text(text,
                                   std::to_chars(text, text + sizeof(text), hits).ptr - text);
  const std::string_view key = window_key;
  CommandBatch batch;
  batch.AddEvalSha(*give_back_script_, absl::MakeConstSpan(&key, 1),
                   absl::MakeConstSpan(&hits_text, 1));
  client_->Execute(std::move(batch),
                   clock_.MonotonicMicros() + absl::ToInt64Microseconds(options_.timeout),
                   [](absl::Status, absl::Span<RedisReply>) {});
}

}  // namespace sluice
