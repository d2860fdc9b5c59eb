// Emulated Envoys on a Rate Limit Quota Service: each is Envoy's rate_limit_quota filter as
// client/envoy_quota_model.h models it from Envoy's source (reports, decisions, assignments,
// expiry), driven on real time over a real gRPC stream of its own.
//
// RlqsEmulatedEnvoy is one such Envoy on one server, for tests that drive it step by step or run
// it in the background and look at what it holds. RunRlqsEmulation runs several on a bucket for
// sluice-bench --rlqs: steady division, an Envoy leaving, Envoys replaced one by one (churn),
// traffic moving to new buckets, many tenants' buckets, newcomers; every Envoy's timer and every
// new bucket at a random (seeded) phase of it, as in production. It measures what each admitted
// and counts every stream the server ended, every abandon (of a busy bucket apart) and every
// token bucket Envoy rebuilt. The requests are arrivals on a clock, not calls: what is measured
// is the server's division.
//
// Thread-safety: RlqsEmulatedEnvoy's methods may be called from any thread; its own threads (the
// background driver, one reader per stream) share one mutex with them. RunRlqsEmulation blocks.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/envoy_quota_model.h"
#include "envoy/service/rate_limit_quota/v3/rlqs.grpc.pb.h"

namespace sluice {

using RlqsBucket = std::vector<std::pair<std::string, std::string>>;  // key=value pairs

// One emulated Envoy (one rate_limit_quota filter, one domain) on one server.
//
// Its stream opens with the first request (Envoy's first bucket), and when the server ends it,
// reopens at the next report tick, as Envoy does; Leave() closes it for good. Decisions follow
// the model: the first request of a bucket by no_assignment_behavior and reported at once, then
// the server's assignment (token bucket, blanket rule) until it expires.
class RlqsEmulatedEnvoy {
 public:
  struct Options {
    std::string server = "127.0.0.1:8081";
    std::string domain = "bench";
    EnvoyQuotaProfile profile = EnvoyQuotaProfile::kEnvoy;
    // The bucket settings every bucket is created with (no_assignment_behavior, expiry).
    EnvoyBucketSettings settings;
    // > 0: the report period, instead of the profile's (kEnvoy: Envoy's hard-coded 5 s;
    // kApiText: settings.reporting_interval). For quick tests; Envoy cannot be configured so.
    absl::Duration report_interval = absl::ZeroDuration();
    bool verbose = false;  // every action received, on stderr
    std::string name;      // its name in verbose lines
  };

  // A stream the server ended (never one this side closed).
  struct StreamEnd {
    int code = 0;  // grpc::StatusCode
    std::string message;
    absl::Time at;
  };

  explicit RlqsEmulatedEnvoy(Options options);
  // Leaves (closes the stream) and joins its threads.
  ~RlqsEmulatedEnvoy();
  RlqsEmulatedEnvoy(const RlqsEmulatedEnvoy&) = delete;
  RlqsEmulatedEnvoy& operator=(const RlqsEmulatedEnvoy&) = delete;

  // --- Step by step, at the real time of the call ---

  // One request matched into `bucket`: true when admitted. The first request of a bucket is
  // reported at once (and opens the stream if it is the first bucket ever).
  bool Request(const RlqsBucket& bucket);
  // The report timer firing now: every bucket reported (kEnvoy), the stream reopened if the
  // server had ended it. Independent of the background timer.
  void Tick();

  // --- In the background ---

  // Starts a thread that sends requests for `bucket` at `rate` a second (evenly spaced; 0: none),
  // the first at `first` (now when it has passed), and fires the report timer when the model
  // says it is due. REQUIRES: not running.
  void Start(const RlqsBucket& bucket, double rate, absl::Time first = absl::InfinitePast());
  // Moves the background traffic (every flow) to `bucket` at `rate` (the old buckets go idle).
  void SetTraffic(const RlqsBucket& bucket, double rate);
  // Adds a flow of requests for `bucket` at `rate` a second beside the others, the first at
  // `first`; starts the background thread if it is not running.
  void AddTraffic(const RlqsBucket& bucket, double rate, absl::Time first);
  // Stops the background thread; the stream stays open.
  void Stop();
  // Stops, and closes the stream (WritesDone, then cancel): this Envoy leaves. Requests after it
  // are still decided but nothing is sent and no stream is opened again.
  void Leave();

