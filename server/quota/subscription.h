// One Envoy's view of one quota bucket (a subscription: one stream, one bucket): the demand it
// reports, measured on the server's own clock, and what it was last sent. Small, since a replica
// holds one per (Envoy, bucket); the bucket's id lives once, in the quota server's bucket.
//
// Demand is requests reported over the time between reports as the server received them, not
// the report's time_elapsed: Envoy truncates time_elapsed to whole seconds
// (global_client_impl.cc, getUsageFromBucket), so a 5 s tick sent as 4 s would read 25% high.
// Only the first report of a subscription has no previous one: its time_elapsed is taken then,
// a half second added when it is whole seconds (the truncation's mean), and a first report of
// 0 s (Envoy's immediate report of a new bucket, createBucketImpl) measures nothing: its one
// request is the bucket's birth, and the requests after it, over the time from it, are the rate.
//
// The report interval is measured between the report timer's ticks only. Envoy's timer runs
// every 5 s from its first bucket (onSendReportsTimer), so a later bucket's immediate report and
// its first tick are anywhere from 0 to 5 s apart: that gap says nothing of the interval, and
// taken for it, a bucket made 1 s before a tick looked quiet 3 s after it and was abandoned while
// busy. The interval is the longest of the last gaps between ticks, so that one early report
// cannot shorten it either.
// Not thread-safe: the quota server's lock guards it.
#pragma once

#include <array>
#include <cstdint>

#include "server/quota/envoy_assignment.h"
#include "server/quota/quota_rule.h"

namespace sluice::quota {

class Subscription {
 public:
  // The interval assumed before two reports have been seen: Envoy's (filter_persistence.cc,
  // initTlsStore: 5000 ms), and the range a measured interval is held to.
  static constexpr int64_t kDefaultIntervalUs = 5'000'000;
  static constexpr int64_t kMinIntervalUs = 1'000'000;
  static constexpr int64_t kMaxIntervalUs = 60'000'000;

  // A report of `requests` (allowed + denied) received at now_us, whose time_elapsed was
  // `reported_us` (>= 0, already clamped by the caller).
  void AddReport(uint64_t requests, int64_t reported_us, int64_t now_us);

  // Requests a second over the last reports kept (0 before any measure).
  double Demand() const;
  // Whether a report has measured a rate yet (Envoy's first report of a bucket does not).
  bool measured() const { return sample_count_ > 0; }
  // What the division takes this Envoy to ask: its demand once measured, and until then as much
  // as anyone (infinity): a newcomer gets an equal part of what the measured ones leave, rather
  // than nothing (its demand read as 0) or everything left (the surplus), either of which moves
  // every share again once its first tick is measured.
  double DivisionDemand() const;
  // The time between this Envoy's reports of the bucket, as last measured (held to
  // [kMinIntervalUs, kMaxIntervalUs]), kDefaultIntervalUs before that.
  int64_t interval_us() const { return interval_us_; }
  int64_t last_report_us() const { return last_report_us_; }
  // Reports in a row with no request at all (the immediate report of a new bucket counts one).
  uint32_t idle_reports() const { return idle_reports_; }
  // The report interval has been measured kSamples times: the subscription is no passing one
  // (quota_server.h: a settled subscription is sent its share of the rule's burst).
  bool settled() const { return gap_count_ == kSamples; }
  // The latest report counted requests: the bucket is in use, whatever its reports' timing.
  bool busy() const { return idle_reports_ == 0 && last_report_us_ >= 0; }

  // What the Envoy was last sent (valid when `assigned`).
  struct Sent {
    bool assigned = false;
    QuotaRule::Kind kind = QuotaRule::Kind::kAllowAll;
    double share = 0;        // requests a second (kShare)
    EnvoyTokenBucket bucket;
    bool full_burst = false;  // the bucket holds the rule's burst (the subscription settled)
    int64_t at_us = 0;
    int64_t ttl_us = 0;
  };
  Sent sent;

 private:
  static constexpr size_t kSamples = 3;
  // The last reports, oldest first: requests and microseconds they cover.
  std::array<std::pair<uint64_t, int64_t>, kSamples> samples_{};
  uint8_t sample_count_ = 0;
  // Requests of a report too close to the previous one to measure, for the next sample.
  uint64_t carried_ = 0;
  uint32_t idle_reports_ = 0;
  int64_t last_report_us_ = -1;  // -1: none yet
  // The previous report was the subscription's first and of 0 s (a new bucket's immediate
  // report): the gap to the next is no report interval.
  bool after_immediate_ = false;
  // The last gaps between ticks, newest last; interval_us_ is the longest.
  std::array<int64_t, kSamples> gaps_{};
  uint8_t gap_count_ = 0;
  int64_t interval_us_ = kDefaultIntervalUs;

  void AddSample(uint64_t requests, int64_t elapsed_us);
};

}  // namespace sluice::quota
