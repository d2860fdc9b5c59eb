// Fuzzes the request path on a real Redis: any bytes as a serialized RateLimitRequest, decided by
// the real RateLimiter and RedisBackend (lanes, batch and group scripts, the lone fixed window's
// INCRBY, the over-limit cache) against the config of request_fuzz_common.h, on a redis-server
// this target starts on a free loopback port (killed with it). Besides CheckAnswer's invariants:
// `done` runs exactly once, and nothing ever falls to the failure policy. With a generous budget
// on loopback, a failure can only be Redis refusing what Sluice sent (a hits_addend no script
// or INCRBY takes, a counter past 2^63, ...), which under failure_mode allow admitted anything.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "fuzz/request_fuzz_common.h"
#include "server/backend/redis_backend.h"
#include "server/common/clock.h"
#include "server/config/config_store.h"
#include "server/service/metrics.h"
#include "server/service/over_limit_cache.h"
#include "server/service/rate_limiter.h"
#include "tests/support/process.h"

namespace sluice {
namespace {

// Starts redis-server on `port`, as a child that dies with this process (even on abort).
void StartRedis(int port) {
  const pid_t pid = fork();
  if (pid < 0) {
    fuzz::Fail("fork");
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    const int null_fd = open("/dev/null", O_WRONLY);
    dup2(null_fd, STDOUT_FILENO);
    dup2(null_fd, STDERR_FILENO);
    const std::string port_text = std::to_string(port);
    execlp("redis-server", "redis-server", "--port", port_text.c_str(), "--bind", "127.0.0.1",
           "--save", "", "--appendonly", "no", "--loglevel", "warning", "--dir", "/tmp",
           static_cast<char*>(nullptr));
    _exit(127);
  }
  if (!testing::WaitForPort(port, std::chrono::seconds(15))) {
    fuzz::Fail("redis-server did not start");
  }
}

std::unique_ptr<RedisBackend> MakeBackend(int port) {
  RedisBackendOptions options;
  options.client.address = "127.0.0.1:" + std::to_string(port);
  options.timeout = absl::Seconds(5);
  auto backend = RedisBackend::Create(options, RealClock::Get());
  if (!backend.ok() || !(*backend)->WaitUntilReady(absl::Seconds(10))) {
    fuzz::Fail("no Redis backend");
  }
  return *std::move(backend);
}

struct World {
  World()
      : port(testing::FreePort()),
        store(fuzz::LoadRequestConfig()),
        backend((StartRedis(port), MakeBackend(port))),
        cache(RealClock::Get(), 10000),
        limiter(store, *backend, RealClock::Get(), metrics, RateLimiterOptions(), &cache) {}

  int port;
  ConfigStore store;
  std::unique_ptr<RedisBackend> backend;
  OverLimitCache cache;
  Metrics metrics;
  RateLimiter limiter;
};

}  // namespace
}  // namespace sluice

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using sluice::RateLimiter;
  static auto* world = new sluice::World();
  RateLimiter::Request request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) {
    return 0;  // not a request: gRPC's parse (GrpcCall) refuses it before the limiter
  }
  RateLimiter::Response response;
  std::mutex mu;
  std::condition_variable cv;
  int calls = 0;
  absl::Status result = absl::InternalError("done never ran");
  world->limiter.ShouldRateLimit(request, &response, [&](absl::Status status) {
    std::lock_guard<std::mutex> lock(mu);
    ++calls;
    result = std::move(status);
    cv.notify_all();
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, std::chrono::seconds(10), [&] { return calls > 0; })) {
      sluice::fuzz::Fail("done never ran");
    }
  }
  sluice::fuzz::CheckAnswer(request, response, result);
  if (const std::string failures = world->metrics.BackendFailureSummary(); !failures.empty()) {
    std::fprintf(stderr, "request_redis_fuzz: backend failures: %s\n", failures.c_str());
    sluice::fuzz::Fail("a decision fell to the failure policy");
  }
  std::lock_guard<std::mutex> lock(mu);
  if (calls != 1) {
    sluice::fuzz::Fail("done ran more than once");
  }
  return 0;
}