  // Admitted requests counted separately for arrivals in [from, to) (the bench's measure).
  void SetMeasureWindow(absl::Time from, absl::Time to);

  // --- What it holds ---

  bool HasBucket(const RlqsBucket& bucket);  // false once abandoned (until the next request)
  // The last action the server sent for the bucket (kept after it expires).
  std::optional<envoy::service::rate_limit_quota::v3::RateLimitQuotaResponse::BucketAction>
  LastAction(const RlqsBucket& bucket);
  // The bucket as Envoy holds it now: mode, the strategy in force, and the token bucket as
  // Envoy built it (max tokens, fill rate in tokens a second, tokens now). Expiries due are run
  // first. nullopt when the bucket is not held.
  std::optional<EnvoyBucketView> View(const RlqsBucket& bucket);
  std::vector<StreamEnd> ServerEndedStreams() const;
  uint64_t streams_opened() const;
  uint64_t assignments() const;  // quota assignments received
  uint64_t abandons() const;     // abandon actions received
  // Abandon actions received for a bucket the background traffic was going to at the time
  // (a flow whose first request had been sent): a busy bucket Envoy then erases.
  uint64_t busy_abandons() const;
  // Token buckets assignments rebuilt (EnvoyQuotaModel::rebuilds).
  EnvoyQuotaModel::Rebuilds rebuilds() const;
  // Requests admitted whose arrival was in [from, to).
  uint64_t AdmittedBetween(absl::Time from, absl::Time to) const;
  // Admitted in the measure window, per bucket (its pairs as "k=v,k=v").
  std::map<std::string, uint64_t> admitted_in_window_by_bucket() const;
  uint64_t admitted() const;
  uint64_t denied() const;
  uint64_t admitted_in_window() const;
  uint64_t reports_sent() const;
  uint64_t reports_dropped() const;  // built while the stream was down (Envoy drops them)
  bool stream_open() const;

  // Polls `condition` (which may call the accessors) every 10 ms until it holds or `timeout`
  // passes; whether it held.
  static bool WaitUntil(const std::function<bool()>& condition, absl::Duration timeout);

 private:
  using Reports = envoy::service::rate_limit_quota::v3::RateLimitQuotaUsageReports;
  using Response = envoy::service::rate_limit_quota::v3::RateLimitQuotaResponse;
  struct Stream;

  // A flow of background requests.
  struct Flow {
    EnvoyQuotaModel::BucketId id;
    std::string name;  // "k=v,k=v", sorted by key
    double rate = 0;
    absl::Time first;  // its first request
    absl::Time next;   // its next request
  };
  static Flow MakeFlow(const RlqsBucket& bucket, double rate, absl::Time first);

