// End-to-end against a hostile Redis (security finding 2): a reply of a few bytes that
// announces gigabytes (`*10000000\r\n`, `*2000000000\r\n`, `$2000000000\r\n` followed by a
// trickle, arrays nested past the limit) used to make sluice allocate what it announced (4 GB
// of RSS for `*10000000`, decisions taking seconds past a 200 ms budget). Now the reply
// reader refuses it: sluice's peak RSS stays small, every decision is answered by the failure
// policy within its budget, and the log says so a few times, not once per call.
//
// The hostile Redis is a proxy in this test in front of a real redis-server: every command is
// passed to the real one and its reply passed back (so the handshake, SCRIPT LOAD, TIME and the
// health checks are the real thing), except EVALSHA, which gets the hostile bytes.
#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/rls_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/process.h"
#include "tests/support/redis_server.h"
#include "tests/support/sluice_server.h"

namespace sluice {
namespace {

using testing::HttpGet;
using testing::MetricValue;
using testing::RedisServer;
using testing::SluiceServer;
using testing::TempDir;

constexpr absl::Duration kBudget = absl::Milliseconds(200);
// What a decision may take past its budget: gRPC on loopback and a busy 2-core host.
constexpr absl::Duration kMargin = absl::Milliseconds(150);

// A big limit nothing reaches, so that each decision of the hostile phases goes to Redis (no
// over-limit cache); and a small one that shows the honest proxy really reaches Redis.
constexpr char kConfig[] = R"(domain: d
failure_mode: allow
descriptors:
  - key: big
    rate_limit: {algorithm: token_bucket, unit: second, requests_per_unit: 1000000, burst: 1000000}
  - key: small
    rate_limit: {algorithm: token_bucket, unit: minute, requests_per_unit: 3, burst: 3}
)";

// RESP of a reply hiredis read, as the server sent it.
void AppendResp(const redisReply& reply, std::string* out) {
  switch (reply.type) {
    case REDIS_REPLY_STATUS:
      absl::StrAppend(out, "+", absl::string_view(reply.str, reply.len), "\r\n");
      return;
    case REDIS_REPLY_ERROR:
      absl::StrAppend(out, "-", absl::string_view(reply.str, reply.len), "\r\n");
      return;
    case REDIS_REPLY_INTEGER:
      absl::StrAppend(out, ":", reply.integer, "\r\n");
      return;
    case REDIS_REPLY_STRING:
      absl::StrAppend(out, "$", reply.len, "\r\n", absl::string_view(reply.str, reply.len),
                      "\r\n");
      return;
    case REDIS_REPLY_ARRAY:
      absl::StrAppend(out, "*", reply.elements, "\r\n");
      for (size_t i = 0; i < reply.elements; ++i) {
        AppendResp(*reply.element[i], out);
      }
      return;
    default:
      out->append("$-1\r\n");
      return;
  }
}

bool SendAll(int fd, absl::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) {
      return false;
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// The proxy. Each client connection gets a thread and its own connection to the real Redis.
class HostileRedis {
 public:
  explicit HostileRedis(int upstream_port) : upstream_port_(upstream_port) {
    const testing::LoopbackListener listener = testing::ListenOnLoopback(64);
    listen_fd_ = listener.fd;
    port_ = listener.port;
    accept_thread_ = std::thread([this] { AcceptLoop(); });
  }

  ~HostileRedis() {
    stopping_ = true;
    accept_thread_.join();
    close(listen_fd_);
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int fd : client_fds_) {
        shutdown(fd, SHUT_RDWR);
      }
      threads.swap(threads_);
    }
    for (std::thread& thread : threads) {
      thread.join();
    }
  }

  int port() const { return port_; }

  // From now on EVALSHA is answered with `reply` (empty: passed to Redis), then, with `trickle`,
  // one byte every 10 ms until the client hangs up.
  void SetHostile(std::string reply, bool trickle) {
    std::lock_guard<std::mutex> lock(mu_);
    hostile_ = std::move(reply);
    trickle_ = trickle;
  }

  int hostile_replies() const { return hostile_replies_.load(); }

