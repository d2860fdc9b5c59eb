#include "server/backend/memcached_backend.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/algorithm/fixed_window.h"
#include "server/backend/script_codec.h"
#include "server/common/failure_reason.h"
#include "server/common/logging.h"
#include "server/common/status_macros.h"
#include "server/key/upstream_key.h"
#include "server/memcached/meta_protocol.h"
#include "server/redis/node_metrics.h"
#include "server/redis/sha1.h"

namespace sluice {
namespace {

constexpr int64_t kMicrosPerSecond = 1'000'000;

// What one check sends.
enum class Op : uint8_t {
  kNone,       // decided here (a limit of 0)
  kIncrement,  // ma increment-or-create
  kRead,       // mg
  kDecrement,  // ma MD (a refund)
};

// The TTL of a window written at `now_us`: the rest of the window in whole seconds, rounded
// up, plus one (memcached's clock ticks in whole seconds), as memcached reads it.
int64_t WindowExpiry(const LimitParams& params, int64_t now_us) {
  const int64_t end = FixedWindowAt(params, now_us).end_us;
  const int64_t ttl_s = (end - now_us + kMicrosPerSecond - 1) / kMicrosPerSecond + 1;
  return MemcachedExpiry(ttl_s, now_us / kMicrosPerSecond);
}

// A failure memcached answered with an error line.
absl::Status ErrorReplyStatus(const MetaReply& reply) {
  if (absl::StartsWith(reply.error, "CLIENT_ERROR") || reply.error == "ERROR") {
    return WithFailureReason(
        absl::InvalidArgumentError(absl::StrCat("memcached refused a command: ", reply.error)),
        FailureReason::kArgument);
  }
  const bool oom = absl::StrContains(reply.error, "out of memory");
  return WithFailureReason(
      absl::UnavailableError(absl::StrCat("memcached: ", reply.error)),
      oom ? FailureReason::kOutOfMemory : FailureReason::kOther);
}

int64_t CountOf(const MetaReply& reply) {
  if (reply.kind != MetaReply::Kind::kValue) {
    return 0;
  }
  return static_cast<int64_t>(
      std::min<uint64_t>(reply.value, std::numeric_limits<int64_t>::max()));
}

}  // namespace

// One Evaluate, from its commands to its decisions.
struct MemcachedBackend::Call {
  struct Check {
    LimitParams params;
    uint64_t hits = 0;  // as sent
    uint64_t asked = 0;  // as the request asked
    uint32_t group = 0;
    bool refund = false;
    Op op = Op::kNone;
    size_t reply = 0;  // index of its reply
    std::string key;
  };
  std::vector<Check> checks;
  std::vector<Decision> decisions;
  int64_t now_us = 0;
  EvaluateCallback done;
};

std::string MemcachedBackend::WindowKey(absl::string_view storage_key, absl::string_view prefix,
                                        const LimitParams& params, int64_t now_us) {
  std::string key;
  if (!AppendUpstreamWindowKey(storage_key, prefix, params, now_us, &key)) {
    return std::string();
  }
  if (IsLegalMemcachedKey(key)) {
    return key;
  }
  std::string hashed = absl::StrCat(prefix, "#", Sha1Hex(key));
  return IsLegalMemcachedKey(hashed) ? hashed : Sha1Hex(key);
}

absl::StatusOr<std::unique_ptr<MemcachedBackend>> MemcachedBackend::Create(
    MemcachedBackendOptions options, const Clock& clock, MemcachedClientResources resources) {
  // The breaker judges a server by what a decision gets, whoever built the options (as
  // RedisBackend::Create does; MemcachedClientOptions::breaker_budget).
  options.client.breaker_budget = options.timeout;
  ASSIGN_OR_RETURN(std::unique_ptr<MemcachedClient> client,
                   MemcachedClient::Create(options.client, clock, std::move(resources)));
  return std::unique_ptr<MemcachedBackend>(
      new MemcachedBackend(std::move(options), clock, std::move(client)));
}

MemcachedBackend::MemcachedBackend(MemcachedBackendOptions options, const Clock& clock,
                                   std::unique_ptr<MemcachedClient> client)
    : options_(std::move(options)), clock_(clock), client_(std::move(client)) {}

MemcachedBackend::~MemcachedBackend() { Stop(); }

void MemcachedBackend::Evaluate(absl::Span<const LimitCheck> checks,
                                const TraceParent& /*trace*/, EvaluateCallback done) {
  auto call = std::make_shared<Call>();
  call->now_us = clock_.NowMicros();
  call->checks.resize(checks.size());
  call->decisions.resize(checks.size());
  std::vector<MemcachedOp> ops;
  ops.reserve(checks.size());
  for (size_t i = 0; i < checks.size(); ++i) {
    const LimitCheck& in = checks[i];
    Call::Check& check = call->checks[i];
    check.params = in.params;
    check.asked = in.hits;
    check.group = in.group;
    check.refund = in.refund;
    if (in.params.algorithm != Algorithm::kFixedWindow) {
      std::move(done)(
          WithFailureReason(
              absl::InvalidArgumentError(absl::StrCat(
                  "memcached keeps fixed windows only, not ", AlgorithmName(in.params.algorithm))),
              FailureReason::kArgument),
          {});
      return;
    }
    if (in.params.limit == 0) {
      call->decisions[i] = ZeroLimitDecision(in.params, in.refund ? 0 : in.hits, call->now_us);
      continue;
    }
    check.key = WindowKey(in.key, options_.key_prefix, in.params, call->now_us);
    if (check.key.empty()) {
      std::move(done)(WithFailureReason(absl::InvalidArgumentError(absl::StrCat(
                                            "not a storage key of prefix '",
                                            options_.key_prefix, "'")),
                                        FailureReason::kArgument),
                      {});
      return;
    }
    MemcachedOp op;
    op.key = check.key;
    if (in.refund) {
      // A give-back of a charge whose window is over gives nothing (LimitCheck::at_us).
      check.hits = RefundsAnEndedWindow(in, call->now_us) ? 0 : std::min(in.hits, kMaxChargedHits);
      check.op = check.hits == 0 ? Op::kRead : Op::kDecrement;
    } else {
      // A window admits nothing past limit + 1 whatever the hits, and memcached's counter
      // wraps at 2^64 where INCRBY refuses: a charge is sent as at most limit + 1 hits (decided
      // as the whole request would be), so that no run of huge charges can wrap it to 0.
      check.hits = std::min(WireHits(in.params, in.hits), in.params.limit + 1);
      check.op = check.hits == 0 ? Op::kRead : Op::kIncrement;
    }
    switch (check.op) {
      case Op::kIncrement:
        AppendIncrementOrCreate(check.key, check.hits,
                                WindowExpiry(in.params, call->now_us), &op.command);
        break;
      case Op::kDecrement:
        AppendDecrement(check.key, check.hits, &op.command);
        break;
      case Op::kRead:
      case Op::kNone:
        AppendGetValue(check.key, &op.command);
        break;
    }
    check.reply = ops.size();
    ops.push_back(std::move(op));
  }
  if (ops.empty()) {
    std::move(done)(absl::OkStatus(), call->decisions);
    return;
  }
  call->done = std::move(done);
  const int64_t deadline =
      clock_.MonotonicMicros() + absl::ToInt64Microseconds(options_.timeout);
  client_->Execute(std::move(ops), deadline,
                   [this, call](absl::Status status, std::vector<MetaReply> replies) mutable {
                     Finish(std::move(call), std::move(status), std::move(replies));
                   });
}

void MemcachedBackend::Finish(std::shared_ptr<Call> call, absl::Status status,
                              std::vector<MetaReply> replies) {
  EvaluateCallback done = std::move(call->done);
  if (!status.ok()) {
    std::move(done)(std::move(status), {});
    return;
  }
  const int64_t now = call->now_us;
  for (size_t i = 0; i < call->checks.size(); ++i) {
    const Call::Check& check = call->checks[i];
    if (check.op == Op::kNone) {
      continue;
    }
    const MetaReply& reply = replies[check.reply];
    if (reply.kind == MetaReply::Kind::kError) {
      std::move(done)(ErrorReplyStatus(reply), {});
      return;
    }
    if (check.op == Op::kIncrement && reply.kind != MetaReply::Kind::kValue) {
      std::move(done)(WithFailureReason(absl::InternalError(
                                            "memcached: an increment answered without a value"),
                                        FailureReason::kOther),
                      {});
      return;
    }
  }
  // Group by group (adjacent checks of one group id; a lone check is a group of one), in order,
  // each deciding on its counts less what earlier groups' denials will give back to the same
  // key (WindowGiveBacks). All or nothing: a group with a denial gives back the hits of its
  // checks, as does a lone denial; a rule that charges always keeps them.
  std::vector<int64_t> counts(call->checks.size(), 0);
  WindowGiveBacks pending;
  std::vector<MemcachedOp> give_back;
  const size_t n = call->checks.size();
  for (size_t begin = 0; begin < n;) {
    size_t end = begin + 1;
    while (end < n && call->checks[end].group == call->checks[begin].group) {
      ++end;
    }
    for (size_t i = begin; i < end; ++i) {
      const Call::Check& check = call->checks[i];
      if (check.op == Op::kNone) {
        continue;
      }
      counts[i] = pending.Adjusted(check.key, CountOf(replies[check.reply]));
      if (check.refund) {
        call->decisions[i] = FixedWindowRefundDecision(check.params, now, counts[i]);
      } else if (check.op == Op::kRead) {
        call->decisions[i] = FixedWindowDecision(check.params, now, 0, counts[i]);
      } else {
        call->decisions[i] = FixedWindowDecision(check.params, now, check.hits, counts[i]);
      }
    }
    bool denied = false;
    for (size_t i = begin; i < end; ++i) {
      denied = denied || (!call->checks[i].refund && !call->decisions[i].allowed);
    }
    if (denied) {
      for (size_t i = begin; i < end; ++i) {
        const Call::Check& check = call->checks[i];
        if (check.op != Op::kIncrement || ChargesWhenDenied(check.params, check.asked)) {
          continue;
        }
        MemcachedOp op;
        op.key = check.key;
        AppendDecrement(check.key, check.hits, &op.command);
        give_back.push_back(std::move(op));
        pending.Add(check.key, check.hits);
        if (call->decisions[i].allowed) {
          // Admitted alone, not with its group: its state is as before the request.
          call->decisions[i] = FixedWindowDecision(
              check.params, now, 0, std::max<int64_t>(0, counts[i] - static_cast<int64_t>(check.hits)));
        }
      }
    }
    begin = end;
  }
  for (Decision& decision : call->decisions) {
    decision.at_us = now;
  }
  std::move(done)(absl::OkStatus(), call->decisions);
  if (!give_back.empty()) {
    const int64_t deadline =
        clock_.MonotonicMicros() + absl::ToInt64Microseconds(options_.timeout);
    client_->Execute(std::move(give_back), deadline,
                     [](absl::Status status, std::vector<MetaReply>) {
                       if (!status.ok()) {
                         SLUICE_LOG_EVERY_SECONDS(WARNING, 10)
                             << "memcached: a denied request's hits were not given back: "
                             << status.message();
                       }
                     });
  }
}

void MemcachedBackend::AppendMetrics(std::string* out) const {
  std::vector<NodeMetrics> nodes;
  client_->CollectNodeMetrics(&nodes);
  AppendNodeMetrics(nodes, out, "memcached");
  absl::StrAppend(out,
                  "# HELP sluice_memcached_servers Servers keys are placed over now\n"
                  "# TYPE sluice_memcached_servers gauge\n"
                  "sluice_memcached_servers ",
                  client_->servers(),
                  "\n# HELP sluice_memcached_srv_refreshes_total SRV lookups after the first, "
                  "by result\n# TYPE sluice_memcached_srv_refreshes_total counter\n"
                  "sluice_memcached_srv_refreshes_total{result=\"ok\"} ",
                  client_->srv_refreshes() - client_->srv_failures(),
                  "\nsluice_memcached_srv_refreshes_total{result=\"failed\"} ",
                  client_->srv_failures(), "\n");
}

}  // namespace sluice

