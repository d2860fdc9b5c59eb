#include "server/backend/redis_backend.h"

#include <charconv>
#include <string_view>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "lua/lua_scripts.h"

namespace sluice {
namespace {

constexpr int kFieldsPerDecision = 5;  // allowed, remaining, retry_after, reset_after, delay
constexpr int kArgsPerCheck = 5;       // (group: algorithm,) limit, period, burst, hits
constexpr size_t kMaxNumber = 21;      // digits of any int64/uint64, with sign

// The arguments of one script call. Numbers are formatted into one buffer reserved for the
// worst case up front, so it never reallocates and the views handed out stay valid.
class Args {
 public:
  // REQUIRES: at most `count` arguments are added.
  explicit Args(size_t count) { buffer_.reserve(count * kMaxNumber); }
  void Add(std::string_view text) { views_.push_back(text); }
  template <typename Int>
  void AddNumber(Int value) {
    size_t start = buffer_.size();
    buffer_.resize(start + kMaxNumber);
    char* begin = buffer_.data() + start;
    char* end = std::to_chars(begin, begin + kMaxNumber, value).ptr;
    buffer_.resize(start + static_cast<size_t>(end - begin));
    views_.push_back(std::string_view(begin, static_cast<size_t>(end - begin)));
  }
  absl::Span<const std::string_view> views() const { return views_; }

 private:
  std::string buffer_;
  absl::InlinedVector<std::string_view, 16> views_;
};

absl::Status DecodeReply(const RedisReply& reply, size_t expected,
                         std::vector<Decision>* decisions) {
  if (reply.is_error()) {
    return absl::UnavailableError(absl::StrCat("redis: ", reply.str()));
  }
  if (!reply.is_array() || reply.elements().size() != expected * kFieldsPerDecision) {
    return absl::InternalError(absl::StrCat("redis: unexpected script reply ", reply.DebugString()));
  }
  const auto& e = reply.elements();
  for (size_t i = 0; i < expected; ++i) {
    const RedisReply* f = &e[i * kFieldsPerDecision];
    for (int k = 0; k < kFieldsPerDecision; ++k) {
      if (!f[k].is_integer()) {
        return absl::InternalError(
            absl::StrCat("redis: non-integer field in script reply ", reply.DebugString()));
      }
    }
    Decision d;
    d.allowed = f[0].integer() != 0;
    d.remaining = static_cast<uint64_t>(std::max<int64_t>(0, f[1].integer()));
    d.retry_after_us = f[2].integer();
    d.reset_after_us = f[3].integer();
    d.delay_us = f[4].integer();
    decisions->push_back(d);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisBackend>> RedisBackend::Create(RedisBackendOptions options,
                                                                   const Clock& clock) {
  std::unique_ptr<RedisExecutor> executor;
  if (options.cluster) {
    RedisClusterClientOptions cluster;
    cluster.seeds = options.cluster_seeds;
    cluster.node = options.client;
    auto client = RedisClusterClient::Create(std::move(cluster), clock);
    if (!client.ok()) {
      return client.status();
    }
    executor = std::move(*client);
  } else {
    auto client = RedisClient::Create(options.client, clock);
    if (!client.ok()) {
      return client.status();
    }
    executor = std::move(*client);
  }
  std::unique_ptr<RedisBackend> backend(
      new RedisBackend(std::move(options), clock, std::move(executor)));
  for (const LuaScript& script : LuaScripts()) {
    auto registered = backend->client_->RegisterScript(
        std::string_view(script.name.data(), script.name.size()),
        std::string_view(script.source.data(), script.source.size()));
    if (!registered.ok()) {
      return registered.status();
    }
    if (script.name == "group") {
      backend->group_script_ = *registered;
    } else if (auto algorithm = ParseAlgorithm(script.name)) {
      backend->single_key_scripts_[static_cast<size_t>(*algorithm)] = *registered;
    }
  }
  for (size_t a = 0; a < backend->single_key_scripts_.size(); ++a) {
    if (backend->single_key_scripts_[a] == nullptr) {
      return absl::InternalError(absl::StrCat("no embedded Lua script for ",
                                              AlgorithmName(static_cast<Algorithm>(a))));
    }
  }
  if (backend->group_script_ == nullptr) {
    return absl::InternalError("no embedded Lua script named group");
  }
  return backend;
}

RedisBackend::RedisBackend(RedisBackendOptions options, const Clock& clock,
                           std::unique_ptr<RedisExecutor> client)
    : options_(std::move(options)),
      cluster_(options_.cluster),
      clock_(clock),
      client_(std::move(client)) {}

void RedisBackend::Evaluate(absl::Span<const LimitCheck> checks, EvaluateCallback done) {
  if (checks.empty()) {
    std::move(done)(absl::OkStatus(), {});
    return;
  }
  char now_buffer[kMaxNumber];
  std::string_view now;  // empty: the scripts read Redis TIME
  if (options_.use_caller_clock) {
    auto r = std::to_chars(now_buffer, now_buffer + sizeof(now_buffer), clock_.NowMicros());
    now = std::string_view(now_buffer, static_cast<size_t>(r.ptr - now_buffer));
  }

  CommandBatch batch;
  absl::InlinedVector<uint32_t, 8> group_sizes;
  absl::InlinedVector<std::string_view, 8> keys;
  for (size_t i = 0; i < checks.size();) {
    size_t end = i + 1;
    while (end < checks.size() && checks[end].group == checks[i].group) {
      ++end;
    }
    const size_t size = end - i;
    keys.clear();
    Args args(1 + size * (kArgsPerCheck + 1));
    args.Add(now);
    for (size_t c = i; c < end; ++c) {
      const LimitCheck& check = checks[c];
      keys.push_back(std::string_view(check.key.data(), check.key.size()));
      if (size > 1) {
        args.AddNumber(static_cast<int>(check.params.algorithm));
      }
      args.AddNumber(check.params.limit);
      args.AddNumber(check.params.period_us);
      args.AddNumber(check.params.burst);
      args.AddNumber(check.hits);
    }
    const RedisScript& script =
        size > 1 ? *group_script_
                 : *single_key_scripts_[static_cast<size_t>(checks[i].params.algorithm)];
    batch.AddEvalSha(script, keys, args.views());
    group_sizes.push_back(static_cast<uint32_t>(size));
    i = end;
  }

  const int64_t deadline = clock_.MonotonicMicros() + absl::ToInt64Microseconds(options_.timeout);
  client_->Execute(
      std::move(batch), deadline,
      [group_sizes = std::move(group_sizes), total = checks.size(), done = std::move(done)](
          absl::Status status, absl::Span<RedisReply> replies) mutable {
        if (!status.ok()) {
          std::move(done)(std::move(status), {});
          return;
        }
        std::vector<Decision> decisions;
        decisions.reserve(total);
        for (size_t g = 0; g < replies.size(); ++g) {
          if (absl::Status s = DecodeReply(replies[g], group_sizes[g], &decisions); !s.ok()) {
            std::move(done)(std::move(s), {});
            return;
          }
        }
        std::move(done)(absl::OkStatus(), decisions);
      });
}

}  // namespace sluice
