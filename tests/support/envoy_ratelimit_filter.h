// Test helper: Envoy's HTTP rate-limit filter (envoyproxy/envoy,
// source/extensions/filters/http/ratelimit/ratelimit.cc, class Filter), reduced to what decides
// the calls it makes to the rate-limit service for one request: the call on the request path
// (the acquisition of an in-flight limit) and the call on stream done, with the rate limits
// marked apply_on_stream_done (the release: `hits_addend` with `is_negative_hits`). Each rule cites
// the function of Envoy's source it comes from; tests/support/envoy_ratelimit_filter_test.cc holds
// the emulator to a table of Envoy's cases, and the in-flight e2e test drives Sluice through it.
//
// What it shows: Envoy sends the release for every request whose rate limits it evaluated,
// whatever the service answered (OK, OVER_LIMIT, an error or Envoy's own timeout, with
// failure_mode_deny or without). It sends none for a request destroyed while its call is still in
// flight (the call is cancelled, though the service may have decided it: that lease lapses), for
// one the filter skipped (disabled for this request by `filter_enabled`: the route is never
// captured, so no stream-done descriptor is made), and for one that never reached decodeHeaders
// (a local reply earlier in the chain).
//
// Not thread-safe: one object per request, as Envoy has one filter per stream.
#pragma once

namespace sluice::testing {

class EnvoyRateLimitFilter {
 public:
  // The filter's configuration as it applies to this request.
  struct Config {
    // FilterConfig::enabled(): `filter_enabled`'s runtime fraction, sampled per request. False:
    // decodeHeaders continues without calling the service.
    bool enabled = true;
    // `failure_mode_deny`: an error from the service answers the request with
    // `status_on_error` (500) instead of letting it through.
    bool failure_mode_deny = false;
    // FilterConfig::enforced(): `filter_enforced`'s runtime fraction. False: OVER_LIMIT is
    // counted, and the request goes on.
    bool enforced = true;
  };
  // Filter::State.
  enum class State { kNotStarted, kCalling, kComplete, kResponded };
  // Filters::Common::RateLimit::LimitStatus.
  enum class LimitStatus { kOk, kOverLimit, kError };

  explicit EnvoyRateLimitFilter(Config config) : config_(config) {}

  // Filter::decodeHeaders: keeps the request's headers (request_headers_) and, when enabled,
  // Filter::initiateCall: the request-path rate limits' descriptors
  // (populateRateLimitDescriptors(..., on_stream_done = false), which also keeps the route for
  // stream done); with any, it calls the service (state kCalling). Returns whether that call is
  // sent.
  bool DecodeHeaders(bool has_request_descriptors);

  // Filter::complete: the service answered `status` (kError: the call failed, timed out, or the
  // service answered an error). Returns whether the request goes on upstream; false: Envoy sent
  // a local reply (429 for OVER_LIMIT when enforced, status_on_error under failure_mode_deny),
  // state kResponded. REQUIRES: state() == kCalling.
  bool Complete(LimitStatus status);

  // Filter::onDestroy, when the stream ends (a response sent, local or not, or a reset): a call
  // still in flight is cancelled (no release); otherwise, if decodeHeaders ran, the
  // apply_on_stream_done rate limits' descriptors (populateRateLimitDescriptors(...,
  // on_stream_done = true): none unless the request path kept the route) are sent when there are
  // any, through OnStreamDoneCallBack, whose answer is ignored. Returns whether that call (the
  // release) is sent.
  bool OnDestroy(bool has_stream_done_descriptors);

  State state() const { return state_; }

 private:
  const Config config_;
  State state_ = State::kNotStarted;
  // Filter::request_headers_ is set: decodeHeaders ran.
  bool saw_headers_ = false;
  // Filter::route_ and cluster_ are set: populateRateLimitDescriptors ran on the request path.
  bool route_captured_ = false;
  // Filter::client_ still owned (moved into OnStreamDoneCallBack when the release is sent).
  bool has_client_ = true;
};

}  // namespace sluice::testing