// ---- The admin API.

namespace sluice {

int64_t MemcachedBackend::AdminDeadline() const {
  return clock_.MonotonicMicros() +
         absl::ToInt64Microseconds(std::max(kAdminTimeout, options_.timeout));
}

absl::StatusOr<std::vector<std::string>> MemcachedBackend::AdminKeys(
    absl::Span<const LimitCheck> checks, int64_t now_us) const {
  std::vector<std::string> keys;
  keys.reserve(checks.size());
  for (const LimitCheck& check : checks) {
    if (check.params.algorithm != Algorithm::kFixedWindow) {
      return absl::InvalidArgumentError(absl::StrCat("memcached keeps fixed windows only, not ",
                                                     AlgorithmName(check.params.algorithm)));
    }
    keys.push_back(WindowKey(check.key, options_.key_prefix, check.params, now_us));
    if (keys.back().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("not a storage key of prefix '", options_.key_prefix, "'"));
    }
  }
  return keys;
}

void MemcachedBackend::Inspect(absl::Span<const LimitCheck> checks, InspectCallback done) {
  const int64_t now = clock_.NowMicros();
  absl::StatusOr<std::vector<std::string>> keys = AdminKeys(checks, now);
  if (!keys.ok()) {
    std::move(done)(keys.status(), {});
    return;
  }
  std::vector<LimitParams> params;
  std::vector<MemcachedOp> ops;
  for (size_t i = 0; i < checks.size(); ++i) {
    params.push_back(checks[i].params);
    MemcachedOp& op = ops.emplace_back();
    op.key = (*keys)[i];
    AppendGetValueAndTtl(op.key, &op.command);
  }
  if (ops.empty()) {
    std::move(done)(absl::OkStatus(), {});
    return;
  }
  client_->Execute(
      std::move(ops), AdminDeadline(),
      [now, params = std::move(params), keys = *std::move(keys), done = std::move(done)](
          absl::Status status, std::vector<MetaReply> replies) mutable {
        if (!status.ok()) {
          std::move(done)(std::move(status), {});
          return;
        }
        std::vector<StateReport> reports(params.size());
        for (size_t i = 0; i < params.size(); ++i) {
          const MetaReply& reply = replies[i];
          if (reply.kind == MetaReply::Kind::kError) {
            std::move(done)(ErrorReplyStatus(reply), {});
            return;
          }
          StateReport& report = reports[i];
          report.now_us = now;
          StoredKey& key = report.keys.emplace_back();
          key.key = std::move(keys[i]);
          key.role = "upstream_window";
          FixedWindowState state;  // a fresh key, as NewState makes it
          if (reply.kind == MetaReply::Kind::kValue) {
            state.window_start_us = FixedWindowAt(params[i], now).start_us;
            key.exists = true;
            key.readable = reply.numeric;
            // memcached's TTLs are whole seconds.
            key.ttl_ms = !reply.ttl_seconds.has_value() ? 0
                         : *reply.ttl_seconds < 0       ? -1
                                                        : *reply.ttl_seconds * 1000;
            state.count = reply.numeric ? reply.value : 0;
          }
          report.state = state;
          AlgorithmState copy = report.state;
          report.answer = sluice::Evaluate(params[i], copy, now, 0);
          report.answer.at_us = now;
        }
        std::move(done)(absl::OkStatus(), std::move(reports));
      });
}

