// Fuzzes the request path: any bytes as a serialized RateLimitRequest, decided by the real
// RateLimiter (validation, matching, keys, over-limit logic, metrics) on the in-process memory
// backend, against a config that uses every algorithm and most rule features. The limiter and
// its counters live across inputs, as in a server, and the clock moves 1 ms per input, so state
// is exercised too. Invariants: `done` runs exactly once, inline; a request that is accepted
// gets one status per descriptor, each OK or OVER_LIMIT, and OVER_LIMIT overall only if some
// status says so; one that is refused gets kInvalidArgument with a message.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "absl/status/status.h"
#include "server/backend/memory_backend.h"
#include "server/config/config_loader.h"
#include "server/config/config_store.h"
#include "server/service/metrics.h"
#include "server/service/rate_limiter.h"
#include "tests/support/fake_clock.h"

namespace sluice {
namespace {

constexpr char kConfig[] = R"(domain: fuzz
descriptors:
  - key: tb
    rate_limit: {algorithm: token_bucket, unit: second, requests_per_unit: 5, burst: 10}
  - key: lb
    rate_limit: {algorithm: leaky_bucket, unit: minute, requests_per_unit: 30, burst: 3}
  - key: gcra
    rate_limit: {algorithm: gcra, unit: second, requests_per_unit: 2, burst: 4}
  - key: swl
    rate_limit: {algorithm: sliding_window_log, unit: second, requests_per_unit: 3}
  - key: swc
    rate_limit: {algorithm: sliding_window_counter, unit: hour, requests_per_unit: 100}
  - key: fw
    detailed_metric: true
    rate_limit: {unit: second, requests_per_unit: 2, unit_multiplier: 3}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: free
    rate_limit: {unlimited: true}
  - key: zero
    rate_limit: {unit: day, requests_per_unit: 0}
  - key: quota
    quota_mode: true
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: user
    value: "adm*"
    rate_limit: {unit: second, requests_per_unit: 50}
  - key: user
    rate_limit: {unit: second, requests_per_unit: 1}
    descriptors:
      - key: path
        share_threshold: true
        value: "/api/*"
        rate_limit: {unit: minute, requests_per_unit: 4}
      - key: path
        rate_limit:
          name: per_path
          unit: second
          requests_per_unit: 2
          replaces: [{name: other}]
  - key: multi
    rate_limits:
      - {name: other, algorithm: gcra, unit: second, requests_per_unit: 3}
      - {algorithm: token_bucket, unit: minute, requests_per_unit: 10, burst: 2}
)";

struct World {
  World()
      : clock(1700006400000000),
        store(Load()),
        backend(clock, {.max_keys = 10000}),
        limiter(store, backend, clock, metrics, RateLimiterOptions()) {}

  static std::shared_ptr<const Config> Load() {
    auto config = LoadConfigText("fuzz.yaml", kConfig);
    if (!config.ok()) {
      std::fprintf(stderr, "request_fuzz: bad built-in config: %s\n",
                   config.status().ToString().c_str());
      std::abort();
    }
    return std::shared_ptr<const Config>(std::move(*config));
  }

  FakeClock clock;
  ConfigStore store;
  MemoryBackend backend;
  Metrics metrics;
  RateLimiter limiter;
};

void Fail(const char* what) {
  std::fprintf(stderr, "request_fuzz: %s\n", what);
  std::abort();
}

}  // namespace
}  // namespace sluice

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using sluice::RateLimiter;
  static auto* world = new sluice::World();
  RateLimiter::Request request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) {
    return 0;  // not a request: gRPC's parse (GrpcCall) refuses it before the limiter
  }
  world->clock.AdvanceMicros(1000);
  RateLimiter::Response response;
  int calls = 0;
  absl::Status result = absl::InternalError("done never ran");
  world->limiter.ShouldRateLimit(request, &response, [&](absl::Status status) {
    ++calls;
    result = std::move(status);
  });
  if (calls != 1) sluice::Fail("done did not run exactly once, inline");
  if (!result.ok()) {
    if (result.code() != absl::StatusCode::kInvalidArgument) sluice::Fail("refused otherwise than kInvalidArgument");
    if (result.message().empty()) sluice::Fail("refused without a message");
    return 0;
  }
  if (response.statuses_size() != request.descriptors_size()) {
    sluice::Fail("not one status per descriptor");
  }
  bool any_over = false;
  for (const auto& status : response.statuses()) {
    if (status.code() == RateLimiter::Response::OVER_LIMIT) {
      any_over = true;
    } else if (status.code() != RateLimiter::Response::OK) {
      sluice::Fail("a status neither OK nor OVER_LIMIT");
    }
  }
  if (response.overall_code() == RateLimiter::Response::OVER_LIMIT && !any_over) {
    sluice::Fail("OVER_LIMIT overall with no descriptor over its limit");
  }
  if (response.overall_code() != RateLimiter::Response::OK &&
      response.overall_code() != RateLimiter::Response::OVER_LIMIT) {
    sluice::Fail("overall neither OK nor OVER_LIMIT");
  }
  return 0;
}
