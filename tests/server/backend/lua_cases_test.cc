// Runs the composed Lua scripts of lua/ (LuaScripts()) on a real redis-server: every shared case
// of tests/cases/*.cases through each algorithm's single-key script and through "group" with a
// group of one, random sequences against the C++ algorithms, and the Redis side of the contract
// (all-or-nothing groups, TTLs, argument errors, keys made of any bytes, the fixed window's
// per-window keys). The scripts' arguments and replies are the packed doubles of
// server/backend/script_codec.h; a fixed window, which only the group script runs, is run
// through it with a group of one.
#include <hiredis/hiredis.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lua/lua_scripts.h"
#include "server/algorithm/algorithm.h"
#include "server/algorithm/fixed_window.h"
#include "server/backend/script_codec.h"
#include "server/key/storage_key.h"
#include "tests/support/algorithm_cases.h"
#include "tests/support/redis_server.h"

namespace sluice::testing {

// Names a case by where it is written, instead of gtest's byte dump.
void PrintTo(const AlgorithmCase& test_case, std::ostream* os) {
  *os << test_case.file << ":" << test_case.line << " case " << test_case.name;
}

namespace {

using ::testing::HasSubstr;

constexpr Algorithm kAllAlgorithms[] = {
    Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog, Algorithm::kSlidingWindowCounter,
    Algorithm::kTokenBucket, Algorithm::kLeakyBucket,      Algorithm::kGcra,
};

struct ReplyFree {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyFree>;
struct ContextFree {
  void operator()(redisContext* context) const { redisFree(context); }
};

// One blocking hiredis connection with typed replies.
class RedisConnection {
 public:
  explicit RedisConnection(int port) {
    timeval timeout{10, 0};
    context_.reset(redisConnectWithTimeout("127.0.0.1", port, timeout));
    if (context_ != nullptr && context_->err == 0) {
      redisSetTimeout(context_.get(), timeout);
    }
  }

  bool ok() const { return context_ != nullptr && context_->err == 0; }

  // Sends every command in one write, then reads their replies in order (nullptr on I/O error).
  std::vector<ReplyPtr> Pipeline(const std::vector<std::vector<std::string>>& commands) {
    for (const std::vector<std::string>& args : commands) {
      std::vector<const char*> argv;
      std::vector<size_t> lengths;
      for (const std::string& arg : args) {
        argv.push_back(arg.data());
        lengths.push_back(arg.size());
      }
      redisAppendCommandArgv(context_.get(), static_cast<int>(argv.size()), argv.data(),
                             lengths.data());
    }
    std::vector<ReplyPtr> replies;
    for (size_t i = 0; i < commands.size(); ++i) {
      void* reply = nullptr;
      if (redisGetReply(context_.get(), &reply) != REDIS_OK) {
        reply = nullptr;
      }
      replies.emplace_back(static_cast<redisReply*>(reply));
    }
    return replies;
  }

  ReplyPtr Command(const std::vector<std::string>& args) {
    return std::move(Pipeline({args})[0]);
  }

 private:
  std::unique_ptr<redisContext, ContextFree> context_;
};

// The redis-server shared by every test of this binary, with every script loaded. Stopped at
// exit by the static's destructor.
struct LuaRedis {
  std::unique_ptr<RedisServer> server;
  std::unique_ptr<RedisConnection> connection;
  std::map<std::string, std::string> sha;  // script name -> SHA1 from SCRIPT LOAD
  std::string error;                       // why the set-up failed, if it did
};

LuaRedis& Shared() {
  static LuaRedis redis = [] {
    LuaRedis r;
    absl::StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Start();
    if (!server.ok()) {
      r.error = server.status().ToString();
      return r;
    }
    r.server = std::move(*server);
    r.connection = std::make_unique<RedisConnection>(r.server->port());
    if (!r.connection->ok()) {
      r.error = "cannot connect to the test redis-server";
      return r;
    }
    for (const LuaScript& script : LuaScripts()) {
      ReplyPtr reply = r.connection->Command({"SCRIPT", "LOAD", std::string(script.source)});
      if (reply == nullptr || reply->type != REDIS_REPLY_STRING) {
        absl::StrAppend(&r.error, "SCRIPT LOAD ", script.name, ": ",
                        reply == nullptr ? "I/O error" : std::string(reply->str, reply->len),
                        "\n");
        continue;
      }
      r.sha[std::string(script.name)] = std::string(reply->str, reply->len);
    }
    return r;
  }();
  return redis;
}

RedisConnection& Redis() { return *Shared().connection; }

// One EVALSHA: a script, its keys and its arguments.
struct ScriptCall {
  std::string script;
  std::vector<std::string> keys;
  std::vector<std::string> args;
};

std::vector<std::string> EvalshaArgs(const ScriptCall& call) {
  std::vector<std::string> argv = {"EVALSHA", Shared().sha[call.script],
                                   absl::StrCat(call.keys.size())};
  argv.insert(argv.end(), call.keys.begin(), call.keys.end());
  argv.insert(argv.end(), call.args.begin(), call.args.end());
  return argv;
}

// The key a check's state lives in: `key` itself, or for a fixed window the key of the window
// that holds now_us (one key per window, as the backend names it).
std::string StateKey(const std::string& key, int64_t now_us, const LimitParams& p) {
  if (p.algorithm != Algorithm::kFixedWindow) {
    return key;
  }
  std::string window_key;
  AppendFixedWindowKey(key, p, now_us, &window_key);
  return window_key;
}

// The single-key script of params.algorithm. A fixed window has no single-key script (the
// backend runs a lone one natively), so it runs as a group of one on its window key: the only
// script that holds it, and so the one the shared cases must check.
ScriptCall Single(const std::string& key, int64_t now_us, const LimitParams& p, uint64_t hits,
                  bool refund = false) {
  std::string args;
  if (p.algorithm == Algorithm::kFixedWindow) {
    AppendGroupScriptNow(now_us, &args);
    AppendGroupScriptCheck(now_us, p, hits, &args, refund);
    return ScriptCall{"group", {StateKey(key, now_us, p)}, {std::move(args)}};
  }
  AppendSingleScriptArgs(now_us, p, hits, &args, refund);
  // Concurrency runs the sliding window log's script (Engine).
  return ScriptCall{std::string(AlgorithmName(Engine(p.algorithm))), {key}, {std::move(args)}};
}

struct GroupCheck {
  std::string key;  // the base key: a fixed window's check runs on its window key
  LimitParams params;
  uint64_t hits = 1;
  bool refund = false;
};

ScriptCall Group(int64_t now_us, const std::vector<GroupCheck>& checks) {
  ScriptCall call{"group", {}, {""}};
  AppendGroupScriptNow(now_us, &call.args[0]);
  for (const GroupCheck& check : checks) {
    call.keys.push_back(StateKey(check.key, now_us, check.params));
    AppendGroupScriptCheck(now_us, check.params, check.hits, &call.args[0], check.refund);
  }
  return call;
}

// One check of a batch script call: its key, its own now, its limit and hits.
struct BatchCheck {
  std::string key;
  int64_t now;
  LimitParams params;
  uint64_t hits = 1;
  bool refund = false;
};

// The batch script of `algorithm` ("<algorithm>_batch") deciding `checks` in one call. REQUIRES:
// every check is of `algorithm`, which is not the fixed window (it has no batch script).
ScriptCall Batch(Algorithm algorithm, const std::vector<BatchCheck>& checks) {
  ScriptCall call{absl::StrCat(AlgorithmName(Engine(algorithm)), "_batch"), {}, {""}};
  for (const BatchCheck& check : checks) {
    call.keys.push_back(check.key);
    AppendSingleScriptArgs(check.now, check.params, check.hits, &call.args[0], check.refund);
  }
  return call;
}

// A script's reply as decisions: one packed record of 40 bytes per key, `count` keys. An error
// reply is kUnknown with its text; any other reply that is not exactly that is an error status.
absl::StatusOr<std::vector<Decision>> ToDecisions(const redisReply* reply, size_t count) {
  if (reply == nullptr) {
    return absl::UnavailableError("redis I/O error");
  }
  if (reply->type == REDIS_REPLY_ERROR) {
    return absl::UnknownError(std::string(reply->str, reply->len));
  }
  if (reply->type != REDIS_REPLY_STRING) {
    return absl::InternalError(absl::StrCat("not a packed string: reply type ", reply->type));
  }
  const absl::string_view packed(reply->str, reply->len);
  std::vector<Decision> decisions;
  absl::Status decoded = DecodeScriptDecisions(packed, count, &decisions);
  if (!decoded.ok()) {
    return decoded;
  }
  // DecodeScriptDecisions reads a negative remaining as 0; a script must never reply one.
  for (size_t i = 0; i < count; ++i) {
    double remaining;
    std::memcpy(&remaining, packed.data() + i * kScriptDecisionBytes + sizeof(double),
                sizeof(double));
    if (remaining < 0) {
      return absl::InternalError(absl::StrCat("decision ", i, ": negative remaining ", remaining));
    }
  }
  return decisions;
}

// The single-key scripts' text form (for redis-cli and redis-benchmark): five decimal
// arguments instead of the packed one.
// Five arguments when the rule charges if admitted (charge left out), six when it charges always.
ScriptCall TextSingle(const std::string& key, int64_t now_us, const LimitParams& p, uint64_t hits) {
  ScriptCall call{std::string(AlgorithmName(p.algorithm)),
                  {key},
                  {absl::StrCat(now_us), absl::StrCat(p.limit), absl::StrCat(p.period_us),
                   absl::StrCat(p.burst), absl::StrCat(hits)}};
  if (p.charge == Charge::kAlways) {
    call.args.push_back("1");
  }
  return call;
}

// A text-form reply as decisions: an array of 5 integers per key, `count` keys. An error reply
// is kUnknown with its text.
absl::StatusOr<std::vector<Decision>> FromTextReply(const redisReply* reply, size_t count) {
  if (reply == nullptr) {
    return absl::UnavailableError("redis I/O error");
  }
  if (reply->type == REDIS_REPLY_ERROR) {
    return absl::UnknownError(std::string(reply->str, reply->len));
  }
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 5 * count) {
    return absl::InternalError(absl::StrCat("not an array of 5 integers per key: type ",
                                            reply->type, ", ", reply->elements, " elements"));
  }
  std::vector<Decision> decisions;
  for (size_t i = 0; i < reply->elements; i += 5) {
    int64_t v[5];
    for (size_t j = 0; j < 5; ++j) {
      const redisReply* e = reply->element[i + j];
      if (e->type != REDIS_REPLY_INTEGER) {
        return absl::InternalError(absl::StrCat("element ", i + j, " is not an integer"));
      }
      v[j] = e->integer;
    }
    if ((v[0] != 0 && v[0] != 1) || v[1] < 0) {
      return absl::InternalError(absl::StrCat("bad allowed ", v[0], " or remaining ", v[1]));
    }
    decisions.push_back(Decision{v[0] == 1, static_cast<uint64_t>(v[1]), v[2], v[3], v[4]});
  }
  return decisions;
}

using ReplyDecoder = absl::StatusOr<std::vector<Decision>> (*)(const redisReply*, size_t);

absl::StatusOr<std::vector<Decision>> Eval(const ScriptCall& call,
                                           ReplyDecoder decode = ToDecisions) {
  ReplyPtr reply = Redis().Command(EvalshaArgs(call));
  return decode(reply.get(), call.keys.size());
}

// Runs `calls` in order, for the steps of a caller's clock that jumps hours in microseconds of
// real time: each call's keys then must not expire in between on Redis' own clock, as a TTL of a
// millisecond would. So each call is followed by PERSIST of its keys, all in one MULTI/EXEC:
// during EXEC, Redis expires keys on the time EXEC started (a script on the time it started),
// so no key can expire between a script that writes it and the PERSIST that follows. (TTLs are
// tested on their own, on Redis' clock.)
std::vector<absl::StatusOr<std::vector<Decision>>> RunAtomically(
    const std::vector<ScriptCall>& calls, ReplyDecoder decode = ToDecisions) {
  std::vector<std::vector<std::string>> commands = {{"MULTI"}};
  std::vector<size_t> call_index;  // EXEC element of each call
  for (const ScriptCall& call : calls) {
    call_index.push_back(commands.size() - 1);
    commands.push_back(EvalshaArgs(call));
    for (const std::string& key : call.keys) {
      commands.push_back({"PERSIST", key});
    }
  }
  commands.push_back({"EXEC"});
  std::vector<ReplyPtr> replies = Redis().Pipeline(commands);
  std::vector<absl::StatusOr<std::vector<Decision>>> out;
  const redisReply* exec = replies.back().get();
  for (size_t i = 0; i < calls.size(); ++i) {
    if (exec == nullptr || exec->type != REDIS_REPLY_ARRAY ||
        exec->elements != commands.size() - 2) {
      const redisReply* queued = replies[call_index[i] + 1].get();
      out.push_back(absl::InternalError(
          absl::StrCat("transaction failed: ",
                       queued != nullptr && queued->type == REDIS_REPLY_ERROR
                           ? std::string(queued->str, queued->len)
                           : "EXEC did not return one reply per command")));
      continue;
    }
    out.push_back(decode(exec->element[call_index[i]], calls[i].keys.size()));
  }
  return out;
}

int64_t Integer(const std::vector<std::string>& command) {
  ReplyPtr reply = Redis().Command(command);
  EXPECT_TRUE(reply != nullptr && reply->type == REDIS_REPLY_INTEGER) << command[0];
  return reply != nullptr && reply->type == REDIS_REPLY_INTEGER ? reply->integer : -999;
}

// The key's serialized value (DUMP), "" if it does not exist.
std::string Dump(const std::string& key) {
  ReplyPtr reply = Redis().Command({"DUMP", key});
  if (reply == nullptr || reply->type != REDIS_REPLY_STRING) {
    return "";
  }
  return std::string(reply->str, reply->len);
}

// Redis' clock in microseconds.
int64_t RedisTimeUs() {
  ReplyPtr reply = Redis().Command({"TIME"});
  EXPECT_TRUE(reply != nullptr && reply->type == REDIS_REPLY_ARRAY && reply->elements == 2);
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY || reply->elements != 2) {
    return 0;
  }
  return std::stoll(reply->element[0]->str) * 1'000'000 + std::stoll(reply->element[1]->str);
}

// The TTL the scripts give a state: reset_after rounded up to whole milliseconds, at least 1.
int64_t ExpectedTtlMs(int64_t reset_after_us) {
  return std::max<int64_t>(1, (reset_after_us + 999) / 1000);
}

LimitParams Params(Algorithm algorithm, uint64_t limit, int64_t period_us, uint64_t burst) {
  return LimitParams{algorithm, limit, period_us, burst};
}

std::string Describe(const std::vector<Decision>& decisions) {
  std::string out;
  for (const Decision& d : decisions) {
    absl::StrAppend(&out, out.empty() ? "" : " | ", FormatDecision(d));
  }
  return out;
}

// struct.pack("<d...", ...): little-endian IEEE doubles (the host's order: script_codec.cc
// requires a little-endian host), built by hand rather than with the encoders, so that
// malformed arguments and seeded states do not depend on the code under test.
std::string PackDoubles(std::initializer_list<double> values) {
  std::string out;
  for (double value : values) {
    char bytes[sizeof(double)];
    std::memcpy(bytes, &value, sizeof(double));
    out.append(bytes, sizeof(double));
  }
  return out;
}

// ---- The shared case files.


// Why the shared cases with a limit of 0 are not run through the single-key and batch scripts.
constexpr char kZeroLimitNotScripted[] =
    "a limit of 0 never reaches the single-key and batch scripts: RedisBackend decides it "
    "without Redis, and the scripts refuse it (LuaScriptsTest.MalformedArgumentsAreErrors)";

class LuaScriptsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(Shared().error, "") << "test redis-server set-up failed"; }
};