 private:
  void AcceptLoop() {
    while (!stopping_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) {
        continue;
      }
      const int fd = accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) {
        continue;
      }
      std::lock_guard<std::mutex> lock(mu_);
      client_fds_.push_back(fd);
      threads_.emplace_back([this, fd] { Serve(fd); });
    }
  }

  void Serve(int fd) {
    redisContext* upstream = redisConnect("127.0.0.1", upstream_port_);
    std::unique_ptr<redisReader, decltype(&redisReaderFree)> commands(redisReaderCreate(),
                                                                      &redisReaderFree);
    char buf[16 * 1024];
    bool open = upstream != nullptr && upstream->err == 0;
    while (open && !stopping_) {
      const ssize_t n = read(fd, buf, sizeof(buf));
      if (n <= 0) {
        break;
      }
      redisReaderFeed(commands.get(), buf, static_cast<size_t>(n));
      void* raw = nullptr;
      while (open && redisReaderGetReply(commands.get(), &raw) == REDIS_OK && raw != nullptr) {
        open = Answer(fd, upstream, *static_cast<redisReply*>(raw));
        freeReplyObject(raw);
      }
    }
    if (upstream != nullptr) {
      redisFree(upstream);
    }
    std::lock_guard<std::mutex> lock(mu_);
    client_fds_.erase(std::find(client_fds_.begin(), client_fds_.end(), fd));
    close(fd);
  }

  // Answers one command; false once the client is gone.
  bool Answer(int fd, redisContext* upstream, const redisReply& command) {
    std::vector<const char*> argv;
    std::vector<size_t> lengths;
    for (size_t i = 0; i < command.elements; ++i) {
      argv.push_back(command.element[i]->str);
      lengths.push_back(command.element[i]->len);
    }
    std::string hostile;
    bool trickle = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      hostile = hostile_;
      trickle = trickle_;
    }
    if (!argv.empty() && !hostile.empty() &&
        absl::AsciiStrToUpper(absl::string_view(argv[0], lengths[0])) == "EVALSHA") {
      ++hostile_replies_;
      if (!SendAll(fd, hostile)) {
        return false;
      }
      while (trickle && !stopping_) {
        if (!SendAll(fd, "x")) {
          return false;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      return true;
    }
    auto* reply = static_cast<redisReply*>(redisCommandArgv(
        upstream, static_cast<int>(argv.size()), argv.data(), lengths.data()));
    if (reply == nullptr) {
      return false;
    }
    std::string resp;
    AppendResp(*reply, &resp);
    freeReplyObject(reply);
    return SendAll(fd, resp);
  }

  const int upstream_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> hostile_replies_{0};
  std::thread accept_thread_;
  std::mutex mu_;
  std::string hostile_;  // guarded by mu_
  bool trickle_ = false;  // guarded by mu_
  std::vector<int> client_fds_;  // guarded by mu_
  std::vector<std::thread> threads_;  // guarded by mu_
};

// A /proc/<pid>/status field in kB (VmHWM: the peak resident set), or -1.
int64_t StatusKb(pid_t pid, const std::string& field) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, field + ":")) {
      std::vector<std::string> parts =
          absl::StrSplit(line.substr(field.size() + 1), ' ', absl::SkipWhitespace());
      int64_t kb = -1;
      if (!parts.empty() && absl::SimpleAtoi(parts[0], &kb)) {
        return kb;
      }
    }
  }
  return -1;
}

class HostileRedisTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto redis = RedisServer::Start();
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = std::move(*redis);
    proxy_ = std::make_unique<HostileRedis>(redis_->port());
    auto server = SluiceServer::Start(
        dir_.WriteFile("d.yaml", kConfig),
        {"--backend=redis", absl::StrCat("--redis_addresses=127.0.0.1:", proxy_->port()),
         "--failure_mode=allow", absl::StrCat("--redis_timeout=", absl::FormatDuration(kBudget))},
        dir_.path());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    client_ = std::make_unique<RlsClient>(server_->grpc_address());
  }

  // One decision of `descriptor`: the response, and how long it took.
  std::pair<RlsResponse, absl::Duration> Decide(const std::string& descriptor) {
    auto request = BuildRequest("d", {descriptor}, 0);
    EXPECT_TRUE(request.ok()) << request.status();
    const absl::Time start = absl::Now();
    auto response = client_->ShouldRateLimit(*request, absl::Seconds(10));
    const absl::Duration took = absl::Now() - start;
    EXPECT_TRUE(response.ok()) << response.status();
    return {response.ok() ? *response : RlsResponse(), took};
  }

  int64_t FailurePolicyDecisions() {
    return MetricValue(HttpGet(server_->http_port(), "/metrics"),
                       "sluice_failure_policy_decisions_total{mode=\"allow\"}");
  }

  TempDir dir_;
  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<HostileRedis> proxy_;
  std::unique_ptr<SluiceServer> server_;
  std::unique_ptr<RlsClient> client_;
};