void MemcachedBackend::Reset(absl::Span<const LimitCheck> checks, ResetCallback done) {
  absl::StatusOr<std::vector<std::string>> keys = AdminKeys(checks, clock_.NowMicros());
  if (!keys.ok()) {
    std::move(done)(keys.status(), {});
    return;
  }
  std::vector<MemcachedOp> ops;
  for (const std::string& key : *keys) {
    MemcachedOp& op = ops.emplace_back();
    op.key = key;
    AppendDelete(op.key, &op.command);
  }
  if (ops.empty()) {
    std::move(done)(absl::OkStatus(), {});
    return;
  }
  client_->Execute(std::move(ops), AdminDeadline(),
                   [keys = *std::move(keys), done = std::move(done)](
                       absl::Status status, std::vector<MetaReply> replies) mutable {
                     std::vector<std::string> deleted;
                     for (size_t i = 0; status.ok() && i < replies.size(); ++i) {
                       if (replies[i].kind == MetaReply::Kind::kError) {
                         status = ErrorReplyStatus(replies[i]);
                       } else if (replies[i].kind == MetaReply::Kind::kOther) {
                         deleted.push_back(std::move(keys[i]));  // HD
                       }
                     }
                     std::move(done)(std::move(status), std::move(deleted));
                   });
}

}  // namespace sluice
