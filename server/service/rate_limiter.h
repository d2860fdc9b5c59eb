// The decision path of one ShouldRateLimit call, independent of transport: validate the request,
// resolve each descriptor's rules against the config snapshot in force, ask the backend for one
// batch of decisions, and build the Envoy RLS v3 response. The gRPC service and the HTTP /json
// endpoint both call it.
//
// Thread-safe: one RateLimiter serves every concurrent call; it holds no per-call state (the
// failure_mode local store it owns is shared by all calls and safe for concurrent use).
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <cstdint>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "server/backend/backend.h"
#include "server/common/clock.h"
#include "server/config/config_store.h"
#include "server/config/failure_mode.h"
#include "server/service/local_fallback.h"
#include "server/service/metrics.h"
#include "server/service/over_limit_cache.h"

namespace sluice {

struct RateLimiterOptions {
  size_t max_descriptors = 64;
  size_t max_entries = 32;
  // Longest domain, descriptor key or descriptor value, in bytes.
  size_t max_key_bytes = 1024;
  // Prepended to every storage key (lets several deployments share one Redis).
  std::string key_prefix;
  // What answers a descriptor the backend could not decide in its budget, unless its domain
  // sets its own failure_mode.
  FailureMode failure_mode = FailureMode::kAllow;
  // failure_mode local: how many replicas share the backend; each admits on its own a rule's
  // limit and burst divided by this, rounded up (a rule's local_share overrides). REQUIRES: >= 1.
  uint32_t replicas_hint = 1;
  // failure_mode local: keys the in-process store keeps at most.
  size_t local_max_keys = 1000000;

  // envoyproxy/ratelimit compatibility (its environment settings in brackets).
  // A rule's hits past this share of its capacity count as near_limit [NEAR_LIMIT_RATIO].
  double near_limit_ratio = 0.8;
  // Every request over limit is answered OK; statuses still say OVER_LIMIT [SHADOW_MODE].
  bool global_shadow_mode = false;
  // Every descriptor is in quota mode [QUOTA_MODE].
  bool global_quota_mode = false;
  // The response's dynamic metadata carries the request (domain, descriptors, hits) and the
  // `metadata` of the descriptors that passed [RESPONSE_DYNAMIC_METADATA].
  bool response_dynamic_metadata = false;
  // RateLimit-Limit / -Remaining / -Reset headers of the descriptor closest to its limit
  // [LIMIT_RESPONSE_HEADERS_ENABLED, LIMIT_*_HEADER].
  bool rate_limit_headers = false;
  std::string limit_header = "RateLimit-Limit";
  std::string remaining_header = "RateLimit-Remaining";
  std::string reset_header = "RateLimit-Reset";
  // RateLimit-Policy and RateLimit headers (draft-ietf-httpapi-ratelimit-headers) of the same
  // descriptor: `"<rule name or stat key>";q=<limit>;w=<window s>` and `...;r=<remaining>;t=<s>`.
  bool ietf_rate_limit_headers = false;
  // Sluice's own: a retry-after header (whole seconds) on OVER_LIMIT.
  bool retry_after_header = true;
  // A denied request's hits still count on a lone fixed-window rule (upstream's default;
  // [STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=false]). LimitParams::count_denied.
  bool count_denied_hits = false;
};

class RateLimiter {
 public:
  using Request = envoy::service::ratelimit::v3::RateLimitRequest;
  using Response = envoy::service::ratelimit::v3::RateLimitResponse;
  using DoneCallback = absl::AnyInvocable<void(absl::Status) &&>;

  // `config`, `backend`, `clock` (time of the failure_mode local fallback), `metrics` and
  // `cache` (optional: null disables it) must outlive the RateLimiter.
  RateLimiter(const ConfigStore& config, Backend& backend, const Clock& clock, Metrics& metrics,
              RateLimiterOptions options, OverLimitCache* cache = nullptr);

  // Decides `request` into `*response` and then calls `done` exactly once: OK with the response
  // filled, kInvalidArgument with a message naming the offending field, or kUnavailable while
  // no configuration is loaded (--force_start_without_initial_config); response untouched.
  // `request` need only live until this returns; `response` must live until `done` runs.
  // `done` may run inline, on the caller's stack, or later on a backend thread.
  void ShouldRateLimit(const Request& request, Response* response, DoneCallback done);

  // The validation step alone.
  absl::Status Validate(const Request& request) const;

 private:
  const ConfigStore& config_;
  Backend& backend_;
  Metrics& metrics_;
  struct PendingCall;  // one call's state while the backend decides (rate_limiter.cc)

  // Builds the response from the decisions and completes the call.
  void Finish(std::unique_ptr<PendingCall> call, absl::Status status);
  // One holder of `call` lets go of it; the last one finishes it with its stored status.
  void LetGo(PendingCall* call);
  // failure_mode local: decides every check the backend did not, in process.
  void DecideLocally(PendingCall& call);
  // The descriptor whose limit the headers show (envoyproxy/ratelimit's choice), or -1.
  int ClosestToLimit(const PendingCall& call, const Response& response) const;
  // --rate_limit_headers and --ietf_rate_limit_headers, for ClosestToLimit's descriptor.
  void AddRateLimitHeaders(const PendingCall& call, Response* response) const;
  // `passed`: indices of the descriptors answered OK.
  void AddRequestMetadata(PendingCall& call, absl::Span<const size_t> passed,
                          Response* response) const;
  static void DescribeRequest(const Request& request, google::protobuf::Struct* out);

  const RateLimiterOptions options_;
  OverLimitCache* const cache_;
  LocalFallback local_;
  // The config the cache's entries were made under.
  std::atomic<const Config*> seen_config_{nullptr};
};

}  // namespace sluice