// Verifies that replies announcing gigabytes (arrays of ten million and two billion, a string of
// two billion bytes then a trickle, arrays nested past the limit and past hiredis' own) leave
// sluice's peak RSS small, that every decision is answered OK by failure_mode allow within its
// budget, that the log names the protocol error a few times and not once per call, and that
// decisions reach Redis again once it answers sanely.
TEST_F(HostileRedisTest, RepliesAnnouncingGigabytesAreRefusedWithinTheBudget) {
  // Honest first: decisions are Redis' own (the fourth of a capacity of 3 is denied).
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(Decide("small=a").first.overall_code(), RlsResponse::OK);
  }
  EXPECT_EQ(Decide("small=a").first.overall_code(), RlsResponse::OVER_LIMIT);

  auto nested = [](int depth) {
    std::string out;
    for (int i = 0; i < depth; ++i) {
      out += "*1\r\n";
    }
    return out;
  };
  const struct {
    const char* what;
    std::string reply;
    bool trickle;
  } variants[] = {
      {"an array of ten million", "*10000000\r\n", false},
      {"an array of two billion", "*2000000000\r\n", false},
      {"a string of two billion bytes, trickled", "$2000000000\r\n", true},
      {"arrays nested past the limit", nested(7), false},
      {"arrays nested past hiredis' limit", nested(9), false},
  };
  // Four callers at once, each deciding every 2 ms, for as long as it takes the proxy to answer
  // three EVALSHAs of this kind (each on a new connection: sluice drops the connection at each
  // protocol error and reconnects), and 300 ms at least.
  constexpr int kThreads = 4;
  std::vector<absl::Duration> latencies;
  int answered = 0;
  int hostile_total = 0;
  for (const auto& v : variants) {
    SCOPED_TRACE(v.what);
    const int hostile_before = proxy_->hostile_replies();
    proxy_->SetHostile(v.reply, v.trickle);
    const absl::Time start = absl::Now();
    std::atomic<bool> done{false};
    std::vector<std::vector<std::pair<RlsResponse, absl::Duration>>> results(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; !done; ++i) {
          results[t].push_back(Decide(absl::StrCat("big=k", t, "-", i)));
          absl::SleepFor(absl::Milliseconds(2));
        }
      });
    }
    while (absl::Now() - start < absl::Seconds(5) &&
           (proxy_->hostile_replies() - hostile_before < 3 ||
            absl::Now() - start < absl::Milliseconds(300))) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    done = true;
    for (std::thread& thread : threads) {
      thread.join();
    }
    const int hostile = proxy_->hostile_replies() - hostile_before;
    EXPECT_GE(hostile, 3);
    hostile_total += hostile;
    for (const auto& per_thread : results) {
      for (const auto& [response, took] : per_thread) {
        EXPECT_EQ(response.overall_code(), RlsResponse::OK);
        EXPECT_LE(took, kBudget + kMargin);
        latencies.push_back(took);
        ++answered;
      }
    }
  }
  std::sort(latencies.begin(), latencies.end());

  const int64_t peak_kb = StatusKb(server_->process().pid(), "VmHWM");
  const std::string log = server_->ReadLog();
  int protocol_lines = 0;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    protocol_lines += absl::StrContains(line, "protocol error") ? 1 : 0;
  }
  std::cout << "hostile replies sent: " << hostile_total << ", decisions: " << answered
            << ", p50 " << absl::FormatDuration(latencies[latencies.size() / 2]) << ", max "
            << absl::FormatDuration(latencies.back()) << ", sluice VmHWM " << peak_kb / 1024
            << " MB, log lines naming a protocol error: " << protocol_lines << "\n";

  ASSERT_GT(peak_kb, 0);
  EXPECT_LT(peak_kb, 200 * 1024);
  // Every decision of the hostile phases fell to the failure policy (the page may lag a moment).
  const absl::Time counted_by = absl::Now() + absl::Seconds(5);
  while (FailurePolicyDecisions() < answered && absl::Now() < counted_by) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_EQ(FailurePolicyDecisions(), answered);
  // Rate-limited: a few lines for all of them, not one a reply or a decision.
  EXPECT_GE(protocol_lines, 1) << log;
  EXPECT_LE(protocol_lines, 6) << log;
  EXPECT_THAT(log, ::testing::HasSubstr("RedisReplyLimits::max_array_elements"));

  // Sane again: decisions reach Redis once the connection is back. On a new key of capacity 3,
  // Redis leaves 2; the failure policy says 0.
  proxy_->SetHostile("", false);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  bool recovered = false;
  for (int i = 0; !recovered && absl::Now() < deadline; ++i) {
    const RlsResponse response = Decide(absl::StrCat("small=after-", i)).first;
    recovered = response.statuses_size() == 1 && response.statuses(0).limit_remaining() == 2;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(recovered) << "decisions never reached Redis again";
}

}  // namespace
}  // namespace sluice
