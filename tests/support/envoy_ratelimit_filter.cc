#include "tests/support/envoy_ratelimit_filter.h"

namespace sluice::testing {

bool EnvoyRateLimitFilter::DecodeHeaders(bool has_request_descriptors) {
  // decodeHeaders: `request_headers_ = &headers;` before anything else, then
  // `if (!config_->enabled()) return Continue;`.
  saw_headers_ = true;
  if (!config_.enabled) {
    return false;
  }
  // initiateCall: populateRateLimitDescriptors(descriptors, headers, false), which saves
  // `route_ = callbacks_->route(); cluster_ = callbacks_->clusterInfo();` for stream done, then
  // `if (!descriptors.empty()) { state_ = State::Calling; client_->limit(...); }`
  // (request_type internal/external filtering returns before it, as `enabled` false does here).
  route_captured_ = true;
  if (!has_request_descriptors) {
    return false;
  }
  state_ = State::kCalling;
  return true;
}

bool EnvoyRateLimitFilter::Complete(LimitStatus status) {
  // complete: `state_ = State::Complete;` first.
  state_ = State::kComplete;
  switch (status) {
    case LimitStatus::kOk:
      return true;  // continueDecoding()
    case LimitStatus::kOverLimit:
      // `if (status == OverLimit && config_->enforced()) { state_ = State::Responded;
      // sendLocalReply(rateLimitedStatus) }`; not enforced: continueDecoding().
      if (config_.enforced) {
        state_ = State::kResponded;
        return false;
      }
      return true;
    case LimitStatus::kError:
      // `if (config_->failureModeAllow()) continueDecoding(); else { state_ = Responded;
      // sendLocalReply(statusOnError) }`.
      if (config_.failure_mode_deny) {
        state_ = State::kResponded;
        return false;
      }
      return true;
  }
  return true;
}

bool EnvoyRateLimitFilter::OnDestroy(bool has_stream_done_descriptors) {
  // onDestroy: `if (state_ == State::Calling) { state_ = State::Complete; client_->cancel(); }`
  if (state_ == State::kCalling) {
    state_ = State::kComplete;
    return false;
  }
  // `else if (client_ != nullptr && request_headers_ != nullptr)`: any other state, Responded
  // (denied, or an error under failure_mode_deny) included; "If decodeHeaders is not called
  // because of a local reply, we do not set request_headers_."
  if (!has_client_ || !saw_headers_) {
    return false;
  }
  // `populateRateLimitDescriptors(descriptors, *request_headers_, true); if (!descriptors.empty())
  // { new OnStreamDoneCallBack(std::move(client_)) ... limit(...) }`, where populate begins with
  // `if (!route_ || !cluster_) return;`.
  if (!route_captured_ || !has_stream_done_descriptors) {
    return false;
  }
  has_client_ = false;
  return true;
}

}  // namespace sluice::testing