  bool RequestLocked(const EnvoyQuotaModel::BucketId& bucket, absl::Time at,
                     const std::string* name = nullptr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PerformLocked(const EnvoyQuotaModel::Output& output) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OpenStreamLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReadLoop(Stream* stream);
  void DriveLoop();
  void JoinStreams();

  const Options options_;
  std::unique_ptr<envoy::service::rate_limit_quota::v3::RateLimitQuotaService::Stub> stub_;

  mutable absl::Mutex mu_;
  EnvoyQuotaModel model_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Stream>> streams_ ABSL_GUARDED_BY(mu_);  // every one opened
  Stream* current_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool left_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<StreamEnd> server_ended_ ABSL_GUARDED_BY(mu_);
  uint64_t assignments_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t abandons_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t busy_abandons_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<absl::Time> admitted_at_ ABSL_GUARDED_BY(mu_);  // in arrival order
  std::map<std::string, uint64_t> admitted_in_window_by_bucket_ ABSL_GUARDED_BY(mu_);
  uint64_t admitted_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t denied_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t admitted_in_window_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t reports_sent_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time window_from_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  absl::Time window_to_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  // Background traffic.
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Flow> flows_ ABSL_GUARDED_BY(mu_);
  std::thread driver_;
};

struct RlqsEmulationOptions {
  std::string server = "127.0.0.1:8081";  // one replica; `servers` when set
  std::vector<std::string> servers;       // Envoy i talks to servers[i % size]
  std::string domain = "bench";
  RlqsBucket bucket = {{"route", "bench"}};
  std::vector<double> demands;  // requests per second, one per Envoy
  EnvoyQuotaProfile profile = EnvoyQuotaProfile::kEnvoy;
  // > 0: every Envoy reports at this period instead of its profile's (Envoy: 5 s). For quick
  // runs; today's Envoy cannot be configured so.
  double report_interval_s = 0;
  double warmup_s = 20;  // run first, left out of the measure
  double duration_s = 20;
  bool verbose = false;  // every action on stderr
  // (d) >= 0: that Envoy leaves (closes its stream) when the warmup ends, and the measure starts
  // `settle_intervals` report intervals later: how soon the others hold their new shares.
  int leave = -1;
  int settle_intervals = 3;
  // (b) > 0: every this many seconds one Envoy (0, 1, 2, ... in turn) closes its stream and a
  // new one with the same demand and server takes its place.
  double churn_every_s = 0;
  // (c) > 0: all Envoys move their traffic to a new bucket (the last pair's value with "-<n>"
  // appended) every this many seconds plus a random part of a report interval, so that each
  // new bucket is born at a random phase of each Envoy's report timer; the old buckets go idle,
  // for the server to abandon.
  double new_bucket_every_s = 0;
  // (e) > 0: each Envoy sends its demand to each of this many buckets (tenants: the last pair's
  // value with "-t<k>" appended), the first request of each at a random moment of the first two
  // report intervals, instead of to `bucket`. Each tenant is judged against the limit.
  int tenants = 0;
  // (f) > 0: every this many seconds (plus a random part of a report interval) a newcomer
  // Envoy asking `newcomer_demand` (0: the last demand) joins, on the next server in turn, and
  // leaves half a period later; what it and everyone admitted in its first second is measured.
  double newcomer_every_s = 0;
  double newcomer_demand = 0;
  // Every Envoy's first request comes at a random moment of its first report interval (so
  // their timers are out of step), drawn with this seed, as are (c), (e) and (f).
  uint64_t seed = 1;
};

// (f): one newcomer's first second.
struct RlqsNewcomer {
  double at_s = 0;            // when it joined, since the run started
  uint64_t own_first_s = 0;   // admitted by it in its first second
  uint64_t all_first_s = 0;   // admitted by every Envoy in that second, it included
};

// (e): one tenant's bucket, over every Envoy.
struct RlqsTenant {
  std::string bucket;
  double demand = 0;  // requests a second asked of it, every Envoy's together
  double admitted_per_s = 0;
};

// A stream the server ended, and which Envoy's.
struct RlqsStreamEnd {
  size_t envoy = 0;
  int code = 0;  // grpc::StatusCode
  std::string message;
  double at_s = 0;  // since the run started
};

struct RlqsEnvoyResult {
  double demand = 0;  // requests per second asked
  double admitted_per_s = 0;  // in the measured interval (every incarnation, under churn)
  uint64_t assignments = 0;
  uint64_t abandons = 0;
  uint64_t busy_abandons = 0;
  uint64_t server_ended_streams = 0;
  uint64_t incarnations = 1;  // > 1 under churn
  EnvoyQuotaModel::Rebuilds rebuilds;
};

struct RlqsEmulationResult {
  std::vector<RlqsEnvoyResult> envoys;
  double measured_s = 0;
  double report_interval_s = 0;  // the period the Envoys reported at
  std::vector<RlqsStreamEnd> server_ended;  // every stream the server ended, in time order
  uint64_t abandons = 0;
  uint64_t busy_abandons = 0;  // abandons of a bucket its Envoy's traffic was going to
  EnvoyQuotaModel::Rebuilds rebuilds;  // every Envoy's together
  uint64_t buckets_used = 1;  // (c): buckets the traffic went through
  std::vector<RlqsTenant> tenants;       // (e)
  std::vector<RlqsNewcomer> newcomers;   // (f)
};

absl::StatusOr<RlqsEmulationResult> RunRlqsEmulation(const RlqsEmulationOptions& options);

// Max-min fair shares of `limit` among `demands` (the reference the results are judged by:
// every demand below an equal part of what is left is met, the rest share equally).
std::vector<double> MaxMinFairShares(double limit, const std::vector<double>& demands);

// Jain's fairness index of `x`: (sum x)^2 / (n * sum x^2), 1 when all are equal.
double JainIndex(const std::vector<double>& x);

}  // namespace sluice