class LuaCasesTest : public ::testing::TestWithParam<AlgorithmCase> {
 protected:
  void SetUp() override { ASSERT_EQ(Shared().error, "") << "test redis-server set-up failed"; }

  // Runs every step of the case on a fresh key through `make_call` and checks each decision.
  template <typename MakeCall>
  void RunCase(const std::string& mode, const MakeCall& make_call) {
    const AlgorithmCase& test_case = GetParam();
    const std::string key =
        absl::StrCat("sluice:{lua_cases:", mode, ":", CaseFileStem(test_case.file), ":",
                     test_case.name, "}");
    ASSERT_TRUE(Redis().Command({"DEL", key}) != nullptr);
    std::vector<ScriptCall> calls;
    for (const CaseStep& step : test_case.steps) {
      calls.push_back(
          make_call(key, kCaseBaseUs + step.at_us, test_case.params, step.hits, step.refund));
    }
    std::vector<absl::StatusOr<std::vector<Decision>>> results = RunAtomically(calls);
    ASSERT_EQ(results.size(), test_case.steps.size());
    for (size_t i = 0; i < results.size(); ++i) {
      const CaseStep& step = test_case.steps[i];
      ASSERT_TRUE(results[i].ok()) << StepLocation(test_case, step) << ": " << results[i].status();
      ASSERT_EQ(results[i]->size(), 1u);
      EXPECT_EQ(FormatDecision((*results[i])[0]), FormatDecision(step.expected))
          << StepLocation(test_case, step) << ": case " << test_case.name << " (" << mode
          << "), at " << step.at_us << (step.refund ? " refund " : " hits ") << step.hits;
    }
  }
};

// Verifies that each algorithm's single-key script produces every step's expected decision, in
// order, on one fresh key, with the caller's clock.
TEST_P(LuaCasesTest, SingleKeyScriptMatchesCases) {
  if (GetParam().params.limit == 0 && GetParam().params.algorithm != Algorithm::kFixedWindow) {
    GTEST_SKIP() << kZeroLimitNotScripted;
  }
  RunCase("single", [](const std::string& key, int64_t now, const LimitParams& params,
                       uint64_t hits, bool refund) { return Single(key, now, params, hits, refund); });
}

// Verifies that the "group" script, given a group of one, produces every step's expected
// decision, in order, on one fresh key, with the caller's clock.
TEST_P(LuaCasesTest, GroupOfOneMatchesCases) {
  RunCase("group", [](const std::string& key, int64_t now, const LimitParams& params,
                      uint64_t hits, bool refund) { return Group(now, {{key, params, hits, refund}}); });
}

