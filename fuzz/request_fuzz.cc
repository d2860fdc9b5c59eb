// Fuzzes the request path: any bytes as a serialized RateLimitRequest, decided by the real
// RateLimiter (validation, matching, keys, over-limit logic, metrics) on the in-process memory
// backend, against the config of request_fuzz_common.h. The limiter and its counters live across
// inputs, as in a server, and the clock moves 1 ms per input, so state is exercised too.
// Invariants: `done` runs exactly once, inline; and CheckAnswer's.
// The same bytes also go through the /json body check (json_request_check.h) as a body, and a
// request they parse into (as JSON or as binary) is, one input in four, written as protobuf's
// JSON and checked again. Invariants: the check refuses with kInvalidArgument and a byte offset;
// a body it accepts parses without a crash or hang (protobuf may still refuse it: unknown fields,
// wrong types, out of range numbers are its to find); protobuf's own JSON of any request within
// the array bound, in either spelling, passes the check.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "fuzz/request_fuzz_common.h"
#include "google/protobuf/util/json_util.h"
#include "server/backend/memory_backend.h"
#include "server/config/config_store.h"
#include "server/service/json_request_check.h"
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

// What the server passes the check: the larger of the limiter's max_descriptors and max_entries.
size_t MaxJsonArrayElements() {
  const RateLimiterOptions defaults;
  return std::max(defaults.max_descriptors, defaults.max_entries);
}

bool WithinArrayBound(const RateLimiter::Request& request) {
  if (static_cast<size_t>(request.descriptors_size()) > MaxJsonArrayElements()) {
    return false;
  }
  for (const auto& descriptor : request.descriptors()) {
    if (static_cast<size_t>(descriptor.entries_size()) > MaxJsonArrayElements()) {
      return false;
    }
  }
  return true;
}

// Protobuf's JSON of `request` must pass. Printing it costs several decisions (protobuf's
// converter, under ASan), so one input in four is printed, with the lowerCamelCase or the
// original field names by turns; which, by the input's size, so that an input replays the same.
void CheckOwnJsonPasses(const RateLimiter::Request& request, size_t input_size) {
  if (input_size % 8 >= 2 || !WithinArrayBound(request)) {
    return;
  }
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = input_size % 8 == 1;
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(request, &json, options).ok()) {
    return;
  }
  const absl::Status checked = CheckRateLimitRequestJson(json, MaxJsonArrayElements());
  if (!checked.ok()) {
    std::fprintf(stderr, "%s\n%s\n", std::string(checked.message()).c_str(), json.c_str());
    fuzz::Fail("the /json check refused protobuf's own JSON of a request");
  }
}

// The input as a /json body.
void CheckJsonBody(absl::string_view body) {
  const absl::Status checked = CheckRateLimitRequestJson(body, MaxJsonArrayElements());
  if (!checked.ok()) {
    if (checked.code() != absl::StatusCode::kInvalidArgument ||
        !absl::StrContains(checked.message(), " at byte ")) {
      fuzz::Fail("the /json check refused otherwise than kInvalidArgument naming a byte");
    }
    return;
  }
  RateLimiter::Request request;
  if (google::protobuf::util::JsonStringToMessage(
          google::protobuf::StringPiece(body.data(), body.size()), &request)
          .ok()) {
    CheckOwnJsonPasses(request, body.size());
  }
}

}  // namespace
}  // namespace sluice

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using sluice::RateLimiter;
  static auto* world = new sluice::World();
  sluice::CheckJsonBody(absl::string_view(reinterpret_cast<const char*>(data), size));
  RateLimiter::Request request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) {
    return 0;  // not a request: gRPC's parse (GrpcCall) refuses it before the limiter
  }
  sluice::CheckOwnJsonPasses(request, size);
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
