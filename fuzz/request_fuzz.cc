// Fuzzes the request path: any bytes as a serialized RateLimitRequest, decided by the real
// RateLimiter (validation, matching, keys, over-limit logic, metrics) on the in-process memory
// backend, against the config of request_fuzz_common.h. The limiter and its counters live across
// inputs, as in a server, and the clock moves 1 ms per input, so state is exercised too.
// Invariants: `done` runs exactly once, inline; and CheckAnswer's.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "absl/status/status.h"
#include "fuzz/request_fuzz_common.h"
#include "server/backend/memory_backend.h"
#include "server/config/config_store.h"
#include "server/service/metrics.h"
#include "server/service/rate_limiter.h"
#include "tests/support/fake_clock.h"

namespace sluice {
namespace {

struct World {
  World()
      : clock(1700006400000000),
        store(fuzz::LoadRequestConfig()),
        backend(clock, {.max_keys = 10000}),
        limiter(store, backend, clock, metrics, RateLimiterOptions()) {}

  FakeClock clock;
  ConfigStore store;
  MemoryBackend backend;
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
  world->clock.AdvanceMicros(1000);
  RateLimiter::Response response;
  int calls = 0;
  absl::Status result = absl::InternalError("done never ran");
  world->limiter.ShouldRateLimit(request, &response, [&](absl::Status status) {
    ++calls;
    result = std::move(status);
  });
  if (calls != 1) sluice::fuzz::Fail("done did not run exactly once, inline");
  sluice::fuzz::CheckAnswer(request, response, result);
  return 0;
}