// Verifies that each algorithm's batch script, given every step of a case as one call on one
// key repeated (each record with its step's now), produces every step's expected decision: a
// record is decided on what the records before it wrote.
TEST_P(LuaCasesTest, BatchScriptCallOfEveryStepMatchesCases) {
  const AlgorithmCase& test_case = GetParam();
  if (test_case.params.algorithm == Algorithm::kFixedWindow) {
    GTEST_SKIP() << "a lone fixed window runs without a script, so it has no batch script";
  }
  if (test_case.params.limit == 0) {
    GTEST_SKIP() << kZeroLimitNotScripted;
  }
  const std::string key = absl::StrCat("sluice:{lua_cases:batch:", CaseFileStem(test_case.file),
                                       ":", test_case.name, "}");
  ASSERT_TRUE(Redis().Command({"DEL", key}) != nullptr);
  std::vector<BatchCheck> checks;
  for (const CaseStep& step : test_case.steps) {
    checks.push_back({key, kCaseBaseUs + step.at_us, test_case.params, step.hits, step.refund});
  }
  std::vector<absl::StatusOr<std::vector<Decision>>> results =
      RunAtomically({Batch(test_case.params.algorithm, checks)});
  ASSERT_EQ(results.size(), 1u);
  ASSERT_TRUE(results[0].ok()) << results[0].status();
  ASSERT_EQ(results[0]->size(), test_case.steps.size());
  for (size_t i = 0; i < test_case.steps.size(); ++i) {
    const CaseStep& step = test_case.steps[i];
    EXPECT_EQ(FormatDecision((*results[0])[i]), FormatDecision(step.expected))
        << StepLocation(test_case, step) << ": case " << test_case.name << " (batch), at "
        << step.at_us << (step.refund ? " refund " : " hits ") << step.hits;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, LuaCasesTest, ::testing::ValuesIn(AllAlgorithmCases().cases),
                         [](const ::testing::TestParamInfo<AlgorithmCase>& info) {
                           return absl::StrCat(CaseFileStem(info.param.file), "_", info.param.name);
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(LuaCasesTest);

// Verifies that the case files were found and parsed, so the parameterized tests above did run.
TEST(LuaCaseFilesTest, EveryAlgorithmHasCases) {
  EXPECT_THAT(AllAlgorithmCases().errors, ::testing::IsEmpty());
  std::map<std::string, int> per_file;
  for (const AlgorithmCase& test_case : AllAlgorithmCases().cases) {
    ++per_file[CaseFileStem(test_case.file)];
  }
  for (Algorithm algorithm : kAllAlgorithms) {
    EXPECT_GE(per_file[std::string(AlgorithmName(algorithm))], 12) << AlgorithmName(algorithm);
  }
}

// ---- The embedded scripts.

// Verifies that LuaScripts() holds exactly the composed scripts, sorted by name (a single-key and
// a batch script per algorithm but the fixed window, which the backend runs without one, the
// group and give_back), and that each loads into Redis (SCRIPT LOAD compiles it).
TEST_F(LuaScriptsTest, EmbedsTheScriptsOfEveryAlgorithmAndTheGroup) {
  std::vector<std::string> names;
  for (const LuaScript& script : LuaScripts()) {
    names.push_back(std::string(script.name));
    EXPECT_FALSE(script.source.empty()) << script.name;
    EXPECT_EQ(Shared().sha.count(std::string(script.name)), 1u) << script.name;
  }
  EXPECT_THAT(names, ::testing::ElementsAre(
                         "gcra", "gcra_batch", "give_back", "group", "leaky_bucket",
                         "leaky_bucket_batch", "rlqs_exchange", "sliding_window_counter",
                         "sliding_window_counter_batch", "sliding_window_log",
                         "sliding_window_log_batch", "token_bucket", "token_bucket_batch"));
}

// ---- Random sequences against the C++ algorithms.

struct RandomStep {
  int64_t now;
  uint64_t hits;
  bool refund = false;
};

// About one step in five is a refund.
bool RandomRefund(std::mt19937_64& rng) { return rng() % 5 == 0; }

// One step on the C++ reference: a refund or a request.
Decision Decide(const LimitParams& params, AlgorithmState& state, int64_t now, uint64_t hits,
                bool refund) {
  return refund ? Refund(params, state, now, hits) : Evaluate(params, state, now, hits);
}

// A limit of 0 only where the script takes it: the group script (and so a lone fixed window,
// which these tests run as a group of one). The single-key and batch scripts refuse it.
LimitParams RandomParams(std::mt19937_64& rng, Algorithm algorithm, bool zero_limit) {
  static constexpr uint64_t kLimits[] = {0, 1, 2, 3, 5, 7, 10, 60, 100, 999, 1000, 1'000'000};
  static constexpr int64_t kPeriods[] = {1,       3,         1000,          333'333,
                                         1'000'000, 7'000'000, 60'000'000, 3'600'000'000,
                                         86'400'000'000};
  static constexpr uint64_t kBursts[] = {0, 1, 2, 3, 5, 10, 100, 1000};
  auto pick = [&](const auto& values) {
    return values[std::uniform_int_distribution<size_t>(0, std::size(values) - 1)(rng)];
  };
  LimitParams p{algorithm, pick(kLimits), pick(kPeriods), pick(kBursts)};
  if (p.limit == 0 && !zero_limit) {
    p.limit = 1;
  }
  if (rng() % 4 == 0) {
    p.burst = p.limit;
  }
  if (rng() % 3 == 0) {
    p.charge = Charge::kAlways;
  }
  return p;
}

uint64_t RandomHits(std::mt19937_64& rng, const LimitParams& p) {
  const uint64_t most = std::max<uint64_t>(1, std::min<uint64_t>(
      p.algorithm == Algorithm::kFixedWindow || p.algorithm == Algorithm::kSlidingWindowLog ||
              p.algorithm == Algorithm::kSlidingWindowCounter
          ? p.limit
          : p.burst,
      20));
  switch (rng() % 8) {
    case 0:
      return 0;
    case 1:
      return most + 1;
    case 2:
    case 3:
      return std::uniform_int_distribution<uint64_t>(1, most)(rng);
    default:
      return 1;
  }
}

// The next time: the same microsecond, one later, exactly at or just before the last retry or
// reset, or a random stretch of up to two periods (rarely, one day). A clock that steps back
// goes up to a period into the past.
int64_t NextTime(std::mt19937_64& rng, int64_t now, const LimitParams& p, const Decision& last,
                 bool step_back) {
  const int64_t span = std::min<int64_t>(2 * p.period_us, int64_t{1} << 40);
  switch (rng() % 10) {
    case 0:
      return now;
    case 1:
      return now + 1;
    case 2:
      return now + std::max<int64_t>(0, last.retry_after_us);
    case 3:
      return now + std::max<int64_t>(0, last.retry_after_us - 1);
    case 4:
      return now + std::max<int64_t>(0, last.reset_after_us);
    case 5:
      return now + std::max<int64_t>(0, last.reset_after_us - 1);
    case 6:
      return now + (rng() % 50 == 0 ? 86'400'000'000 : 0);
    case 7:
      if (step_back) {
        return now - std::uniform_int_distribution<int64_t>(1, p.period_us)(rng);
      }
      [[fallthrough]];
    default:
      return now + std::uniform_int_distribution<int64_t>(0, span)(rng);
  }
}

// Runs `sequences` random sequences of `steps` single-key decisions against the C++ algorithm
// and compares every field. With step_back the clock sometimes steps back, and the reference
// drops a state whose reset_after is 0 as the scripts do (both decide alike only while time
// does not go backwards). The reference keeps one state per Redis key: a fixed window keeps one
// per window, so a clock stepping back into an earlier window finds that window's count again,
// as the scripts do (RunAtomically keeps every window key).
void RunRandomSingleKeySequences(uint64_t seed, int sequences, int steps, bool step_back) {
  std::mt19937_64 rng(seed);
  int mismatches = 0;
  for (int seq = 0; seq < sequences && mismatches < 10; ++seq) {
    const Algorithm algorithm = kAllAlgorithms[seq % 6];
    const LimitParams params = RandomParams(rng, algorithm, algorithm == Algorithm::kFixedWindow);
    const std::string key = absl::StrCat("sluice:{random:", seed, ":", seq, "}");
    std::map<std::string, AlgorithmState> states;  // StateKey -> the C++ state of that key
    int64_t now = kCaseBaseUs + static_cast<int64_t>(rng() % 86'400'000'000);
    std::vector<ScriptCall> calls;
    std::vector<RandomStep> trace;
    std::vector<Decision> expected;
    for (int i = 0; i < steps; ++i) {
      const uint64_t hits = RandomHits(rng, params);
      const bool refund = RandomRefund(rng);
      AlgorithmState& state =
          states.try_emplace(StateKey(key, now, params), NewState(algorithm)).first->second;
      const Decision d = Decide(params, state, now, hits, refund);
      if (step_back && d.allowed && d.reset_after_us == 0) {
        state = NewState(algorithm);
      }
      calls.push_back(Single(key, now, params, hits, refund));
      trace.push_back({now, hits, refund});
      expected.push_back(d);
      now = NextTime(rng, now, params, d, step_back);
    }
    std::vector<absl::StatusOr<std::vector<Decision>>> results = RunAtomically(calls);
    for (size_t i = 0; i < results.size(); ++i) {
      const std::string got =
          results[i].ok() ? Describe(*results[i]) : results[i].status().ToString();
      if (got != FormatDecision(expected[i])) {
        ++mismatches;
        std::string history;
        for (size_t j = 0; j <= i; ++j) {
          absl::StrAppend(&history, "\n  at ", trace[j].now - kCaseBaseUs,
                          trace[j].refund ? " refund " : " hits ", trace[j].hits, " -> ",
                          FormatDecision(expected[j]));
        }
        ADD_FAILURE() << "seed " << seed << " sequence " << seq << " "
                      << FormatParams(params) << ", step " << i << ": lua " << got
                      << "\n  c++ steps (at offset from kCaseBaseUs):" << history;
        break;
      }
    }
  }
}

// Verifies that random sequences, steered onto the retry and reset boundaries, decide bit for
// bit as the C++ algorithms do, while time never goes backwards.
TEST_F(LuaScriptsTest, RandomSequencesMatchCpp) {
  RunRandomSingleKeySequences(20231115, 600, 24, /*step_back=*/false);
}

// Verifies the same with a clock that sometimes steps back (the caller's clock of different
// replicas).
TEST_F(LuaScriptsTest, RandomSequencesWithClockSteppingBackMatchCpp) {
  RunRandomSingleKeySequences(42, 300, 24, /*step_back=*/true);
}

// Verifies that random batch script calls (one to six records over three keys of one
// algorithm, keys repeating, each record with its own limits and now) decide bit for bit as the
// C++ algorithms do when the records are evaluated one after the other.
TEST_F(LuaScriptsTest, RandomBatchesMatchCpp) {
  std::mt19937_64 rng(99);
  constexpr Algorithm kScripted[] = {Algorithm::kSlidingWindowLog,
                                     Algorithm::kSlidingWindowCounter, Algorithm::kTokenBucket,
                                     Algorithm::kLeakyBucket, Algorithm::kGcra};
  for (int seq = 0; seq < 150; ++seq) {
    const Algorithm algorithm = kScripted[seq % 5];
    std::vector<LimitParams> params;
    std::vector<AlgorithmState> states;
    std::vector<std::string> keys;
    for (int k = 0; k < 3; ++k) {
      params.push_back(RandomParams(rng, algorithm, /*zero_limit=*/false));
      states.push_back(NewState(algorithm));
      keys.push_back(absl::StrCat("sluice:{batch:", seq, "}", k));
    }
    int64_t now = kCaseBaseUs + static_cast<int64_t>(rng() % 86'400'000'000);
    std::vector<ScriptCall> calls;
    std::vector<std::vector<Decision>> expected;
    for (int call = 0; call < 8; ++call) {
      std::vector<BatchCheck> checks;
      std::vector<Decision> decisions;
      const size_t size = 1 + rng() % 6;
      for (size_t r = 0; r < size; ++r) {
        const size_t k = rng() % 3;
        const uint64_t hits = RandomHits(rng, params[k]);
        const bool refund = RandomRefund(rng);
        checks.push_back({keys[k], now, params[k], hits, refund});
        decisions.push_back(Decide(params[k], states[k], now, hits, refund));
        now = NextTime(rng, now, params[k], decisions.back(), false);
      }
      calls.push_back(Batch(algorithm, checks));
      expected.push_back(std::move(decisions));
    }
    std::vector<absl::StatusOr<std::vector<Decision>>> results = RunAtomically(calls);
    for (size_t i = 0; i < results.size(); ++i) {
      ASSERT_TRUE(results[i].ok()) << results[i].status();
      ASSERT_EQ(Describe(*results[i]), Describe(expected[i]))
          << "batch sequence " << seq << " call " << i << ": " << AlgorithmName(algorithm);
    }
  }
}

// Verifies that a batch call with a malformed record after valid ones is an error reply naming
// the record, and (as lua/batch.lua says) that the records before it were decided and written:
// the scripts validate each record just before deciding it.
TEST_F(LuaScriptsTest, BatchWithABadLaterRecordFailsWhole) {
  const std::string key = "sluice:{batch:bad}1";
  const std::string key2 = "sluice:{batch:bad}2";
  ASSERT_TRUE(Redis().Command({"DEL", key, key2}) != nullptr);
  const int64_t now = kCaseBaseUs;
  ScriptCall call{"token_bucket_batch", {key, key2},
                  {PackDoubles({static_cast<double>(now), 10, 1'000'000, 10, 1, 0}) +
                   PackDoubles({static_cast<double>(now), 10, 1'000'000, 10, 1.5, 0})}};
  absl::StatusOr<std::vector<Decision>> d = RunAtomically({call})[0];
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(std::string(d.status().message()),
              HasSubstr("ERR sluice token_bucket_batch: key 2: hits must be an integer"));
  EXPECT_EQ(Integer({"EXISTS", key}), 1);
  EXPECT_EQ(Integer({"EXISTS", key2}), 0);
  EXPECT_EQ(Integer({"DEL", key}), 1);
}

// Verifies that random groups of one to four keys of mixed algorithms and charges decide as the
// C++ algorithms do when run all-or-nothing (decide every key on a copy; commit all only if all
// admit, and those that charge always in any case), as the memory backend runs a group.
TEST_F(LuaScriptsTest, RandomGroupsMatchCpp) {
  std::mt19937_64 rng(7);
  for (int seq = 0; seq < 150; ++seq) {
    const size_t size = 1 + rng() % 4;
    std::vector<GroupCheck> checks;
    std::vector<AlgorithmState> states;
    for (size_t k = 0; k < size; ++k) {
      const LimitParams params =
          RandomParams(rng, kAllAlgorithms[rng() % 6], /*zero_limit=*/true);
      checks.push_back({absl::StrCat("sluice:{group:", seq, "}", k), params, 1});
      states.push_back(NewState(params.algorithm));
    }
    int64_t now = kCaseBaseUs + static_cast<int64_t>(rng() % 86'400'000'000);
    std::vector<ScriptCall> calls;
    std::vector<std::vector<Decision>> expected;
    for (int step = 0; step < 12; ++step) {
      std::vector<AlgorithmState> trial = states;
      std::vector<Decision> decisions;
      bool all = true;
      for (size_t k = 0; k < size; ++k) {
        checks[k].hits = RandomHits(rng, checks[k].params);
        checks[k].refund = RandomRefund(rng);
        decisions.push_back(
            Decide(checks[k].params, trial[k], now, checks[k].hits, checks[k].refund));
        all = all && decisions.back().allowed;
      }
      // As the memory backend: all or nothing, but for the checks charged whatever happens and
      // the refunds.
      for (size_t k = 0; k < size; ++k) {
        if (all || checks[k].refund || ChargesWhenDenied(checks[k].params, checks[k].hits)) {
          states[k] = std::move(trial[k]);
        }
      }
      calls.push_back(Group(now, checks));
      expected.push_back(decisions);
      now = NextTime(rng, now, checks[0].params, decisions[0], false);
    }
    std::vector<absl::StatusOr<std::vector<Decision>>> results = RunAtomically(calls);
    for (size_t i = 0; i < results.size(); ++i) {
      ASSERT_TRUE(results[i].ok()) << results[i].status();
      ASSERT_EQ(Describe(*results[i]), Describe(expected[i]))
          << "group sequence " << seq << " step " << i << ": " << FormatParams(checks[0].params)
          << " ...";
    }
  }
}

// Verifies that durations too long to report saturate at 2^53 us exactly as in C++ (a refill of
// a billion tokens at one per day), also from an odd microsecond, where now + 2^53 is not a
// double: the scripts search on offsets from now.
TEST_F(LuaScriptsTest, SaturatedDurationsMatchCpp) {
  for (Algorithm algorithm : {Algorithm::kTokenBucket, Algorithm::kLeakyBucket, Algorithm::kGcra}) {
    const LimitParams params = Params(algorithm, 1, 86'400'000'000, 1'000'000'000);
    const std::string key = absl::StrCat("sluice:{saturate}", AlgorithmName(algorithm));
    AlgorithmState state = NewState(algorithm);
    const int64_t t = kCaseBaseUs + 1;
    std::vector<ScriptCall> calls;
    std::vector<Decision> expected;
    for (auto [offset, hits] : std::vector<std::pair<int64_t, uint64_t>>{
             {0, 1'000'000'000}, {1, 2}, {2, 1'000'000'000}, {86'400'000'001, 0}}) {
      calls.push_back(Single(key, t + offset, params, hits));
      expected.push_back(Evaluate(params, state, t + offset, hits));
    }
    std::vector<absl::StatusOr<std::vector<Decision>>> results = RunAtomically(calls);
    bool saturated = false;
    for (size_t i = 0; i < results.size(); ++i) {
      ASSERT_TRUE(results[i].ok()) << results[i].status();
      EXPECT_EQ(Describe(*results[i]), FormatDecision(expected[i]))
          << AlgorithmName(algorithm) << " step " << i;
      saturated = saturated || expected[i].reset_after_us == (int64_t{1} << 53);
    }
    EXPECT_TRUE(saturated) << AlgorithmName(algorithm) << ": the test no longer saturates";
  }
}

// ---- The text form.

// Verifies that the single-key scripts' text form (five or six decimal arguments, answered with an
// array of five integers) decides as the packed form and the C++ do, and leaves the same state:
// random sequences run both ways, on a key per form.
TEST_F(LuaScriptsTest, TextFormDecidesAsPackedForm) {
  std::mt19937_64 rng(1729);
  for (int seq = 0; seq < 100; ++seq) {
    // Every algorithm but the fixed window, which has no single-key script.
    const Algorithm algorithm = kAllAlgorithms[1 + seq % 5];
    const LimitParams params = RandomParams(rng, algorithm, /*zero_limit=*/false);
    const std::string packed_key = absl::StrCat("sluice:{text:", seq, "}packed");
    const std::string text_key = absl::StrCat("sluice:{text:", seq, "}text");
    AlgorithmState state = NewState(algorithm);
    int64_t now = kCaseBaseUs + static_cast<int64_t>(rng() % 86'400'000'000);
    std::vector<ScriptCall> packed_calls;
    std::vector<ScriptCall> text_calls;
    std::vector<Decision> expected;
    for (int i = 0; i < 16; ++i) {
      const uint64_t hits = RandomHits(rng, params);
      expected.push_back(Evaluate(params, state, now, hits));
      packed_calls.push_back(Single(packed_key, now, params, hits));
      text_calls.push_back(TextSingle(text_key, now, params, hits));
      now = NextTime(rng, now, params, expected.back(), /*step_back=*/false);
    }
    std::vector<absl::StatusOr<std::vector<Decision>>> packed = RunAtomically(packed_calls);
    std::vector<absl::StatusOr<std::vector<Decision>>> text =
        RunAtomically(text_calls, FromTextReply);
    for (size_t i = 0; i < expected.size(); ++i) {
      ASSERT_TRUE(packed[i].ok()) << packed[i].status();
      ASSERT_TRUE(text[i].ok()) << text[i].status();
      ASSERT_EQ(Describe(*text[i]), Describe(*packed[i]))
          << "sequence " << seq << " " << FormatParams(params) << ", step " << i;
      ASSERT_EQ(Describe(*text[i]), FormatDecision(expected[i]))
          << "sequence " << seq << " " << FormatParams(params) << ", step " << i;
    }
    EXPECT_EQ(Dump(text_key), Dump(packed_key)) << "sequence " << seq;
  }
}

// ---- Groups.

// Verifies that a group is all-or-nothing: when one key denies, every other key, of every
// algorithm, keeps its state (value and TTL) bit for bit, so a following request decides as if
// the denied group never happened; and that an admitted group writes every key.
TEST_F(LuaScriptsTest, DeniedGroupWritesNothing) {
  const LimitParams narrow = Params(Algorithm::kFixedWindow, 1, 60'000'000, 0);
  for (Algorithm algorithm : kAllAlgorithms) {
    for (bool denier_first : {false, true}) {
      const LimitParams params = Params(algorithm, 5, 1'000'000, 5);
      const std::string tag = absl::StrCat("{aon:", AlgorithmName(algorithm), denier_first, "}");
      const std::string key = tag + "key";
      const std::string denier = tag + "narrow";
      auto group = [&](int64_t now, uint64_t hits) {
        std::vector<GroupCheck> checks = {{key, params, hits}, {denier, narrow, 1}};
        if (denier_first) {
          std::swap(checks[0], checks[1]);
        }
        absl::StatusOr<std::vector<Decision>> d = Eval(Group(now, checks));
        EXPECT_TRUE(d.ok() && d->size() == 2) << d.status();
        if (!d.ok() || d->size() != 2) {
          return std::make_pair(Decision{}, Decision{});
        }
        return denier_first ? std::make_pair((*d)[1], (*d)[0]) : std::make_pair((*d)[0], (*d)[1]);
      };
      // On a whole second, 40 s into a minute: every step below is in the same windows, so
      // each check keeps one key throughout.
      const int64_t t = kCaseBaseUs + 10'000'000'000;
      const std::string key_state = StateKey(key, t, params);
      const std::string denier_state = StateKey(denier, t, narrow);
      AlgorithmState state = NewState(algorithm);

      // Both admit: both are written.
      auto [first, first_narrow] = group(t, 2);
      EXPECT_EQ(FormatDecision(first), FormatDecision(Evaluate(params, state, t, 2)));
      EXPECT_TRUE(first.allowed && first_narrow.allowed);
      ASSERT_NE(Dump(key_state), "") << AlgorithmName(algorithm);
      ASSERT_NE(Dump(denier_state), "");
      const std::string value = Dump(key_state);
      const std::string denier_value = Dump(denier_state);
      const int64_t expire_at = Integer({"PEXPIRETIME", key_state});

      // The narrow limit denies: the key's own decision is reported, but nothing is written.
      AlgorithmState copy = state;
      auto [second, second_narrow] = group(t + 1'000, 2);
      EXPECT_FALSE(second_narrow.allowed);
      EXPECT_TRUE(second.allowed) << AlgorithmName(algorithm);
      EXPECT_EQ(FormatDecision(second), FormatDecision(Evaluate(params, copy, t + 1'000, 2)));
      EXPECT_EQ(Dump(key_state), value) << AlgorithmName(algorithm);
      EXPECT_EQ(Integer({"PEXPIRETIME", key_state}), expire_at) << AlgorithmName(algorithm);
      EXPECT_EQ(Dump(denier_state), denier_value) << AlgorithmName(algorithm);

      // The next request sees the state of the first group only.
      absl::StatusOr<std::vector<Decision>> third = Eval(Single(key, t + 2'000, params, 1));
      ASSERT_TRUE(third.ok()) << third.status();
      EXPECT_EQ(Describe(*third), FormatDecision(Evaluate(params, state, t + 2'000, 1)))
          << AlgorithmName(algorithm) << (denier_first ? " (denier first)" : "");
    }
  }
}

// ---- TTLs.

// Verifies for every algorithm that an admitted request leaves the key with a TTL of
// reset_after rounded up to whole milliseconds (never shorter than the state matters), that a
// denial changes neither the value nor the TTL, and that a state back to fresh is deleted.
TEST_F(LuaScriptsTest, TtlCoversResetAfter) {
  for (Algorithm algorithm : kAllAlgorithms) {
    // 1.0005 s: reset_after is rarely a whole number of milliseconds.
    const LimitParams params = Params(algorithm, 3, 1'000'500, 3);
    const std::string key = absl::StrCat("sluice:{ttl}", AlgorithmName(algorithm));
    AlgorithmState state = NewState(algorithm);
    // 1 ms into a window, so that every step below stays inside it (and a fixed window in one
    // key).
    const int64_t t = (kCaseBaseUs / params.period_us + 1) * params.period_us + 1'000;
    const std::string state_key = StateKey(key, t, params);
    struct Step {
      int64_t now;
      uint64_t hits;
    };
    for (const Step& step : {Step{t, 1}, Step{t + 1, 1}, Step{t + 333'333, 0}}) {
      const int64_t before_ms = RedisTimeUs() / 1000;
      absl::StatusOr<std::vector<Decision>> d = Eval(Single(key, step.now, params, step.hits));
      const int64_t after_ms = RedisTimeUs() / 1000 + 1;
      ASSERT_TRUE(d.ok()) << d.status();
      const Decision expected = Evaluate(params, state, step.now, step.hits);
      ASSERT_EQ(Describe(*d), FormatDecision(expected)) << AlgorithmName(algorithm);
      ASSERT_TRUE(expected.allowed);
      ASSERT_GT(expected.reset_after_us, 0);
      const int64_t expire_at = Integer({"PEXPIRETIME", state_key});
      const int64_t ttl = ExpectedTtlMs(expected.reset_after_us);
      EXPECT_GE(expire_at, before_ms + ttl) << AlgorithmName(algorithm) << " reset "
                                            << expected.reset_after_us;
      if (step.hits > 0) {
        // Written now, so not kept longer than needed either. (A check may leave an unchanged
        // state, and the TTL it was written with, alone.)
        EXPECT_LE(expire_at, after_ms + ttl) << AlgorithmName(algorithm) << " reset "
                                             << expected.reset_after_us;
      }
    }

    // A denial (3 more hits do not fit) writes nothing: same value, same expiry.
    const std::string value = Dump(state_key);
    const int64_t expire_at = Integer({"PEXPIRETIME", state_key});
    absl::StatusOr<std::vector<Decision>> denied = Eval(Single(key, t + 400'000, params, 3));
    ASSERT_TRUE(denied.ok()) << denied.status();
    EXPECT_EQ(Describe(*denied), FormatDecision(Evaluate(params, state, t + 400'000, 3)));
    EXPECT_FALSE((*denied)[0].allowed) << AlgorithmName(algorithm);
    EXPECT_EQ(Dump(state_key), value) << AlgorithmName(algorithm);
    EXPECT_EQ(Integer({"PEXPIRETIME", state_key}), expire_at) << AlgorithmName(algorithm);

    // A day later the state is that of a fresh key: a check (hits 0) reports reset 0 and the
    // key is dropped rather than kept for nothing. (PERSIST first, so that only the script can
    // have removed it.) A fixed window is then in another window, whose key the check must not
    // create, and must leave the old window's key alone (which its TTL would remove; it was
    // PERSISTed, so it is deleted here).
    ASSERT_EQ(Integer({"PERSIST", state_key}), 1);
    const int64_t later = t + 86'400'000'000;
    absl::StatusOr<std::vector<Decision>> idle = Eval(Single(key, later, params, 0));
    ASSERT_TRUE(idle.ok()) << idle.status();
    EXPECT_EQ(Describe(*idle), FormatDecision(Evaluate(params, state, later, 0)));
    EXPECT_EQ((*idle)[0].reset_after_us, 0) << AlgorithmName(algorithm);
    EXPECT_EQ(Integer({"EXISTS", StateKey(key, later, params)}), 0) << AlgorithmName(algorithm);
    if (algorithm == Algorithm::kFixedWindow) {
      EXPECT_EQ(Dump(state_key), value) << "a check in another window touched this one's key";
      EXPECT_EQ(Integer({"DEL", state_key}), 1);
    }
  }
}

// Verifies that a reset_after of a few microseconds still gets the minimum TTL of 1 ms.
TEST_F(LuaScriptsTest, ShortestTtlIsOneMillisecond) {
  const LimitParams params = Params(Algorithm::kFixedWindow, 1, 1'000'000, 0);
  const std::string key = "sluice:{ttl}short";
  // 3 us before the window ends. In one transaction, so the key cannot expire before it is read.
  std::vector<ReplyPtr> replies =
      Redis().Pipeline({{"MULTI"},
                        {"TIME"},
                        EvalshaArgs(Single(key, kCaseBaseUs + 999'997, params, 1)),
                        {"PEXPIRETIME", StateKey(key, kCaseBaseUs + 999'997, params)},
                        {"EXEC"}});
  const redisReply* exec = replies.back().get();
  ASSERT_TRUE(exec != nullptr && exec->type == REDIS_REPLY_ARRAY && exec->elements == 3);
  const redisReply* time = exec->element[0];
  ASSERT_EQ(time->type, REDIS_REPLY_ARRAY);
  const int64_t before_ms = std::stoll(time->element[0]->str) * 1000 +
                            std::stoll(time->element[1]->str) / 1000;
  absl::StatusOr<std::vector<Decision>> d = ToDecisions(exec->element[1], 1);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(Describe(*d), "allow remaining 0 retry 0 reset 3 delay 0");
  ASSERT_EQ(exec->element[2]->type, REDIS_REPLY_INTEGER);
  const int64_t expire_at = exec->element[2]->integer;
  EXPECT_GE(expire_at, before_ms + 1);
  EXPECT_LE(expire_at, RedisTimeUs() / 1000 + 1);
}

// ---- The fixed window's window keys.

// Verifies that a fixed window in a group keeps its state as the lone fixed window does natively
// (INCRBY + PEXPIRE NX on the same window key): the plain decimal count, which an INCRBY between
// two group calls adds to and the second group call then counts, deciding as the native path
// would on the count INCRBY returns; that the key expires when its window ends, no later; and
// that a negative count (hits a lone request gave back after its key expired) counts as 0.
TEST_F(LuaScriptsTest, GroupFixedWindowSharesTheNativeState) {
  const LimitParams params = Params(Algorithm::kFixedWindow, 5, 60'000'000, 0);
  const std::string key = "sluice:{native}key";
  // A caller's clock close to Redis' own, so that the TTL can be compared with the window's end;
  // at least 5 s before that end, so that no key expires during the test.
  int64_t now = RedisTimeUs();
  if (params.period_us - now % params.period_us < 5'000'000) {
    std::this_thread::sleep_for(
        std::chrono::microseconds(params.period_us - now % params.period_us + 10'000));
    now = RedisTimeUs();
  }
  const int64_t window_end = (now / params.period_us + 1) * params.period_us;
  const std::string window_key = StateKey(key, now, params);
  const std::string given_back = StateKey("sluice:{native}given_back", now, params);
  ASSERT_TRUE(Redis().Command({"DEL", window_key, given_back}) != nullptr);
  auto get = [](const std::string& k) {
    ReplyPtr reply = Redis().Command({"GET", k});
    return reply != nullptr && reply->type == REDIS_REPLY_STRING
               ? std::string(reply->str, reply->len)
               : std::string("(none)");
  };

  absl::StatusOr<std::vector<Decision>> first = Eval(Group(now, {{key, params, 2}}));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(Describe(*first), FormatDecision(FixedWindowDecision(params, now, 2, 2)));
  EXPECT_EQ(get(window_key), "2");
  const int64_t pttl = Integer({"PTTL", window_key});
  EXPECT_GT(pttl, 0);
  EXPECT_LE(pttl, (window_end - now + 999) / 1000);
  // Redis' clock is at or past `now`, so the key lives until the window's end.
  EXPECT_GE(Integer({"PEXPIRETIME", window_key}), window_end / 1000);

  // The lone native form adds a hit to the same key...
  EXPECT_EQ(Integer({"INCRBY", window_key, "1"}), 3);
  // ...which the group counts: it decides as the native path does on the count INCRBY returns.
  absl::StatusOr<std::vector<Decision>> second = Eval(Group(now + 1, {{key, params, 1}}));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(Describe(*second), FormatDecision(FixedWindowDecision(params, now + 1, 1, 4)));
  EXPECT_EQ((*second)[0].remaining, 1u) << Describe(*second);
  EXPECT_EQ(get(window_key), "4");
  absl::StatusOr<std::vector<Decision>> denied = Eval(Group(now + 2, {{key, params, 2}}));
  ASSERT_TRUE(denied.ok()) << denied.status();
  EXPECT_EQ(Describe(*denied), FormatDecision(FixedWindowDecision(params, now + 2, 2, 6)));
  EXPECT_FALSE((*denied)[0].allowed);
  EXPECT_EQ(get(window_key), "4");
  EXPECT_LE(Integer({"PTTL", window_key}), (window_end - now + 999) / 1000);

  // A negative count, as DECRBY leaves on a key that expired (without a TTL), is a fresh window:
  // a check drops it, an admission replaces it by its own hits, with a TTL.
  ASSERT_TRUE(Redis().Command({"SET", given_back, "-3"}) != nullptr);
  absl::StatusOr<std::vector<Decision>> check =
      Eval(Group(now + 3, {{"sluice:{native}given_back", params, 0}}));
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_EQ(Describe(*check), FormatDecision(FixedWindowDecision(params, now + 3, 0, -3)));
  EXPECT_EQ((*check)[0].remaining, 5u) << Describe(*check);
  EXPECT_EQ(Integer({"EXISTS", given_back}), 0);
  ASSERT_TRUE(Redis().Command({"SET", given_back, "-3"}) != nullptr);
  absl::StatusOr<std::vector<Decision>> admitted =
      Eval(Group(now + 4, {{"sluice:{native}given_back", params, 2}}));
  ASSERT_TRUE(admitted.ok()) << admitted.status();
  EXPECT_EQ(Describe(*admitted), FormatDecision(FixedWindowDecision(params, now + 4, 2, -1)));
  EXPECT_EQ((*admitted)[0].remaining, 3u) << Describe(*admitted);
  EXPECT_EQ(get(given_back), "2");
  EXPECT_GT(Integer({"PTTL", given_back}), 0);
}

// Verifies a calendar month's fixed window in the group script decides as the C++ does (the
// script is sent where the window ends, FixedWindowAt), across the end of February and of a
// leap February, for windows of one and of two calendar months: admissions, a denial until the
// month's end, and a fresh window on March 1st.
TEST_F(LuaScriptsTest, GroupCalendarMonthsDecideAsTheCpp) {
  LimitParams month = Params(Algorithm::kFixedWindow, 3, kMonthUs, 0);
  month.calendar_months = true;
  LimitParams two = Params(Algorithm::kFixedWindow, 3, 2 * kMonthUs, 0);
  two.calendar_months = true;
  constexpr int64_t kSecond = 1'000'000;
  // 2026-02-28 23:59:58 and 2028-02-29 23:59:58 UTC: two seconds before March.
  for (const int64_t start : {int64_t{1772323198} * kSecond, int64_t{1835481598} * kSecond}) {
    for (const LimitParams& params : {month, two}) {
      SCOPED_TRACE(absl::StrCat(start, " ", params.period_us / kMonthUs, " month(s)"));
      const std::string key = absl::StrCat("sluice:{cal", start, "}", params.period_us);
      FixedWindowState state;
      for (const auto& [t, hits] : std::vector<std::pair<int64_t, uint64_t>>{
               {start, 2}, {start + kSecond, 1}, {start + 1'999'999, 1}, {start + 2 * kSecond, 3},
               {start + 3 * kSecond, 1}}) {
        absl::StatusOr<std::vector<Decision>> got = Eval(Group(t, {{key, params, hits}}));
        ASSERT_TRUE(got.ok()) << got.status();
        const Decision want = EvaluateFixedWindow(params, state, t, hits);
        ASSERT_EQ(Describe(*got), FormatDecision(want)) << "t=" << t << " hits=" << hits;
      }
    }
  }
}

// ---- Malformed calls.

// Verifies that every malformed call is an error reply that says what is wrong, and writes
// nothing: wrong key or argument counts, a packed argument of the wrong length, each value out
// of its range or not an integer (the scripts must not decide on a rounded value), an unknown
// algorithm code and a repeated key in a group.
TEST_F(LuaScriptsTest, MalformedArgumentsAreErrors) {
  const std::string key = "sluice:{bad}key";
  const std::string key2 = key + "2";
  constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
  constexpr double kInf = std::numeric_limits<double>::infinity();
  constexpr double kTwo50 = 1125899906842624.0;
  constexpr double kTwo52 = 4503599627370496.0;
  constexpr double kTwo53 = 9007199254740992.0;
  const double now = static_cast<double>(kCaseBaseUs);
  struct Bad {
    ScriptCall call;
    std::string message;
  };
  // token_bucket on `key`; its valid argument is now, limit 10 per second, burst 10, hits 1,
  // charge 0.
  const std::string valid = PackDoubles({now, 10, 1'000'000, 10, 1, 0});
  auto single = [&](std::vector<std::string> args) {
    return ScriptCall{"token_bucket", {key}, std::move(args)};
  };
  auto values = [&](double n, double limit, double period, double burst, double hits,
                    double charge = 0) {
    return single({PackDoubles({n, limit, period, burst, hits, charge})});
  };
  // A group's argument: now, then per key a record of algorithm code, limit, period_us, burst,
  // hits, charge (0 when a record below leaves it out). `record` is a valid one (token_bucket,
  // as above).
  const std::string record = PackDoubles({3, 10, 1'000'000, 10, 1, 0});
  auto group = [&](std::vector<std::string> keys, std::vector<std::string> args) {
    return ScriptCall{"group", std::move(keys), std::move(args)};
  };
  auto group_of = [&](std::vector<std::string> keys, double n,
                      std::vector<std::vector<double>> records) {
    std::string packed = PackDoubles({n});
    for (const std::vector<double>& r : records) {
      packed += PackDoubles({r[0], r[1], r[2], r[3], r[4], r.size() > 5 ? r[5] : 0});
    }
    return group(std::move(keys), {std::move(packed)});
  };
  const std::vector<double> tb = {3, 10, 1'000'000, 10, 1};

  std::vector<Bad> bad = {
      // Counts and lengths. (Five arguments are the text form, below.)
      {single({}), "expected 1 key and 1 argument of 48 bytes"},
      {single({""}), "expected 1 key and 1 argument of 48 bytes"},
      {single({valid.substr(0, 47)}), "expected 1 key and 1 argument of 48 bytes"},
      {single({valid + "x"}), "expected 1 key and 1 argument of 48 bytes"},
      {single({valid, valid}), "got 1 keys, 2 arguments"},
      {single({valid, valid, valid, valid}), "got 1 keys, 4 arguments"},
      {single({valid, valid, valid, valid, valid, valid, valid}), "got 1 keys, 7 arguments"},
      {ScriptCall{"token_bucket", {key, key2}, {valid}}, "got 2 keys, 1 arguments"},
      {ScriptCall{"token_bucket", {}, {valid}}, "got 0 keys, 1 arguments"},
      // now: an integer with |now| < 2^52.
      {values(now + 0.5, 10, 1'000'000, 10, 1), "token_bucket: now must be an integer in"},
      {values(kNan, 10, 1'000'000, 10, 1), "now must be an integer in"},
      {values(kInf, 10, 1'000'000, 10, 1), "now must be an integer in"},
      {values(-kInf, 10, 1'000'000, 10, 1), "now must be an integer in"},
      {values(kTwo52, 10, 1'000'000, 10, 1), "now must be an integer in"},
      {values(-kTwo52, 10, 1'000'000, 10, 1), "now must be an integer in"},
      {values(kTwo53, 10, 1'000'000, 10, 1), "now must be an integer in"},
      // limit: an integer in [1, 2^53); 0 is decided without Redis.
      {values(now, 0, 1'000'000, 10, 1), "limit must be an integer in [1,"},
      {values(now, 1.5, 1'000'000, 10, 1), "limit must be an integer in [1,"},
      {values(now, -1, 1'000'000, 10, 1), "limit must be an integer in [1,"},
      {values(now, kNan, 1'000'000, 10, 1), "limit must be an integer in [1,"},
      {values(now, kInf, 1'000'000, 10, 1), "limit must be an integer in [1,"},
      {values(now, kTwo53, 1'000'000, 10, 1), "limit must be an integer in [1,"},
      // period_us: an integer in [1, 2^50].
      {values(now, 10, 0, 10, 1), "period_us must be an integer in [1,"},
      {values(now, 10, -5, 10, 1), "period_us must be an integer in [1,"},
      {values(now, 10, 1.5, 10, 1), "period_us must be an integer in [1,"},
      {values(now, 10, kTwo50 + 1, 10, 1), "period_us must be an integer in [1,"},
      {values(now, 10, kNan, 10, 1), "period_us must be an integer in [1,"},
      {values(now, 10, kInf, 10, 1), "period_us must be an integer in [1,"},
      // burst: an integer in [0, 2^53).
      {values(now, 10, 1'000'000, 0.5, 1), "burst must be an integer in [0,"},
      {values(now, 10, 1'000'000, -1, 1), "burst must be an integer in [0,"},
      {values(now, 10, 1'000'000, kNan, 1), "burst must be an integer in [0,"},
      {values(now, 10, 1'000'000, kInf, 1), "burst must be an integer in [0,"},
      {values(now, 10, 1'000'000, kTwo53, 1), "burst must be an integer in [0,"},
      // hits: an integer in [0, 2^53).
      {values(now, 10, 1'000'000, 10, 1.5), "hits must be an integer in [0,"},
      {values(now, 10, 1'000'000, 10, -1), "hits must be an integer in [0,"},
      {values(now, 10, 1'000'000, 10, kNan), "hits must be an integer in [0,"},
      {values(now, 10, 1'000'000, 10, kInf), "hits must be an integer in [0,"},
      {values(now, 10, 1'000'000, 10, kTwo53), "hits must be an integer in [0,"},
      // charge: 0 or 1.
      {values(now, 10, 1'000'000, 10, 1, 3), "charge must be an integer in [0, 2]"},
      {values(now, 10, 1'000'000, 10, 1, 0.5), "charge must be an integer in [0, 2]"},
      {values(now, 10, 1'000'000, 10, 1, kNan), "charge must be an integer in [0, 2]"},
      // The text form: five or six decimal arguments, checked alike.
      {single({"abc", "10", "1000000", "10", "1"}), "expected 1 key and 5 or 6 decimal arguments"},
      {single({"", "10", "1000000", "10", "1"}), "expected 1 key and 5 or 6 decimal arguments"},
      {single({"1", "10", "1000000", "10", "0x"}),
       "expected 1 key and 5 or 6 decimal arguments"},
      {single({"1", "ten", "1000000", "10", "1"}),
       "expected 1 key and 5 or 6 decimal arguments"},
      {ScriptCall{"token_bucket", {key, key2}, {"1", "10", "1000000", "10", "1"}},
       "5 or 6 decimal arguments (now, limit, period_us, burst, hits[, charge]), got 2 keys"},
      {single({"1.5", "10", "1000000", "10", "1"}), "now must be an integer in"},
      {single({"99999999999999999999", "10", "1000000", "10", "1"}), "now must be an integer"},
      {single({"1", "-1", "1000000", "10", "1"}), "limit must be an integer in [1,"},
      {single({"1", "10", "0", "10", "1"}), "period_us must be an integer in [1,"},
      {single({"1", "10", "1125899906842625", "10", "1"}), "period_us must be an integer in [1,"},
      {single({"1", "10", "1000000", "inf", "1"}), "burst must be an integer in [0,"},
      {single({"1", "10", "1000000", "10", "nan"}), "hits must be an integer in [0,"},
      {single({"1", "10", "1000000", "10", "9007199254740992"}), "hits must be an integer in [0,"},
      {single({"1", "10", "1000000", "10", "1", "3"}), "charge must be an integer in [0, 2]"},

      // The group: counts and lengths.
      {group({}, {PackDoubles({now})}), "ERR sluice group: expected N >= 1 keys"},
      {group({}, {}), "expected N >= 1 keys"},
      {group({key}, {}), "got 1 keys, 0 arguments"},
      {group({key}, {PackDoubles({now}) + record, ""}), "got 1 keys, 2 arguments"},
      {group({key}, {(PackDoubles({now}) + record).substr(0, 55)}), "1 arguments, 55 bytes"},
      {group({key}, {PackDoubles({now}) + record + "x"}), "1 arguments, 57 bytes"},
      {group({key}, {record}), "1 arguments, 48 bytes"},
      {group({key, key2}, {PackDoubles({now}) + record}), "got 2 keys, 1 arguments, 56 bytes"},
      // now, then each record's values.
      {group_of({key}, kNan, {tb}), "group: now must be an integer in"},
      {group_of({key}, now + 0.5, {tb}), "group: now must be an integer in"},
      {group_of({key}, kTwo52, {tb}), "group: now must be an integer in"},
      {group_of({key}, now, {{6, 10, 1'000'000, 10, 1}}), "key 1: unknown algorithm code 6"},
      {group_of({key}, now, {{2.5, 10, 1'000'000, 10, 1}}), "key 1: unknown algorithm code 2.5"},
      {group_of({key}, now, {{-1, 10, 1'000'000, 10, 1}}), "key 1: unknown algorithm code -1"},
      {group_of({key}, now, {{kNan, 10, 1'000'000, 10, 1}}), "key 1: unknown algorithm code"},
      {group_of({key, key2}, now, {tb, {6, 10, 1'000'000, 10, 1}}),
       "key 2: unknown algorithm code 6"},
      {group_of({key}, now, {{3, -1, 1'000'000, 10, 1}}), "key 1: limit must be an integer"},
      {group_of({key}, now, {{3, 2.5, 1'000'000, 10, 1}}), "key 1: limit must be an integer"},
      {group_of({key}, now, {{3, kTwo53, 1'000'000, 10, 1}}), "key 1: limit must be an integer"},
      {group_of({key}, now, {{3, kNan, 1'000'000, 10, 1}}), "key 1: limit must be an integer"},
      {group_of({key}, now, {{3, 10, kTwo50 + 1, 10, 1}}), "key 1: period_us must be an integer"},
      {group_of({key}, now, {{3, 10, -kInf, 10, 1}}), "key 1: period_us must be an integer"},
      {group_of({key}, now, {{3, 10, 1'000'000, 0.5, 1}}), "key 1: burst must be an integer"},
      {group_of({key}, now, {{3, 10, 1'000'000, -1, 1}}), "key 1: burst must be an integer"},
      {group_of({key}, now, {{3, 10, 1'000'000, kTwo53, 1}}), "key 1: burst must be an integer"},
      {group_of({key}, now, {{3, 10, 1'000'000, 10, 1.5}}), "key 1: hits must be an integer"},
      {group_of({key}, now, {{3, 10, 1'000'000, 10, -1}}), "key 1: hits must be an integer"},
      {group_of({key}, now, {{3, 10, 1'000'000, 10, kInf}}), "key 1: hits must be an integer"},
      {group_of({key}, now, {{3, 10, 1'000'000, 10, kTwo53}}), "key 1: hits must be an integer"},
      {group_of({key, key2}, now, {tb, {0, 10, 0, 0, 1}}), "key 2: period_us must be an integer"},
      {group_of({key, key2}, now, {tb, {0, 10, 1.5, 0, 1}}),
       "key 2: period_us must be an integer"},
      {group_of({key, key2}, now, {tb, {5, 10, 1'000'000, kInf, 1}}),
       "key 2: burst must be an integer"},
      {group_of({key, key2}, now, {tb, {2, 10, 1'000'000, 0, kNan}}),
       "key 2: hits must be an integer"},
      {group_of({key}, now, {{3, 10, 1'000'000, 10, 1, 3}}), "key 1: charge must be an integer"},
      {group_of({key}, now, {{3, 10, 1'000'000, 10, 1, kInf}}),
       "key 1: charge must be an integer"},
      // A batch script: counts and lengths, and a bad first record.
      {ScriptCall{"token_bucket_batch", {}, {valid}}, "token_bucket_batch: expected N >= 1 keys"},
      {ScriptCall{"token_bucket_batch", {key}, {}}, "got 1 keys, 0 arguments"},
      {ScriptCall{"token_bucket_batch", {key}, {valid, valid}}, "got 1 keys, 2 arguments"},
      {ScriptCall{"token_bucket_batch", {key}, {valid + "x"}}, "1 arguments, 49 bytes"},
      {ScriptCall{"token_bucket_batch", {key, key2}, {valid}}, "got 2 keys, 1 arguments, 48"},
      {ScriptCall{"token_bucket_batch",
                  {key, key2},
                  {PackDoubles({now, 10, 1, 10, kInf, 0}) + valid}},
       "key 1: hits must be an integer"},
      {ScriptCall{"token_bucket_batch", {key, key2}, {PackDoubles({now, 0, 1, 10, 1, 0}) + valid}},
       "key 1: limit must be an integer in [1,"},
      // The group takes a limit of 0 (ZeroLimitDecision), but nothing below it.
      {group_of({key}, now, {{3, -1, 1'000'000, 10, 1}}), "key 1: limit must be an integer in [0,"},
      // A repeated key, of the same or another algorithm.
      {group_of({key, key}, now, {tb, {0, 10, 1'000, 0, 1}}), "KEYS[2] repeats KEYS[1]"},
      {group_of({key2, key, key2}, now, {tb, tb, tb}), "KEYS[3] repeats KEYS[1]"},
  };
  // Every single-key script checks its call, and names itself.
  for (Algorithm algorithm : kAllAlgorithms) {
    if (algorithm == Algorithm::kFixedWindow) {
      continue;  // no single-key script
    }
    const std::string name(AlgorithmName(algorithm));
    bad.push_back({ScriptCall{name, {key}, {valid.substr(0, 32)}},
                   absl::StrCat("ERR sluice ", name, ": expected 1 key")});
    bad.push_back({ScriptCall{name, {key}, {PackDoubles({now, 10, 1'000'000, 10, kNan, 0})}},
                   absl::StrCat("ERR sluice ", name, ": hits must be an integer")});
    const std::string batch_name = absl::StrCat(name, "_batch");
    bad.push_back({ScriptCall{batch_name, {key}, {valid.substr(0, 32)}},
                   absl::StrCat("ERR sluice ", batch_name, ": expected N >= 1 keys")});
    bad.push_back({ScriptCall{batch_name, {key}, {PackDoubles({now, 10, 1'000'000, 10, kNan, 0})}},
                   absl::StrCat("ERR sluice ", batch_name, ": key 1: hits must be an integer")});
  }
  for (const Bad& b : bad) {
    absl::StatusOr<std::vector<Decision>> d = Eval(b.call);
    ASSERT_FALSE(d.ok()) << b.message << ": got " << Describe(*d);
    EXPECT_EQ(d.status().code(), absl::StatusCode::kUnknown) << d.status();
    const std::string message(d.status().message());
    EXPECT_THAT(message, HasSubstr(b.message));
    EXPECT_THAT(message, HasSubstr("ERR sluice"));
    EXPECT_EQ(Integer({"EXISTS", key, key2}), 0) << b.message;
  }
  // The valid calls the bad ones were made from do write the keys, so the EXISTS above means
  // something.
  ASSERT_TRUE(Eval(single({valid})).ok());
  ASSERT_TRUE(Eval(group_of({key2}, now, {tb})).ok());
  EXPECT_EQ(Integer({"EXISTS", key, key2}), 2);
  EXPECT_EQ(Integer({"DEL", key, key2}), 2);
}

// ---- Keys.

// Verifies that keys made of any bytes (spaces, newlines, braces, RESP syntax, NUL, UTF-8)
// are each their own state, for every algorithm and through the group script (a fixed window's
// in its window key, the key followed by ":w" and the window's index).
TEST_F(LuaScriptsTest, KeysWithHostileCharacters) {
  const std::vector<std::string> keys = {
      "a b",        "line\nbreak",           "{",     "}",          "{}",   "x{y}z{",
      "{a b}\r\n",  "*1\r\n$4\r\nPING\r\n", "%{}|=", std::string("nul\0byte", 8),
      "\xc3\xbc\xe2\x82\xac", ":1:2",
  };
  for (Algorithm algorithm : kAllAlgorithms) {
    const LimitParams params = Params(algorithm, 1, 60'000'000, 1);
    const int64_t t = kCaseBaseUs + 5'000'000;
    for (const std::string& raw : keys) {
      const std::string key = absl::StrCat(raw, AlgorithmName(algorithm));
      absl::StatusOr<std::vector<Decision>> first = Eval(Single(key, t, params, 1));
      ASSERT_TRUE(first.ok()) << first.status();
      EXPECT_TRUE((*first)[0].allowed) << absl::CEscape(key);
      EXPECT_EQ(Integer({"EXISTS", StateKey(key, t, params)}), 1) << absl::CEscape(key);
      // The key's own state denies the next hit, also through the group script.
      absl::StatusOr<std::vector<Decision>> second = Eval(Group(t + 1, {{key, params, 1}}));
      ASSERT_TRUE(second.ok()) << second.status();
      EXPECT_FALSE((*second)[0].allowed) << absl::CEscape(key);
    }
  }
  // Nothing else was written: one key per (key, algorithm).
  ReplyPtr all = Redis().Command({"KEYS", "*"});
  ASSERT_TRUE(all != nullptr && all->type == REDIS_REPLY_ARRAY);
  size_t hostile = 0;
  for (size_t i = 0; i < all->elements; ++i) {
    const std::string name(all->element[i]->str, all->element[i]->len);
    for (const std::string& raw : keys) {
      for (Algorithm algorithm : kAllAlgorithms) {
        const LimitParams params = Params(algorithm, 1, 60'000'000, 1);
        hostile += name == StateKey(absl::StrCat(raw, AlgorithmName(algorithm)),
                                    kCaseBaseUs + 5'000'000, params)
                       ? 1
                       : 0;
      }
    }
  }
  EXPECT_EQ(hostile, keys.size() * 6);
}

// Verifies that a key written by one algorithm is a fresh key to another (the rule's algorithm
// changed), as in the memory backend, including a sorted set (sliding_window_log) read by a
// string-valued algorithm and the reverse. Every step runs on one Redis key, the window key of
// the fixed window's steps, so that the fixed window's decimal count is read by the others and
// their states by the fixed window.
TEST_F(LuaScriptsTest, AlgorithmChangeStartsFresh) {
  const std::string key = "sluice:{change}key";
  // 17 s into a minute: every step is in the same window, so the fixed window keeps one key.
  int64_t t = kCaseBaseUs + 77'000'000;
  const std::string window_key =
      StateKey(key, t, Params(Algorithm::kFixedWindow, 4, 60'000'000, 4));
  // Each step reads the state the step before it left.
  const Algorithm order[] = {
      Algorithm::kTokenBucket,
      Algorithm::kLeakyBucket,           // token_bucket's string
      Algorithm::kSlidingWindowLog,      // leaky_bucket's string
      Algorithm::kGcra,                  // a sorted set
      Algorithm::kSlidingWindowCounter,  // gcra's string
      Algorithm::kSlidingWindowLog,      // sliding_window_counter's string
      Algorithm::kFixedWindow,           // a sorted set
      Algorithm::kTokenBucket,           // a decimal count
      Algorithm::kFixedWindow,           // token_bucket's string
      Algorithm::kSlidingWindowLog,      // a decimal count
      Algorithm::kGcra,                  // a sorted set
      Algorithm::kFixedWindow,           // gcra's string
      Algorithm::kSlidingWindowCounter,  // a decimal count
  };
  for (Algorithm algorithm : order) {
    const LimitParams params = Params(algorithm, 4, 60'000'000, 4);
    AlgorithmState fresh = NewState(algorithm);
    // The fixed window's Single derives window_key from key itself.
    const ScriptCall call = algorithm == Algorithm::kFixedWindow
                                ? Single(key, t, params, 3)
                                : Single(window_key, t, params, 3);
    ASSERT_EQ(call.keys, std::vector<std::string>{window_key});
    absl::StatusOr<std::vector<Decision>> d = Eval(call);
    ASSERT_TRUE(d.ok()) << AlgorithmName(algorithm) << ": " << d.status();
    EXPECT_EQ(Describe(*d), FormatDecision(Evaluate(params, fresh, t, 3)))
        << AlgorithmName(algorithm);
    ASSERT_EQ(Integer({"EXISTS", window_key}), 1) << AlgorithmName(algorithm);
    t += 1'000;
  }
}

// ---- Sliding window log specifics.

// Verifies that admissions within one microsecond are separate members (nothing is overwritten)
// and that expired members are trimmed when a request is admitted, so the set stays bounded.
TEST_F(LuaScriptsTest, SlidingLogMembersAreUniqueAndTrimmed) {
  const std::string key = "sluice:{swl}members";
  const LimitParams params = Params(Algorithm::kSlidingWindowLog, 100, 1'000'000, 0);
  const int64_t t = kCaseBaseUs + 42;
  std::vector<ScriptCall> calls;
  for (int i = 0; i < 20; ++i) {
    calls.push_back(Single(key, t, params, 1 + i % 3));
  }
  for (const auto& result : RunAtomically(calls)) {
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_TRUE((*result)[0].allowed);
  }
  EXPECT_EQ(Integer({"ZCARD", key}), 20);
  absl::StatusOr<std::vector<Decision>> check = Eval(Single(key, t + 999'999, params, 0));
  ASSERT_TRUE(check.ok());
  EXPECT_EQ((*check)[0].remaining, 100u - 39u);  // 20 admissions of 1, 2, 3, 1, ... = 39 hits
  // One period later all 20 have expired: the next admission leaves one member.
  absl::StatusOr<std::vector<Decision>> later = Eval(Single(key, t + 1'000'000, params, 5));
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(Describe(*later), "allow remaining 95 retry 0 reset 1000000 delay 0");
  EXPECT_EQ(Integer({"ZCARD", key}), 1);
}

// Verifies that the walk over expired entries at the head of a large log (more than one read's
// worth) and the retry lookup agree with C++ on a log of hundreds of entries.
TEST_F(LuaScriptsTest, SlidingLogLongLogMatchesCpp) {
  const std::string key = "sluice:{swl}long";
  const LimitParams params = Params(Algorithm::kSlidingWindowLog, 500, 1'000'000, 0);
  AlgorithmState state = NewState(params.algorithm);
  std::vector<ScriptCall> calls;
  std::vector<Decision> expected;
  int64_t t = kCaseBaseUs + 1'000;
  auto add = [&](int64_t now, uint64_t hits) {
    calls.push_back(Single(key, now, params, hits));
    expected.push_back(Evaluate(params, state, now, hits));
  };
  for (int i = 0; i < 400; ++i) {
    add(t + i * 2'000, 1 + i % 2);  // 600 hits offered over 0.8 s: the tail is denied
  }
  // 0.3 s after the first, 150 entries have expired: a denial walks them without trimming...
  add(t + 1'300'000, 400);
  add(t + 1'300'000, 1);  // ...and an admission trims them.
  add(t + 1'300'001, 0);
  add(t + 1'650'000, 300);
  add(t + 1'650'000, 300);
  std::vector<absl::StatusOr<std::vector<Decision>>> results = RunAtomically(calls);
  for (size_t i = 0; i < results.size(); ++i) {
    ASSERT_TRUE(results[i].ok()) << results[i].status();
    ASSERT_EQ(Describe(*results[i]), FormatDecision(expected[i])) << "step " << i;
  }
}

// Verifies that the cumulative scores are shifted back to 0 before they pass 2^53 (a key that
// never goes idle), with no change in the decisions. The log is seeded in the documented
// layout (lua/sliding_window_log.lua): score = hits before the entry, member
// struct.pack("<dd", ts, cum_after).
TEST_F(LuaScriptsTest, SlidingLogRebasesCumulativeScores) {
  const std::string key = "sluice:{swl}rebase";
  const LimitParams params = Params(Algorithm::kSlidingWindowLog, 10, 1'000'000, 0);
  const int64_t t = kCaseBaseUs + 500'000;
  const int64_t big = (int64_t{1} << 53) - 10;
  // Entries (t - 900ms, 2 hits), (t - 100ms, 4 hits): 6 live hits.
  auto member = [](int64_t ts, int64_t cum_after) {
    return PackDoubles({static_cast<double>(ts), static_cast<double>(cum_after)});
  };
  ASSERT_TRUE(Redis().Command({"ZADD", key, absl::StrCat(big), member(t - 900'000, big + 2),
                               absl::StrCat(big + 2), member(t - 100'000, big + 6)}) != nullptr);
  ASSERT_EQ(Integer({"ZCARD", key}), 2);
  SlidingWindowLogState seeded;
  seeded.entries = {{t - 900'000, 2}, {t - 100'000, 4}};
  seeded.total = 6;
  AlgorithmState state = seeded;
  std::vector<ScriptCall> calls;
  std::vector<Decision> expected;
  for (auto [offset, hits] : std::vector<std::pair<int64_t, uint64_t>>{
           {0, 4}, {1, 1}, {2, 2}, {100'000, 2}, {100'001, 0}, {950'000, 5}}) {
    calls.push_back(Single(key, t + offset, params, hits));
    expected.push_back(Evaluate(params, state, t + offset, hits));
  }
  std::vector<absl::StatusOr<std::vector<Decision>>> results = RunAtomically(calls);
  for (size_t i = 0; i < results.size(); ++i) {
    ASSERT_TRUE(results[i].ok()) << results[i].status();
    EXPECT_EQ(Describe(*results[i]), FormatDecision(expected[i])) << "step " << i;
  }
  ReplyPtr scores = Redis().Command({"ZRANGE", key, "0", "-1", "WITHSCORES"});
  ASSERT_TRUE(scores != nullptr && scores->type == REDIS_REPLY_ARRAY && scores->elements > 0);
  EXPECT_LT(std::stod(scores->element[scores->elements - 1]->str), 1000.0);
}

// Verifies give_back returns hits to a window key that still exists, and leaves a key that has
// expired alone: a DECRBY there would create a negative count that later requests see as room.
TEST_F(LuaScriptsTest, GiveBackOnlyTouchesALiveWindow) {
  const std::string key = "{give}fw:1:w7";
  ASSERT_EQ(Integer({"INCRBY", key, "5"}), 5);
  ASSERT_EQ(Integer({"PEXPIRE", key, "60000"}), 1);
  ReplyPtr reply = Redis().Command({"EVALSHA", Shared().sha["give_back"], "1", key, "3"});
  ASSERT_TRUE(reply != nullptr && reply->type == REDIS_REPLY_INTEGER);
  EXPECT_EQ(reply->integer, 2);
  EXPECT_GT(Integer({"PTTL", key}), 0);  // DECRBY keeps the TTL

  ASSERT_EQ(Integer({"DEL", key}), 1);
  reply = Redis().Command({"EVALSHA", Shared().sha["give_back"], "1", key, "3"});
  ASSERT_TRUE(reply != nullptr);
  EXPECT_EQ(reply->type, REDIS_REPLY_NIL);
  EXPECT_EQ(Integer({"EXISTS", key}), 0);
}

// Verifies that give_back never takes a count below 0 (a refund larger than what the window
// holds banks nothing) and keeps the window's TTL.
TEST_F(LuaScriptsTest, GiveBackStopsAtZero) {
  const std::string key = "{give}fw:1:w8";
  ASSERT_EQ(Integer({"INCRBY", key, "2"}), 2);
  ASSERT_EQ(Integer({"PEXPIRE", key, "60000"}), 1);
  ReplyPtr reply = Redis().Command({"EVALSHA", Shared().sha["give_back"], "1", key, "5"});
  ASSERT_TRUE(reply != nullptr && reply->type == REDIS_REPLY_INTEGER);
  EXPECT_EQ(reply->integer, 0);
  EXPECT_GT(Integer({"PTTL", key}), 0);
  EXPECT_EQ(Integer({"INCRBY", key, "1"}), 1);
}

// Verifies rlqs_exchange: each replica writes its demands and reads the others' of each bucket;
// a replica that stops calling drops out once its entry is older than the TTL on Redis' own clock
// (deleted when met); a field dated ahead of Redis' clock by more than the TTL (a replica whose
// clock ran ahead, or a master whose clock is behind its predecessor's) is deleted too; the hash
// expires with the TTL; malformed calls are refused.
TEST_F(LuaScriptsTest, RlqsExchangeSharesDemandsAndForgetsSilentReplicas) {
  const std::string sha = Shared().sha["rlqs_exchange"];
  const auto pack = [](std::vector<double> values) {
    std::string out;
    for (double v : values) {
      out.append(reinterpret_cast<const char*>(&v), sizeof v);
    }
    return out;
  };
  const auto unpack = [](const redisReply* element) {
    std::vector<double> values(element->len / sizeof(double));
    if (!values.empty()) {
      std::memcpy(values.data(), element->str, values.size() * sizeof(double));
    }
    return values;
  };
  const std::string k1 = "{rlqs|d}a";
  const std::string k2 = "{rlqs|d}b";
  const std::string ttl = pack({300});  // ms
  ReplyPtr r = Redis().Command(
      {"EVALSHA", sha, "2", k1, k2, "replica-1", ttl, pack({20, 60}), pack({5})});
  ASSERT_TRUE(r != nullptr && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
  EXPECT_EQ(r->element[0]->len, 0u);  // nobody else yet
  r = Redis().Command({"EVALSHA", sha, "1", k1, "replica-2", ttl, pack({150})});
  ASSERT_TRUE(r != nullptr && r->type == REDIS_REPLY_ARRAY && r->elements == 1);
  EXPECT_EQ(unpack(r->element[0]), (std::vector<double>{20, 60}));
  r = Redis().Command({"EVALSHA", sha, "1", k1, "replica-1", ttl, pack({25})});
  EXPECT_EQ(unpack(r->element[0]), (std::vector<double>{150}));
  EXPECT_GT(Integer({"PTTL", k1}), 0);
  // replica-2 stops; past the TTL its entry is deleted when met.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  r = Redis().Command({"EVALSHA", sha, "1", k1, "replica-1", pack({60000}), pack({25})});
  EXPECT_EQ(r->element[0]->len, 0u);
  EXPECT_EQ(Integer({"HEXISTS", k1, "replica-2"}), 0);
  // A field dated an hour ahead of Redis' clock is stale, not forever young.
  ReplyPtr time = Redis().Command({"TIME"});
  ASSERT_TRUE(time != nullptr && time->type == REDIS_REPLY_ARRAY);
  const double ahead = std::stod(time->element[0]->str) * 1000 + 3600e3;
  ASSERT_TRUE(Redis().Command({"HSET", k1, "replica-3", pack({ahead, 999})}) != nullptr);
  r = Redis().Command({"EVALSHA", sha, "1", k1, "replica-1", pack({60000}), pack({25})});
  EXPECT_EQ(r->element[0]->len, 0u);
  EXPECT_EQ(Integer({"HEXISTS", k1, "replica-3"}), 0);
  r = Redis().Command({"EVALSHA", sha, "1", k1, "replica-1", ttl, "abc"});
  ASSERT_TRUE(r != nullptr && r->type == REDIS_REPLY_ERROR);
  EXPECT_THAT(std::string(r->str), HasSubstr("not whole doubles"));
  r = Redis().Command({"EVALSHA", sha, "1", k1, "replica-1", "short", pack({25})});
  ASSERT_TRUE(r != nullptr && r->type == REDIS_REPLY_ERROR);
}

}  // namespace
}  // namespace sluice::testing
