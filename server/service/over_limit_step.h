// The over-limit cache as a step of a decision (see over_limit_cache.h for why its answers are
// right). Before the backend, Answer decides the lone checks the cache knows to be denied; after
// it, Learn remembers the backend's denials of descriptors with a single rule. A group is
// all-or-nothing and needs every member's state, so a check that shares its group with another
// undecided check is never answered from the cache. A check of a rule that charges always
// (Charge::kAlways) with hits > 0 is neither answered nor learned: it must reach the backend to
// be charged; such a rule's checks of 0 hits (a gateway's "is anything left?") are answered
// until the debt is repaid. The cache is cleared when a call brings a
// config other than the last one seen: a new config may admit what the old one denied.
// Thread-safe: the cache is, and the config seen is an atomic.
#pragma once

#include <atomic>

#include "server/config/config.h"
#include "server/service/over_limit_cache.h"
#include "server/service/request_plan.h"

namespace sluice {

class OverLimitStep {
 public:
  // `cache` must outlive the step; null makes a step that does nothing.
  explicit OverLimitStep(OverLimitCache* cache) : cache_(cache) {}

  // Decides (DecidedBy::kCache) each undecided lone check the cache knows to be denied.
  void Answer(const RequestPlan& plan, CheckDecisions& decisions);
  // Remembers each backend denial (DecidedBy::kBackend) of a descriptor with one rule. Local
  // denials are on this replica's share only and are never remembered.
  void Learn(const RequestPlan& plan, const CheckDecisions& decisions);

  OverLimitCache* cache() const { return cache_; }

 private:
  OverLimitCache* const cache_;
  // The config the cache's entries were made under.
  std::atomic<const Config*> seen_config_{nullptr};
};

}  // namespace sluice
