#include "server/backend/redis_backend.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <optional>
#include <utility>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "lua/lua_scripts.h"
#include "server/backend/script_codec.h"
#include "server/backend/stored_state.h"
#include "server/common/std_view.h"
#include "server/key/reset_log_key.h"
#include "server/key/storage_key.h"
#include "server/redis/cluster/hash_slot.h"

namespace sluice {
namespace {

// An integer's decimal text in `buffer`.
template <typename Int>
std::string_view DecimalText(Int value, char (&buffer)[24]) {
  return std::string_view(buffer, std::to_chars(buffer, buffer + sizeof(buffer), value).ptr -
                                      buffer);
}

// A script's reply of `count` decisions, each stored by store(i, decision).
absl::Status DecodeScriptReply(const RedisReply& reply, size_t count,
                               absl::FunctionRef<void(size_t i, const Decision&)> store) {
  if (reply.is_error()) {
    return ErrorReplyStatus(reply);
  }
  if (!reply.is_string()) {
    return absl::InternalError(
        absl::StrCat("redis: unexpected script reply ", reply.LogString()));
  }
  return DecodeScriptDecisions(reply.str(), count, store);
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisBackend>> RedisBackend::Create(RedisBackendOptions options,
                                                                   const Clock& clock) {
  auto cache = std::make_shared<ScriptCache>();
  absl::StatusOr<ScriptSet> scripts = ScriptSet::Register(LuaScripts(), *cache);
  if (!scripts.ok()) {
    return scripts.status();
  }
  // The breaker judges the node by what a decision gets (see RedisClientOptions::breaker_budget).
  options.client.breaker_budget = options.timeout;
  std::unique_ptr<RedisExecutor> executor;
  if (options.cluster) {
    RedisClusterClientOptions cluster;
    cluster.seeds = options.cluster_seeds;
    cluster.node = options.client;
    cluster.scripts = cache;
    auto client = RedisClusterClient::Create(std::move(cluster), clock);
    if (!client.ok()) {
      return client.status();
    }
    executor = std::move(*client);
  } else {
    RedisClientResources resources;
    resources.scripts = cache;
    auto client = RedisClient::Create(options.client, clock, std::move(resources));
    if (!client.ok()) {
      return client.status();
    }
    executor = std::move(*client);
  }
  return std::unique_ptr<RedisBackend>(
      new RedisBackend(std::move(options), clock, std::move(executor), *std::move(scripts)));
}

RedisBackend::RedisBackend(RedisBackendOptions options, const Clock& clock,
                           std::unique_ptr<RedisExecutor> client, ScriptSet scripts)
    : options_(std::move(options)),
      clock_(clock),
      use_lanes_(!options_.cluster && options_.max_batch > 1),
      scripts_(std::move(scripts)),
      // Calls out per lane: one per connection, at least 2.
      lanes_(std::max<size_t>(1, options_.max_batch),
             std::max(2, options_.client.io_threads * options_.client.connections_per_thread)),
      leases_(options_.leases),
      client_(std::move(client)),
      redis_clock_(RedisClockOptions{options_.use_caller_clock, options_.clock_sync_interval,
                                     options_.timeout},
                   clock, *client_) {}

RedisBackend::~RedisBackend() {
  // While every member is alive: the failed calls' callbacks send the lanes' waiting checks,
  // which fail at once, and finish clock samples.
  client_->Stop();
}

bool RedisBackend::WaitUntilReady(absl::Duration timeout) {
  // Real time, whatever clock_ is: a test's fake clock would never let this end.
  const absl::Time deadline = absl::Now() + timeout;
  if (!client_->WaitUntilReady(timeout)) {
    return false;
  }
  while (!redis_clock_.synced()) {
    if (absl::Now() >= deadline) {
      return false;
    }
    redis_clock_.MaybeSample();
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

int64_t RedisBackend::NowMicros() { return redis_clock_.NowMicros(); }

RedisClockSamples RedisBackend::clock_samples() const { return redis_clock_.samples(); }

void RedisBackend::AppendMetrics(std::string* out) const {
  if (use_lanes_) {
    lanes_.AppendMetrics(out);
  }
  redis_clock_.AppendMetrics(out);
  leases_.AppendMetrics(out);
  std::vector<NodeMetrics> nodes;
  client_->CollectNodeMetrics(&nodes);
  AppendNodeMetrics(nodes, out);
  client_->AppendClientMetrics(out);
}

void RedisBackend::Evaluate(absl::Span<const LimitCheck> checks, const TraceParent& trace,
                            EvaluateCallback done) {
  if (checks.empty()) {
    std::move(done)(absl::OkStatus(), {});
    return;
  }
  const int64_t now = redis_clock_.NowMicros();
  if (leases_.enabled()) {
    std::vector<LeaseAsk> asks;
    std::vector<LeaseReturn> returns;
    LeaseTable::Tracked tracked;
    absl::InlinedVector<Decision, 2> decisions(checks.size());
    const bool decided =
        leases_.Admit(checks, now, absl::MakeSpan(decisions), &asks, &returns, &tracked);
    if (!asks.empty() || !returns.empty()) {
      SendLeaseCalls(std::move(asks), std::move(returns));
    }
    if (decided) {
      std::move(done)(absl::OkStatus(), decisions);
      return;
    }
    // Redis' answers for hot keys size their next leases.
    if (!tracked.empty()) {
      struct HotCheck {
        size_t index;
        std::string key;
        LimitParams params;
      };
      absl::InlinedVector<HotCheck, 2> hot;
      for (const size_t i : tracked) {
        hot.push_back(HotCheck{i, std::string(checks[i].key), checks[i].params});
      }
      EvaluateInRedis(checks, now, trace,
                      [this, hot = std::move(hot), done = std::move(done)](
                          absl::Status status, absl::Span<const Decision> decisions) mutable {
                        if (status.ok()) {
                          for (const HotCheck& check : hot) {
                            leases_.Observed(check.key, check.params, decisions[check.index]);
                          }
                        }
                        std::move(done)(std::move(status), decisions);
                      });
      return;
    }
  }
  EvaluateInRedis(checks, now, trace, std::move(done));
}

void RedisBackend::SendLeaseCalls(std::vector<LeaseAsk> asks, std::vector<LeaseReturn> returns) {
  for (LeaseAsk& ask : asks) {
    LimitCheck check;
    check.key = ask.key;
    check.params = ask.params;
    check.hits = ask.hits;
    check.partial = true;
    const LimitCheck checks[1] = {check};
    EvaluateInRedis(checks, redis_clock_.NowMicros(), TraceParent{},
                    [this, ask = std::move(ask)](absl::Status status,
                                                 absl::Span<const Decision> decisions) {
                      if (!status.ok() || decisions.size() != 1) {
                        leases_.Refused(ask, nullptr);
                      } else if (decisions[0].allowed) {
                        leases_.Granted(ask, decisions[0], redis_clock_.NowMicros());
                      } else {
                        leases_.Refused(ask, &decisions[0]);
                      }
                    });
  }
  const int64_t now = redis_clock_.NowMicros();
  for (LeaseReturn& give_back : returns) {
    if (LeaseTable::WindowEnded(give_back, now)) {
      leases_.Returned(give_back, false);
      continue;
    }
    LimitCheck check;
    check.key = give_back.key;
    check.params = give_back.params;
    check.hits = give_back.hits;
    check.refund = true;
    check.at_us = give_back.at_us;
    const LimitCheck checks[1] = {check};
    EvaluateInRedis(checks, now, TraceParent{},
                    [this, give_back = std::move(give_back)](
                        absl::Status status, absl::Span<const Decision>) {
                      leases_.Returned(give_back, status.ok());
                    });
  }
}

void RedisBackend::EvaluateInRedis(absl::Span<const LimitCheck> checks, int64_t now,
                                   const TraceParent& trace, EvaluateCallback done) {
  const int64_t deadline = clock_.MonotonicMicros() + absl::ToInt64Microseconds(options_.timeout);
  CallPlan plan = PlanCalls(checks, now,
                            {.lanes = use_lanes_,
                             .cluster = options_.cluster,
                             .upstream_keys = options_.key_layout == KeyLayout::kUpstream,
                             .key_prefix = options_.key_prefix});
  const uint32_t own_lanes = plan.lane_checks.empty() ? 0 : TakeFreeLanes(checks, plan);
  CommandBatch batch = EncodeCalls(checks, now, plan.calls);
  batch.AddTrace(trace);

  if (plan.lane_checks.empty()) {
    // Everything in this request's own batch.
    client_->Execute(
        std::move(batch), deadline,
        [this, now, own_lanes, calls = std::move(plan.calls), total = checks.size(),
         done = std::move(done)](absl::Status status, absl::Span<RedisReply> replies) mutable {
          ReturnLanes(own_lanes);
          absl::InlinedVector<Decision, 2> decisions(total);
          if (status.ok()) {
            status = DecodeReplies(calls, now, replies, absl::MakeSpan(decisions));
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
  auto request = std::make_shared<SplitRequest>(
      std::move(done), checks.size(), plan.lane_checks.size() + (plan.calls.empty() ? 0 : 1));
  request->trace = trace;
  if (!plan.calls.empty()) {
    client_->Execute(std::move(batch), deadline,
                     [this, now, own_lanes, request, calls = std::move(plan.calls)](
                         absl::Status status, absl::Span<RedisReply> replies) mutable {
                       ReturnLanes(own_lanes);
                       if (status.ok()) {
                         status = DecodeReplies(calls, now, replies, absl::MakeSpan(request->decisions));
                       }
                       request->Finish(std::move(status));
                     });
  }
  QueueInLanes(checks, plan.lane_checks, request, now, deadline);
}

uint32_t RedisBackend::TakeFreeLanes(absl::Span<const LimitCheck> checks, CallPlan& plan) {
  uint32_t taken = 0;
  uint32_t seen = 0;
  for (const uint32_t first : plan.lane_checks) {
    const Algorithm algorithm = checks[first].params.algorithm;
    const uint32_t bit = 1u << static_cast<uint32_t>(algorithm);
    if ((seen & bit) != 0) {
      continue;
    }
    seen |= bit;
    size_t count = 0;
    for (const uint32_t c : plan.lane_checks) {
      count += checks[c].params.algorithm == algorithm ? 1 : 0;
    }
    if (!lanes_.TryTakeCall(algorithm, count)) {
      continue;
    }
    taken |= bit;
    PlannedCall& call = plan.calls.emplace_back();
    call.kind = PlannedCall::Kind::kLoneChecks;
    for (const uint32_t c : plan.lane_checks) {
      if (checks[c].params.algorithm == algorithm) {
        call.checks.push_back(c);
      }
    }
  }
  if (taken != 0) {
    plan.lane_checks.erase(
        std::remove_if(plan.lane_checks.begin(), plan.lane_checks.end(),
                       [&](uint32_t c) {
                         return (taken & (1u << static_cast<uint32_t>(
                                              checks[c].params.algorithm))) != 0;
                       }),
        plan.lane_checks.end());
  }
  return taken;
}

void RedisBackend::ReturnLanes(uint32_t algorithms) {
  while (algorithms != 0) {
    const auto algorithm = static_cast<Algorithm>(__builtin_ctz(algorithms));
    algorithms &= algorithms - 1;
    for (LaneCall& next : lanes_.CallReturned(algorithm)) {
      SendLaneCall(algorithm, std::move(next));
    }
  }
}

CommandBatch RedisBackend::EncodeCalls(absl::Span<const LimitCheck> checks, int64_t now,
                                       absl::Span<const PlannedCall> calls) {
  CommandBatch batch;
  absl::InlinedVector<std::string, 8> window_keys;  // a group's fixed windows
  absl::InlinedVector<std::string_view, 8> keys;
  thread_local std::string args;  // copied into the batch; reused by this thread
  char hits_text[24];
  char ttl_text[24];
  for (const PlannedCall& call : calls) {
    switch (call.kind) {
      case PlannedCall::Kind::kLocal:
        continue;
      case PlannedCall::Kind::kFixedWindow:
        batch.Add({"INCRBY", call.window_key, DecimalText(call.hits, hits_text)});
        if (call.upstream_key) {
          // As fixed_cache_impl.go's pipelineAppend: the TTL set again on every call.
          batch.Add({"EXPIRE", call.window_key,
                     DecimalText(UpstreamWindowTtlSeconds(call.params, now) + ExpirationJitter(),
                                 ttl_text)});
        } else {
          batch.Add({"PEXPIRE", call.window_key,
                     DecimalText(FixedWindowTtlMs(call.params, now), ttl_text), "NX"});
        }
        continue;
      case PlannedCall::Kind::kFixedWindowRefund: {
        const std::string_view key = call.window_key;
        const std::string_view hits = DecimalText(call.hits, hits_text);
        batch.AddEvalSha(scripts_.give_back(), absl::MakeConstSpan(&key, 1),
                         absl::MakeConstSpan(&hits, 1));
        continue;
      }
      case PlannedCall::Kind::kGroup:
      case PlannedCall::Kind::kLoneChecks:
        break;
    }
    const bool group = call.kind == PlannedCall::Kind::kGroup;
    window_keys.clear();
    keys.clear();
    args.clear();
    if (group) {
      AppendGroupScriptNow(now, &args);
    }
    for (const uint32_t c : call.checks) {
      const LimitCheck& check = checks[c];
      if (!group) {
        keys.push_back(StdView(check.key));
        AppendSingleScriptArgs(now, check.params, check.hits, &args, check.refund);
        continue;
      }
      if (check.params.algorithm == Algorithm::kFixedWindow) {
        std::string& key = window_keys.emplace_back();
        AppendFixedWindowKey(check.key, check.params, now, &key);
        keys.push_back(key);
      } else {
        keys.push_back(StdView(check.key));
      }
      AppendGroupScriptCheck(now, check.params, check.hits, &args, check.refund);
    }
    const RedisScript& script =
        group ? scripts_.group()
              : scripts_.for_lone_checks(checks[call.checks[0]].params.algorithm, keys.size());
    const std::string_view arg_view = args;
    batch.AddEvalSha(script, keys, absl::MakeConstSpan(&arg_view, 1));
  }
  return batch;
}

absl::Status RedisBackend::DecodeReplies(absl::Span<const PlannedCall> calls, int64_t now,
                                         absl::Span<RedisReply> replies,
                                         absl::Span<Decision> decisions) {
  size_t r = 0;  // the next reply
  WindowGiveBacks give_backs;
  for (const PlannedCall& call : calls) {
    switch (call.kind) {
      case PlannedCall::Kind::kLocal:
        decisions[call.checks[0]] = call.decision;
        continue;
      case PlannedCall::Kind::kGroup:
      case PlannedCall::Kind::kLoneChecks: {
        absl::Status s = DecodeScriptReply(
            replies[r++], call.checks.size(),
            [&](size_t i, const Decision& decision) { decisions[call.checks[i]] = decision; });
        if (!s.ok()) {
          return s;
        }
        continue;
      }
      case PlannedCall::Kind::kFixedWindowRefund: {
        const RedisReply& count = replies[r++];
        if (count.is_error()) {
          return ErrorReplyStatus(count);
        }
        if (!count.is_integer() && !count.is_nil()) {
          return absl::InternalError(
              absl::StrCat("redis: unexpected give_back reply ", count.LogString()));
        }
        decisions[call.checks[0]] =
            FixedWindowRefundDecision(call.params, now, count.is_nil() ? 0 : count.integer());
        continue;
      }
      case PlannedCall::Kind::kFixedWindow: {
        const RedisReply& count = replies[r];
        const RedisReply& expire = replies[r + 1];
        r += 2;
        // A counter that INCRBY cannot raise without passing 2^63 - 1 is full, as the memory
        // backend's saturates: denied, and nothing was added to give back.
        const bool saturated =
            count.is_error() && absl::StrContains(count.str(), "would overflow");
        for (const RedisReply* reply : {&count, &expire}) {
          if (reply->is_error() && !(saturated && reply == &count)) {
            return ErrorReplyStatus(*reply);
          }
        }
        if (!saturated && !count.is_integer()) {
          return absl::InternalError(
              absl::StrCat("redis: unexpected INCRBY reply ", count.LogString()));
        }
        const int64_t count_after =
            saturated ? std::numeric_limits<int64_t>::max()
                      : give_backs.Adjusted(call.window_key, count.integer());
        Decision decision = FixedWindowDecision(call.params, now, call.hits, count_after);
        uint64_t returned = call.hits;
        if (!decision.allowed && call.partial && !saturated) {
          // A lease call: the part that fits under the limit is granted, the rest goes back, so
          // that the count settles at the limit and no unit is stranded by this call.
          const int64_t before = count_after - static_cast<int64_t>(call.hits);
          const int64_t limit = static_cast<int64_t>(call.params.limit);
          if (before < limit && call.hits <= kMaxChargedHits) {
            const uint64_t fit = static_cast<uint64_t>(limit - std::max<int64_t>(0, before));
            decision = FixedWindowDecision(call.params, now, fit, limit);
            decision.granted = fit;
            returned = call.hits - fit;
          }
        }
        // INCRBY counted the hits; a denial gives them back unless the rule charges always
        // (envoyproxy/ratelimit's increment-first).
        if ((!decision.allowed || returned < call.hits) && returned > 0 &&
            !ChargesWhenDenied(call.params, call.hits) && !saturated) {
          GiveBack(call.window_key, returned);
          give_backs.Add(call.window_key, returned);
        }
        decisions[call.checks[0]] = decision;
        continue;
      }
    }
  }
  for (const PlannedCall& call : calls) {
    for (const uint32_t c : call.checks) {
      decisions[c].at_us = now;
    }
  }
  return absl::OkStatus();
}

void RedisBackend::QueueInLanes(absl::Span<const LimitCheck> checks,
                                absl::Span<const uint32_t> lane_checks,
                                const std::shared_ptr<SplitRequest>& request, int64_t now,
                                int64_t deadline) {
  uint32_t queued = 0;  // bit a: this request's checks of algorithm a are queued
  for (size_t k = 0; k < lane_checks.size(); ++k) {
    const Algorithm algorithm = checks[lane_checks[k]].params.algorithm;
    const uint32_t bit = 1u << static_cast<uint32_t>(algorithm);
    if ((queued & bit) != 0) {
      continue;  // queued with the first check of its algorithm
    }
    queued |= bit;
    LaneCalls ready = lanes_.Enqueue(algorithm, [&](std::vector<LaneCheck>& waiting) {
      for (size_t m = k; m < lane_checks.size(); ++m) {
        const LimitCheck& check = checks[lane_checks[m]];
        if (check.params.algorithm != algorithm) {
          continue;
        }
        LaneCheck& lane_check = waiting.emplace_back();
        lane_check.request = request;
        lane_check.index = lane_checks[m];
        lane_check.key.assign(check.key.data(), check.key.size());
        lane_check.params = check.params;
        lane_check.hits = check.hits;
        lane_check.refund = check.refund;
        lane_check.now_us = now;
        lane_check.deadline_us = deadline;
      }
    });
    for (LaneCall& call : ready) {
      SendLaneCall(algorithm, std::move(call));
    }
  }
}

void RedisBackend::SendLaneCall(Algorithm algorithm, LaneCall call) {
  absl::InlinedVector<std::string_view, 16> keys;
  // The arguments are copied into the batch: the text is built in a buffer this thread reuses.
  thread_local std::string args;
  args.clear();
  args.reserve(call.size() * kScriptCheckBytes);
  // Waiting in the lane is this process' time, not Redis': up to the queue grace of it is not
  // charged, so a short wait leaves the call the whole budget in flight and a long one (the
  // lane's calls out are stuck on a slow Redis) costs a check at most the grace more. A call
  // whose deadline has passed so fails unsent.
  const int64_t budget_us = absl::ToInt64Microseconds(options_.timeout);
  const int64_t grace_us = absl::ToInt64Microseconds(options_.client.queue_grace);
  int64_t deadline = clock_.MonotonicMicros() + budget_us;
  for (const LaneCheck& check : call) {
    keys.push_back(check.key);
    AppendSingleScriptArgs(check.now_us, check.params, check.hits, &args, check.refund);
    deadline = std::min(deadline, check.deadline_us + grace_us);
  }
  const std::string_view arg_view = args;
  CommandBatch batch;
  batch.AddEvalSha(scripts_.for_lone_checks(algorithm, call.size()), keys,
                   absl::MakeConstSpan(&arg_view, 1));
  // A request's checks of one algorithm travel together: its trace once per run of them.
  const SplitRequest* last = nullptr;
  for (const LaneCheck& check : call) {
    if (check.request.get() != last) {
      last = check.request.get();
      batch.AddTrace(last->trace);
    }
  }
  client_->Execute(
      std::move(batch), deadline,
      [this, algorithm, call = std::move(call)](absl::Status status,
                                                absl::Span<RedisReply> replies) mutable {
        // The lane's next calls first: the checks that waited for this one go out now.
        for (LaneCall& next : lanes_.CallReturned(algorithm)) {
          SendLaneCall(algorithm, std::move(next));
        }
        if (status.ok()) {
          status = DecodeScriptReply(replies[0], call.size(), [&](size_t i, const Decision& d) {
            Decision& out = call[i].request->decisions[call[i].index];
            out = d;
            out.at_us = call[i].now_us;
          });
        }
        for (LaneCheck& check : call) {
          check.request->Finish(status);
        }
      });
}

void RedisBackend::ExchangeQuotaDemand(const std::string& replica,
                                       absl::Span<const std::string> keys,
                                       absl::Span<const std::vector<double>> demands,
                                       int64_t ttl_ms, absl::Duration timeout,
                                       QuotaExchangeCallback done) {
  std::string ttl;
  AppendPackedDoubles({static_cast<double>(ttl_ms)}, &ttl);
  std::vector<std::string_view> call_keys(keys.begin(), keys.end());
  std::vector<std::string> packed;
  packed.reserve(keys.size() + 2);
  packed.push_back(replica);
  packed.push_back(std::move(ttl));
  for (const std::vector<double>& d : demands) {
    AppendPackedDoubles(d, &packed.emplace_back());
  }
  std::vector<std::string_view> args(packed.begin(), packed.end());
  CommandBatch batch;
  batch.AddEvalSha(scripts_.rlqs_exchange(), call_keys, args);
  client_->Execute(
      std::move(batch), clock_.MonotonicMicros() + absl::ToInt64Microseconds(timeout),
      [expected = keys.size(), done = std::move(done)](absl::Status status,
                                                       absl::Span<RedisReply> replies) mutable {
        if (!status.ok()) {
          std::move(done)(std::move(status));
          return;
        }
        const RedisReply& reply = replies[0];
        if (reply.is_error()) {
          std::move(done)(ErrorReplyStatus(reply));
          return;
        }
        if (!reply.is_array() || reply.elements().size() != expected) {
          std::move(done)(absl::InternalError(
              absl::StrCat("redis: unexpected rlqs_exchange reply ", reply.LogString())));
          return;
        }
        std::vector<std::vector<double>> others;
        others.reserve(expected);
        for (const RedisReply& element : reply.elements()) {
          others.push_back(ReadPackedDoubles(element.str()));
        }
        std::move(done)(std::move(others));
      });
}

int64_t RedisBackend::ExpirationJitter() const {
  const int64_t max_s = absl::ToInt64Seconds(options_.expiration_jitter);
  if (max_s <= 0) {
    return 0;
  }
  thread_local absl::InsecureBitGen random;
  return absl::Uniform<int64_t>(random, 0, max_s);
}

void RedisBackend::GiveBack(const std::string& window_key, uint64_t hits) {
  char hits_buffer[24];
  const std::string_view hits_text = DecimalText(hits, hits_buffer);
  const std::string_view key = window_key;
  CommandBatch batch;
  batch.AddEvalSha(scripts_.give_back(), absl::MakeConstSpan(&key, 1),
                   absl::MakeConstSpan(&hits_text, 1));
  client_->Execute(std::move(batch),
                   clock_.MonotonicMicros() + absl::ToInt64Microseconds(options_.timeout),
                   [](absl::Status, absl::Span<RedisReply>) {});
}

}  // namespace sluice

// ---- The admin API and the reset log.

namespace sluice {
namespace {

// What Inspect asks of one key, and where its replies start.
struct KeyRead {
  size_t check = 0;
  size_t key = 0;    // index in the check's StateReport::keys
  bool log = false;  // a sorted set (ZCARD, ZRANGE, PTTL); else a string (GET, PTTL)
  size_t reply = 0;
};

// PTTL's answer into *key: -2 missing, -1 no expiry, else milliseconds.
void ReadTtl(const RedisReply& reply, StoredKey* key) {
  if (reply.is_integer()) {
    key->ttl_ms = reply.integer() == -2 ? 0 : reply.integer();
  }
}

// Decodes one key's replies into *key and, for the key decisions read, *state.
absl::Status DecodeKeyRead(const LimitParams& params, int64_t now, const KeyRead& read,
                           absl::Span<const RedisReply> replies, StoredKey* key,
                           AlgorithmState* state) {
  AlgorithmState decoded = NewState(params.algorithm);
  if (read.log) {
    const RedisReply& count = replies[read.reply];
    const RedisReply& range = replies[read.reply + 1];
    ReadTtl(replies[read.reply + 2], key);
    if (count.is_error() && absl::StartsWith(count.str(), "WRONGTYPE")) {
      key->exists = true;
      key->readable = false;
    } else if (count.is_error()) {
      return ErrorReplyStatus(count);
    } else if (count.integer() > 0) {
      key->exists = true;
      if (!range.is_array() || range.elements().size() % 2 != 0) {
        return absl::InternalError(
            absl::StrCat("redis: unexpected ZRANGE reply ", range.LogString()));
      }
      std::vector<std::pair<std::string, std::string>> members;
      members.reserve(range.elements().size() / 2);
      for (size_t i = 0; i < range.elements().size(); i += 2) {
        members.emplace_back(range.elements()[i].str(), range.elements()[i + 1].str());
      }
      std::optional<SlidingWindowLogState> log = DecodeLogState(members);
      key->readable = log.has_value();
      if (log.has_value()) {
        decoded = *std::move(log);
      }
      if (static_cast<size_t>(count.integer()) > members.size()) {
        key->note = absl::StrCat("holds ", count.integer(), " entries; the newest ",
                                 members.size(),
                                 " were read, so older live hits are not counted here");
      }
    }
  } else {
    const RedisReply& value = replies[read.reply];
    ReadTtl(replies[read.reply + 1], key);
    if (value.is_error() && absl::StartsWith(value.str(), "WRONGTYPE")) {
      key->exists = true;
      key->readable = false;
    } else if (value.is_error()) {
      return ErrorReplyStatus(value);
    } else if (value.is_string()) {
      key->exists = true;
      std::optional<AlgorithmState> string_state = DecodeStringState(params, value.str(), now);
      key->readable = string_state.has_value();
      if (string_state.has_value()) {
        decoded = *std::move(string_state);
      }
    }
  }
  if (!key->exists) {
    key->ttl_ms = 0;
  }
  if (read.key == 0) {
    *state = std::move(decoded);
  }
  return absl::OkStatus();
}

// One reset log entry's storage key into *page ("k"), or what it says instead.
void ReadLogEntry(const RedisReply& fields, ResetLogPage* page) {
  if (!fields.is_array()) {
    page->lost = true;
    return;
  }
  const std::vector<RedisReply>& pairs = fields.elements();
  for (size_t i = 0; i + 1 < pairs.size(); i += 2) {
    const std::string& field = pairs[i].str();
    if (field == "k") {
      page->keys.push_back(pairs[i + 1].str());
    } else if (field == "all") {
      page->lost = true;
    }
    // "start": a reader's own first entry.
  }
}

}  // namespace

int64_t RedisBackend::AdminDeadline() const {
  return clock_.MonotonicMicros() +
         absl::ToInt64Microseconds(std::max(kAdminTimeout, options_.timeout));
}

std::vector<std::vector<StoredKey>> RedisBackend::KeysOf(absl::Span<const LimitCheck> checks,
                                                         int64_t now) const {
  std::vector<std::vector<StoredKey>> keys(checks.size());
  const bool upstream = options_.key_layout == KeyLayout::kUpstream;
  // Which window key the request's decisions read: PlanCalls' answer (a lone fixed window may
  // be upstream's, one in a group is Sluice's).
  std::vector<bool> reads_upstream(checks.size(), upstream);
  const CallPlan plan = PlanCalls(checks, now,
                                  {.lanes = false,
                                   .cluster = options_.cluster,
                                   .upstream_keys = upstream,
                                   .key_prefix = options_.key_prefix});
  for (const PlannedCall& call : plan.calls) {
    for (const uint32_t c : call.checks) {
      if (call.kind == PlannedCall::Kind::kFixedWindow ||
          call.kind == PlannedCall::Kind::kFixedWindowRefund) {
        reads_upstream[c] = call.upstream_key;
      } else if (call.kind == PlannedCall::Kind::kGroup) {
        reads_upstream[c] = false;
      }
    }
  }
  for (size_t i = 0; i < checks.size(); ++i) {
    const LimitCheck& check = checks[i];
    if (check.params.algorithm != Algorithm::kFixedWindow) {
      StoredKey& key = keys[i].emplace_back();
      key.key = std::string(check.key);
      key.role = "state";
      continue;
    }
    StoredKey sluice_key;
    sluice_key.role = "window";
    AppendFixedWindowKey(check.key, check.params, now, &sluice_key.key);
    StoredKey upstream_key;
    upstream_key.role = "upstream_window";
    const bool has_upstream =
        upstream && AppendUpstreamWindowKey(check.key, options_.key_prefix, check.params, now,
                                            &upstream_key.key);
    if (has_upstream && reads_upstream[i]) {
      keys[i].push_back(std::move(upstream_key));
      keys[i].push_back(std::move(sluice_key));
    } else {
      keys[i].push_back(std::move(sluice_key));
      if (has_upstream) {
        keys[i].push_back(std::move(upstream_key));
      }
    }
  }
  return keys;
}

void RedisBackend::Inspect(absl::Span<const LimitCheck> checks, InspectCallback done) {
  const int64_t now = redis_clock_.NowMicros();
  std::vector<StateReport> reports(checks.size());
  std::vector<LimitParams> params(checks.size());
  std::vector<KeyRead> reads;
  CommandBatch batch;
  const std::string newest = absl::StrCat("-", kMaxInspectedLogEntries);
  std::vector<std::vector<StoredKey>> keys = KeysOf(checks, now);
  for (size_t i = 0; i < checks.size(); ++i) {
    params[i] = checks[i].params;
    reports[i].now_us = now;
    reports[i].state = NewState(checks[i].params.algorithm);
    reports[i].keys = std::move(keys[i]);
    const bool log = Engine(checks[i].params.algorithm) == Algorithm::kSlidingWindowLog;
    for (size_t k = 0; k < reports[i].keys.size(); ++k) {
      const std::string_view key = reports[i].keys[k].key;
      reads.push_back(KeyRead{i, k, log, batch.size()});
      if (log) {
        batch.Add({"ZCARD", key});
        batch.Add({"ZRANGE", key, newest, "-1", "WITHSCORES"});
      } else {
        batch.Add({"GET", key});
      }
      batch.Add({"PTTL", key});
    }
  }
  if (batch.empty()) {
    std::move(done)(absl::OkStatus(), std::move(reports));
    return;
  }
  client_->Execute(
      std::move(batch), AdminDeadline(),
      [now, reads = std::move(reads), params = std::move(params), reports = std::move(reports),
       done = std::move(done)](absl::Status status, absl::Span<RedisReply> replies) mutable {
        for (size_t r = 0; status.ok() && r < reads.size(); ++r) {
          const KeyRead& read = reads[r];
          StateReport& report = reports[read.check];
          status = DecodeKeyRead(params[read.check], now, read, replies,
                                 &report.keys[read.key], &report.state);
        }
        if (!status.ok()) {
          std::move(done)(std::move(status), {});
          return;
        }
        for (size_t i = 0; i < reports.size(); ++i) {
          AlgorithmState copy = reports[i].state;
          reports[i].answer = sluice::Evaluate(params[i], copy, now, 0);
          reports[i].answer.at_us = now;
        }
        std::move(done)(absl::OkStatus(), std::move(reports));
      });
}

void RedisBackend::Reset(absl::Span<const LimitCheck> checks, ResetCallback done) {
  const int64_t now = redis_clock_.NowMicros();
  std::vector<std::string> keys;
  for (std::vector<StoredKey>& check_keys : KeysOf(checks, now)) {
    for (StoredKey& key : check_keys) {
      keys.push_back(std::move(key.key));
    }
  }
  CommandBatch batch;
  for (const std::string& key : keys) {
    batch.Add({"DEL", key});
  }
  if (batch.empty()) {
    std::move(done)(absl::OkStatus(), {});
    return;
  }
  client_->Execute(std::move(batch), AdminDeadline(),
                   [this, keys = std::move(keys), done = std::move(done)](
                       absl::Status status, absl::Span<RedisReply> replies) mutable {
                     // Whatever the DELs did, this replica's leases of the keys are of the
                     // old state (LeaseTable::Forget).
                     for (const std::string& key : keys) {
                       leases_.Forget(key);
                     }
                     std::vector<std::string> deleted;
                     for (size_t i = 0; status.ok() && i < replies.size(); ++i) {
                       if (replies[i].is_error()) {
                         status = ErrorReplyStatus(replies[i]);
                       } else if (replies[i].integer() > 0) {
                         deleted.push_back(std::move(keys[i]));
                       }
                     }
                     std::move(done)(std::move(status), std::move(deleted));
                   });
}

void RedisBackend::PublishResets(absl::Span<const std::string> storage_keys,
                                 PublishCallback done) {
  const std::string log = ResetLogKey(options_.key_prefix);
  const std::string entries = absl::StrCat(kResetLogEntries);
  CommandBatch batch;
  for (const std::string& key : storage_keys) {
    if (key.size() > kMaxLoggedKeyBytes) {
      batch.Add({"XADD", log, "MAXLEN", entries, "*", "all", "1"});
    } else {
      batch.Add({"XADD", log, "MAXLEN", entries, "*", "k", key});
    }
  }
  if (batch.empty()) {
    std::move(done)(absl::OkStatus());
    return;
  }
  client_->Execute(std::move(batch), AdminDeadline(),
                   [done = std::move(done)](absl::Status status,
                                            absl::Span<RedisReply> replies) mutable {
                     for (size_t i = 0; status.ok() && i < replies.size(); ++i) {
                       if (replies[i].is_error()) {
                         status = ErrorReplyStatus(replies[i]);
                       }
                     }
                     std::move(done)(std::move(status));
                   });
}

void RedisBackend::ReadResets(const std::string& cursor, ResetLogCallback done) {
  const std::string log = ResetLogKey(options_.key_prefix);
  CommandBatch batch;
  if (cursor.empty()) {
    batch.Add({"XADD", log, "MAXLEN", absl::StrCat(kResetLogEntries), "*", "start", "1"});
  } else {
    batch.Add({"XRANGE", log, cursor, "+", "COUNT", absl::StrCat(kResetLogEntries + 1)});
  }
  client_->Execute(
      std::move(batch), AdminDeadline(),
      [this, cursor, done = std::move(done)](absl::Status status,
                                             absl::Span<RedisReply> replies) mutable {
        if (!status.ok()) {
          std::move(done)(std::move(status), {});
          return;
        }
        const RedisReply& reply = replies[0];
        if (reply.is_error()) {
          std::move(done)(ErrorReplyStatus(reply), {});
          return;
        }
        ResetLogPage page;
        page.cursor = cursor;
        if (cursor.empty()) {
          if (!reply.is_string()) {
            std::move(done)(absl::InternalError(absl::StrCat(
                                "redis: unexpected XADD reply ", reply.LogString())),
                            {});
            return;
          }
          page.cursor = reply.str();
          std::move(done)(absl::OkStatus(), std::move(page));
          return;
        }
        if (!reply.is_array()) {
          std::move(done)(absl::InternalError(absl::StrCat(
                              "redis: unexpected XRANGE reply ", reply.LogString())),
                          {});
          return;
        }
        const std::vector<RedisReply>& entries = reply.elements();
        for (size_t i = 0; i < entries.size(); ++i) {
          const RedisReply& entry = entries[i];
          if (!entry.is_array() || entry.elements().size() != 2 ||
              !entry.elements()[0].is_string()) {
            std::move(done)(absl::InternalError(absl::StrCat(
                                "redis: unexpected XRANGE entry ", entry.LogString())),
                            {});
            return;
          }
          const std::string& id = entry.elements()[0].str();
          if (i == 0 && id != cursor) {
            page.lost = true;  // the cursor's entry is gone: so may be some after it
          }
          if (id != cursor) {
            ReadLogEntry(entry.elements()[1], &page);
          }
          page.cursor = id;
        }
        // Resets made through any replica end this one's leases of those keys.
        if (page.lost) {
          leases_.ForgetAll();
        }
        for (const std::string& key : page.keys) {
          leases_.Forget(key);
        }
        std::move(done)(absl::OkStatus(), std::move(page));
      });
}

}  // namespace sluice
