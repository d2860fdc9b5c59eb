// What the request-path fuzz targets share: the config every input is decided against (every
// algorithm and most rule features), and the invariants of an answer. request_fuzz decides on
// the memory backend, request_redis_fuzz on a real Redis.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "absl/status/status.h"
#include "server/config/config_loader.h"
#include "server/service/rate_limiter.h"

namespace sluice::fuzz {

inline constexpr char kRequestConfig[] = R"(domain: fuzz
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
    rate_limit: {unit: second, requests_per_unit: 1, hash_tag: user}
    descriptors:
      - key: path
        share_threshold: true
        value: "/api/*"
        rate_limit: {unit: minute, requests_per_unit: 4, hash_tag: user}
      - key: path
        rate_limit:
          name: per_path
          unit: second
          requests_per_unit: 2
          replaces: [{name: other}]
          hash_tag: user
  - key: multi
    rate_limits:
      - {name: other, algorithm: gcra, unit: second, requests_per_unit: 3}
      - {algorithm: token_bucket, unit: minute, requests_per_unit: 10, burst: 2}
  - key: inflight
    rate_limit: {algorithm: concurrency, unit: second, requests_per_unit: 2}
)";

[[noreturn]] inline void Fail(const char* what) {
  std::fprintf(stderr, "request fuzz: %s\n", what);
  std::abort();
}

inline std::shared_ptr<const Config> LoadRequestConfig() {
  auto config = LoadConfigText("fuzz.yaml", kRequestConfig);
  if (!config.ok()) {
    std::fprintf(stderr, "request fuzz: bad built-in config: %s\n",
                 config.status().ToString().c_str());
    std::abort();
  }
  return std::shared_ptr<const Config>(std::move(*config));
}

// The invariants of any answer: an accepted request gets one status per descriptor, each OK or
// OVER_LIMIT, and OVER_LIMIT overall only if some status says so; a refused one gets
// kInvalidArgument with a message.
inline void CheckAnswer(const RateLimiter::Request& request, const RateLimiter::Response& response,
                        const absl::Status& result) {
  if (!result.ok()) {
    if (result.code() != absl::StatusCode::kInvalidArgument) {
      Fail("refused otherwise than kInvalidArgument");
    }
    if (result.message().empty()) {
      Fail("refused without a message");
    }
    return;
  }
  if (response.statuses_size() != request.descriptors_size()) {
    Fail("not one status per descriptor");
  }
  bool any_over = false;
  for (int i = 0; i < response.statuses_size(); ++i) {
    const auto& status = response.statuses(i);
    if (request.descriptors(i).is_negative_hits() &&
        status.code() != RateLimiter::Response::OK) {
      Fail("a refund answered otherwise than OK");
    }
    if (status.code() == RateLimiter::Response::OVER_LIMIT) {
      any_over = true;
    } else if (status.code() != RateLimiter::Response::OK) {
      Fail("a status neither OK nor OVER_LIMIT");
    }
  }
  if (response.overall_code() == RateLimiter::Response::OVER_LIMIT && !any_over) {
    Fail("OVER_LIMIT overall with no descriptor over its limit");
  }
  if (response.overall_code() != RateLimiter::Response::OK &&
      response.overall_code() != RateLimiter::Response::OVER_LIMIT) {
    Fail("overall neither OK nor OVER_LIMIT");
  }
}

}  // namespace sluice::fuzz
