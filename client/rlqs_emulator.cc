#include "client/rlqs_emulator.h"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"

namespace sluice {
namespace {

namespace rlqs = envoy::service::rate_limit_quota::v3;

EnvoyQuotaRules RulesOf(const RlqsEmulatedEnvoy::Options& options) {
  EnvoyQuotaRules rules = EnvoyQuotaRules::For(options.profile);
  if (options.report_interval > absl::ZeroDuration()) {
    rules.report_interval = options.report_interval;
  }
  return rules;
}

EnvoyBucketSettings SettingsOf(const RlqsEmulatedEnvoy::Options& options) {
  EnvoyBucketSettings settings = options.settings;
  if (options.report_interval > absl::ZeroDuration()) {
    settings.reporting_interval = options.report_interval;
  }
  return settings;
}

// Each Envoy on a connection of its own, as separate Envoys are (gRPC would otherwise share one
// subchannel between channels to the same target).
std::shared_ptr<grpc::Channel> OwnChannel(const std::string& server) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(server, grpc::InsecureChannelCredentials(), args);
}

// A bucket id as "k=v,k=v", sorted by key (a map's order is not its contents').
std::string NameOf(const EnvoyQuotaModel::BucketId& id) {
  std::vector<std::pair<std::string, std::string>> pairs(id.bucket().begin(), id.bucket().end());
  std::sort(pairs.begin(), pairs.end());
  std::string name;
  for (const auto& [key, value] : pairs) {
    absl::StrAppend(&name, name.empty() ? "" : ",", key, "=", value);
  }
  return name;
}

}  // namespace

struct RlqsEmulatedEnvoy::Stream {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<Reports, Response>> rw;
  std::thread reader;
  bool closing = false;  // guarded by the envoy's mu_: this side ends it
};

RlqsEmulatedEnvoy::RlqsEmulatedEnvoy(Options options)
    : options_(std::move(options)),
      stub_(rlqs::RateLimitQuotaService::NewStub(OwnChannel(options_.server))),
      model_(RulesOf(options_), options_.domain, SettingsOf(options_)) {}

RlqsEmulatedEnvoy::~RlqsEmulatedEnvoy() {
  Leave();
  JoinStreams();
}

bool RlqsEmulatedEnvoy::Request(const RlqsBucket& bucket) {
  const EnvoyQuotaModel::BucketId id = EnvoyQuotaModel::MakeBucketId(bucket);
  absl::MutexLock lock(&mu_);
  return RequestLocked(id, absl::Now());
}

bool RlqsEmulatedEnvoy::RequestLocked(const EnvoyQuotaModel::BucketId& bucket, absl::Time at,
                                      const std::string* name) {
  EnvoyQuotaModel::Decision decision = model_.OnRequest(bucket, at);
  PerformLocked(decision.output);
  if (decision.allowed) {
    ++admitted_;
    admitted_at_.push_back(at);
    if (at >= window_from_ && at < window_to_) {
      ++admitted_in_window_;
      ++admitted_in_window_by_bucket_[name != nullptr ? *name : NameOf(bucket)];
    }
  } else {
    ++denied_;
  }
  return decision.allowed;
}

void RlqsEmulatedEnvoy::Tick() {
  absl::MutexLock lock(&mu_);
  PerformLocked(model_.Tick(absl::Now()));
}

void RlqsEmulatedEnvoy::PerformLocked(const EnvoyQuotaModel::Output& output) {
  if (left_) {
    return;
  }
  if (output.new_stream) {
    OpenStreamLocked();
  }
  if (output.report && current_ != nullptr) {
    // A write to a broken stream fails; the reader sees the end and tells the model.
    if (current_->rw->Write(*output.report)) {
      ++reports_sent_;
    }
  }
}

void RlqsEmulatedEnvoy::OpenStreamLocked() {
  auto stream = std::make_unique<Stream>();
  stream->rw = stub_->StreamRateLimitQuotas(&stream->context);
  Stream* s = stream.get();
  current_ = s;
  streams_.push_back(std::move(stream));
  s->reader = std::thread([this, s] { ReadLoop(s); });
}

void RlqsEmulatedEnvoy::ReadLoop(Stream* stream) {
  Response response;
  while (stream->rw->Read(&response)) {
    absl::MutexLock lock(&mu_);
    if (stream != current_) {
      // A stream already given up: Envoy holds one at a time (GlobalRateLimitClientImpl's one
      // stream_, started again only once onRemoteClose has set it null: global_client_impl.cc).
      continue;
    }
    const absl::Time now = absl::Now();
    for (const auto& action : response.bucket_action()) {
      if (action.has_abandon_action()) {
        ++abandons_;
        const std::string name = NameOf(action.bucket_id());
        if (std::any_of(flows_.begin(), flows_.end(), [&](const Flow& f) {
              return f.rate > 0 && f.first <= now && f.name == name;
            })) {
          ++busy_abandons_;
        }
      } else if (action.has_quota_assignment_action()) {
        ++assignments_;
      }
      if (options_.verbose) {
        std::fprintf(stderr, "%s %s: %s\n", absl::FormatTime(absl::Now()).c_str(),
                     options_.name.c_str(), action.ShortDebugString().c_str());
      }
    }
    model_.OnResponse(response, absl::Now());
  }
  const grpc::Status status = stream->rw->Finish();
  absl::MutexLock lock(&mu_);
  if (!stream->closing) {
    server_ended_.push_back(StreamEnd{static_cast<int>(status.error_code()),
                                      status.error_message(), absl::Now()});
    if (options_.verbose) {
      std::fprintf(stderr, "%s %s: stream ended by the server: %d %s\n",
                   absl::FormatTime(absl::Now()).c_str(), options_.name.c_str(),
                   static_cast<int>(status.error_code()), status.error_message().c_str());
    }
  }
  if (stream == current_) {
    current_ = nullptr;
    model_.OnStreamClosed();
  }
}

RlqsEmulatedEnvoy::Flow RlqsEmulatedEnvoy::MakeFlow(const RlqsBucket& bucket, double rate,
                                                    absl::Time first) {
  Flow flow;
  flow.id = EnvoyQuotaModel::MakeBucketId(bucket);
  flow.name = NameOf(flow.id);
  flow.rate = rate;
  flow.first = std::max(first, absl::Now());
  flow.next = rate > 0 ? flow.first : absl::InfiniteFuture();
  return flow;
}

void RlqsEmulatedEnvoy::StartLocked() {
  if (running_) {
    return;
  }
  running_ = true;
  stop_ = false;
  driver_ = std::thread([this] { DriveLoop(); });
}

void RlqsEmulatedEnvoy::Start(const RlqsBucket& bucket, double rate, absl::Time first) {
  Flow flow = MakeFlow(bucket, rate, first);
  absl::MutexLock lock(&mu_);
  if (running_) {
    return;
  }
  flows_ = {std::move(flow)};
  StartLocked();
}

void RlqsEmulatedEnvoy::SetTraffic(const RlqsBucket& bucket, double rate) {
  Flow flow = MakeFlow(bucket, rate, absl::Now());
  absl::MutexLock lock(&mu_);
  if (flows_.size() == 1 && flows_[0].rate == rate) {
    flow.next = flows_[0].next;  // the same spacing goes on
  }
  flows_ = {std::move(flow)};
}

void RlqsEmulatedEnvoy::AddTraffic(const RlqsBucket& bucket, double rate, absl::Time first) {
  Flow flow = MakeFlow(bucket, rate, first);
  absl::MutexLock lock(&mu_);
  flows_.push_back(std::move(flow));
  StartLocked();
}

void RlqsEmulatedEnvoy::DriveLoop() {
  mu_.Lock();
  while (!stop_) {
    const absl::Time now = absl::Now();
    // Arrivals at their own times (evenly spaced per flow), decided in time order over every
    // flow (the model's time never goes back).
    while (true) {
      Flow* earliest = nullptr;
      for (Flow& flow : flows_) {
        if (flow.next <= now && (earliest == nullptr || flow.next < earliest->next)) {
          earliest = &flow;
        }
      }
      if (earliest == nullptr) {
        break;
      }
      RequestLocked(earliest->id, earliest->next, &earliest->name);
      earliest->next += absl::Seconds(1 / earliest->rate);
    }
    if (model_.NextReportAt() <= now) {
      PerformLocked(model_.Tick(now));
    }
    // Wake for the next report, or in 5 ms steps for arrivals (decided at their own times, so
    // batching them loses nothing), or at least every 100 ms.
    absl::Time next_arrival = absl::InfiniteFuture();
    for (const Flow& flow : flows_) {
      next_arrival = std::min(next_arrival, flow.next);
    }
    const absl::Time wake = std::min({model_.NextReportAt(),
                                      std::max(next_arrival, now + absl::Milliseconds(5)),
                                      now + absl::Milliseconds(100)});
    mu_.AwaitWithDeadline(absl::Condition(&stop_), wake);
  }
  mu_.Unlock();
}

void RlqsEmulatedEnvoy::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (!running_) {
      return;
    }
    stop_ = true;
  }
  driver_.join();
  absl::MutexLock lock(&mu_);
  running_ = false;
}

void RlqsEmulatedEnvoy::Leave() {
  Stop();
  absl::MutexLock lock(&mu_);
  if (left_) {
    return;
  }
  left_ = true;
  if (current_ != nullptr) {
    current_->closing = true;
    current_->rw->WritesDone();
    current_->context.TryCancel();
  }
}

void RlqsEmulatedEnvoy::JoinStreams() {
  std::vector<Stream*> streams;
  {
    absl::MutexLock lock(&mu_);
    for (auto& s : streams_) {
      s->closing = true;
      s->context.TryCancel();
      streams.push_back(s.get());
    }
  }
  for (Stream* s : streams) {
    if (s->reader.joinable()) {
      s->reader.join();
    }
  }
}

void RlqsEmulatedEnvoy::SetMeasureWindow(absl::Time from, absl::Time to) {
  absl::MutexLock lock(&mu_);
  window_from_ = from;
  window_to_ = to;
}

bool RlqsEmulatedEnvoy::HasBucket(const RlqsBucket& bucket) {
  const EnvoyQuotaModel::BucketId id = EnvoyQuotaModel::MakeBucketId(bucket);
  absl::MutexLock lock(&mu_);
  model_.AdvanceTo(absl::Now());
  return model_.HasBucket(id);
}

std::optional<rlqs::RateLimitQuotaResponse::BucketAction> RlqsEmulatedEnvoy::LastAction(
    const RlqsBucket& bucket) {
  auto view = View(bucket);
  if (!view) {
    return std::nullopt;
  }
  return view->last_action;
}

std::optional<EnvoyBucketView> RlqsEmulatedEnvoy::View(const RlqsBucket& bucket) {
  const EnvoyQuotaModel::BucketId id = EnvoyQuotaModel::MakeBucketId(bucket);
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  model_.AdvanceTo(now);
  return model_.View(id, now);
}

std::vector<RlqsEmulatedEnvoy::StreamEnd> RlqsEmulatedEnvoy::ServerEndedStreams() const {
  absl::MutexLock lock(&mu_);
  return server_ended_;
}

uint64_t RlqsEmulatedEnvoy::streams_opened() const {
  absl::MutexLock lock(&mu_);
  return streams_.size();
}

uint64_t RlqsEmulatedEnvoy::assignments() const {
  absl::MutexLock lock(&mu_);
  return assignments_;
}

uint64_t RlqsEmulatedEnvoy::abandons() const {
  absl::MutexLock lock(&mu_);
  return abandons_;
}

uint64_t RlqsEmulatedEnvoy::busy_abandons() const {
  absl::MutexLock lock(&mu_);
  return busy_abandons_;
}

EnvoyQuotaModel::Rebuilds RlqsEmulatedEnvoy::rebuilds() const {
  absl::MutexLock lock(&mu_);
  return model_.rebuilds();
}

uint64_t RlqsEmulatedEnvoy::AdmittedBetween(absl::Time from, absl::Time to) const {
  absl::MutexLock lock(&mu_);
  const auto begin = std::lower_bound(admitted_at_.begin(), admitted_at_.end(), from);
  const auto end = std::lower_bound(begin, admitted_at_.end(), to);
  return static_cast<uint64_t>(end - begin);
}

std::map<std::string, uint64_t> RlqsEmulatedEnvoy::admitted_in_window_by_bucket() const {
  absl::MutexLock lock(&mu_);
  return admitted_in_window_by_bucket_;
}

uint64_t RlqsEmulatedEnvoy::admitted() const {
  absl::MutexLock lock(&mu_);
  return admitted_;
}

uint64_t RlqsEmulatedEnvoy::denied() const {
  absl::MutexLock lock(&mu_);
  return denied_;
}

uint64_t RlqsEmulatedEnvoy::admitted_in_window() const {
  absl::MutexLock lock(&mu_);
  return admitted_in_window_;
}

uint64_t RlqsEmulatedEnvoy::reports_sent() const {
  absl::MutexLock lock(&mu_);
  return reports_sent_;
}

uint64_t RlqsEmulatedEnvoy::reports_dropped() const {
  absl::MutexLock lock(&mu_);
  return model_.dropped_reports();
}

bool RlqsEmulatedEnvoy::stream_open() const {
  absl::MutexLock lock(&mu_);
  return current_ != nullptr;
}

bool RlqsEmulatedEnvoy::WaitUntil(const std::function<bool()>& condition,
                                  absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() >= deadline) {
      return false;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

// --- The bench's scenarios ---

namespace {

// One Envoy's place in the run: its demand and server, and every Envoy that held it (churn).
struct Slot {
  double demand = 0;
  std::string server;
  std::vector<std::unique_ptr<RlqsEmulatedEnvoy>> envoys;  // the last one is live
};

RlqsBucket BucketOfEpoch(const RlqsBucket& bucket, int64_t epoch) {
  RlqsBucket b = bucket;
  if (epoch > 0 && !b.empty()) {
    absl::StrAppend(&b.back().second, "-", epoch);
  }
  return b;
}

RlqsBucket BucketOfTenant(const RlqsBucket& bucket, int tenant) {
  RlqsBucket b = bucket;
  absl::StrAppend(&b.back().second, "-t", tenant);
  return b;
}

}  // namespace

absl::StatusOr<RlqsEmulationResult> RunRlqsEmulation(const RlqsEmulationOptions& options) {
  if (options.demands.empty()) {
    return absl::InvalidArgumentError("--rlqs: give at least one demand");
  }
  if (options.bucket.empty()) {
    return absl::InvalidArgumentError("--rlqs: the bucket needs at least one key=value pair");
  }
  const size_t n = options.demands.size();
  RlqsEmulatedEnvoy::Options base;
  base.domain = options.domain;
  base.profile = options.profile;
  base.verbose = options.verbose;
  if (options.report_interval_s > 0) {
    base.report_interval = absl::Seconds(options.report_interval_s);
  }
  const double interval_s =
      options.report_interval_s > 0
          ? options.report_interval_s
          : absl::ToDoubleSeconds(options.profile == EnvoyQuotaProfile::kEnvoy
                                      ? EnvoyQuotaRules::For(options.profile).report_interval
                                      : base.settings.reporting_interval);
  std::mt19937_64 random(options.seed);
  // A random moment of `span` report intervals.
  const auto phase = [&](double span) {
    return absl::Seconds(std::uniform_real_distribution<double>(0, span * interval_s)(random));
  };

  const absl::Time start = absl::Now();
  const absl::Time leave_at = start + absl::Seconds(options.warmup_s);
  const absl::Time measure_from =
      options.leave >= 0 ? leave_at + absl::Seconds(options.settle_intervals * interval_s)
                         : leave_at;
  const absl::Time end = measure_from + absl::Seconds(options.duration_s);

  std::vector<Slot> slots(n);
  int64_t epoch = 0;
  auto launch = [&](size_t i) {
    RlqsEmulatedEnvoy::Options o = base;
    o.server = slots[i].server;
    o.name = absl::StrCat("envoy ", i, ".", slots[i].envoys.size());
    auto envoy = std::make_unique<RlqsEmulatedEnvoy>(o);
    envoy->SetMeasureWindow(measure_from, end);
    const absl::Time first = absl::Now() + phase(1);
    if (options.tenants > 0) {
      for (int t = 1; t <= options.tenants; ++t) {
        envoy->AddTraffic(BucketOfTenant(options.bucket, t), slots[i].demand,
                          first + phase(2));
      }
    } else {
      envoy->Start(BucketOfEpoch(options.bucket, epoch), slots[i].demand, first);
    }
    slots[i].envoys.push_back(std::move(envoy));
  };
  for (size_t i = 0; i < n; ++i) {
    slots[i].demand = options.demands[i];
    slots[i].server =
        options.servers.empty() ? options.server : options.servers[i % options.servers.size()];
    launch(i);
  }

  bool left = options.leave < 0 || options.leave >= static_cast<int>(n);
  int64_t churns = 0;
  absl::Time next_churn = options.churn_every_s > 0
                              ? start + absl::Seconds(options.churn_every_s)
                              : absl::InfiniteFuture();
  absl::Time next_epoch = options.new_bucket_every_s > 0 && options.tenants <= 0
                              ? start + absl::Seconds(options.new_bucket_every_s) + phase(1)
                              : absl::InfiniteFuture();
  // (f): the newcomers, each with when it joined and when it leaves (measured when it joined in
  // the measure window).
  struct Newcomer {
    std::unique_ptr<RlqsEmulatedEnvoy> envoy;
    absl::Time joined;
    absl::Time leaves;
  };
  std::vector<Newcomer> newcomers;
  int64_t newcomer_periods = 0;
  const auto next_newcomer_at = [&] {
    return options.newcomer_every_s > 0
               ? start + absl::Seconds(options.newcomer_every_s *
                                       static_cast<double>(++newcomer_periods)) +
                     phase(1)
               : absl::InfiniteFuture();
  };
  absl::Time next_newcomer = next_newcomer_at();
  absl::Time next_newcomer_leaves = absl::InfiniteFuture();
  while (true) {
    const absl::Time now = absl::Now();
    if (now >= end) {
      break;
    }
    if (!left && now >= leave_at) {
      slots[static_cast<size_t>(options.leave)].envoys.back()->Leave();
      left = true;
    }
    if (now >= next_churn) {
      const size_t i = static_cast<size_t>(churns % static_cast<int64_t>(n));
      ++churns;
      next_churn += absl::Seconds(options.churn_every_s);
      if (static_cast<int>(i) != options.leave || !left) {
        slots[i].envoys.back()->Leave();
        launch(i);
      }
    }
    if (now >= next_epoch) {
      ++epoch;
      next_epoch = start +
                   absl::Seconds(options.new_bucket_every_s * static_cast<double>(epoch + 1)) +
                   phase(1);
      for (size_t i = 0; i < n; ++i) {
        if (static_cast<int>(i) == options.leave && left) {
          continue;
        }
        slots[i].envoys.back()->SetTraffic(BucketOfEpoch(options.bucket, epoch),
                                           slots[i].demand);
      }
    }
    if (now >= next_newcomer_leaves) {
      newcomers.back().envoy->Leave();
      next_newcomer_leaves = absl::InfiniteFuture();
    }
    if (now >= next_newcomer) {
      RlqsEmulatedEnvoy::Options o = base;
      const size_t k = newcomers.size();
      o.server = options.servers.empty() ? options.server
                                         : options.servers[(n + k) % options.servers.size()];
      o.name = absl::StrCat("newcomer ", k);
      Newcomer& joined = newcomers.emplace_back();
      joined.envoy = std::make_unique<RlqsEmulatedEnvoy>(o);
      joined.joined = absl::Now();
      joined.leaves = joined.joined + absl::Seconds(options.newcomer_every_s / 2);
      joined.envoy->Start(BucketOfEpoch(options.bucket, epoch),
                          options.newcomer_demand > 0 ? options.newcomer_demand
                                                      : options.demands.back(),
                          joined.joined);
      next_newcomer_leaves = joined.leaves;
      next_newcomer = next_newcomer_at();
    }
    const absl::Time wake = std::min({end, next_churn, next_epoch, next_newcomer,
                                      next_newcomer_leaves,
                                      left ? absl::InfiniteFuture() : leave_at});
    absl::SleepFor(std::max(absl::ZeroDuration(), wake - absl::Now()));
  }
  for (Slot& slot : slots) {
    slot.envoys.back()->Leave();
  }
  for (Newcomer& newcomer : newcomers) {
    newcomer.envoy->Leave();
  }

  RlqsEmulationResult result;
  result.measured_s = options.duration_s;
  result.report_interval_s = interval_s;
  result.buckets_used = static_cast<uint64_t>(epoch) + 1;
  std::map<std::string, uint64_t> by_tenant;
  const auto add_rebuilds = [](EnvoyQuotaModel::Rebuilds& to, const EnvoyQuotaModel::Rebuilds& r) {
    to.count += r.count;
    to.same_bucket += r.same_bucket;
    to.tokens_gained += r.tokens_gained;
  };
  for (size_t i = 0; i < n; ++i) {
    RlqsEnvoyResult r;
    r.demand = slots[i].demand;
    r.incarnations = slots[i].envoys.size();
    uint64_t admitted = 0;
    for (const auto& envoy : slots[i].envoys) {
      admitted += envoy->admitted_in_window();
      r.assignments += envoy->assignments();
      r.abandons += envoy->abandons();
      r.busy_abandons += envoy->busy_abandons();
      add_rebuilds(r.rebuilds, envoy->rebuilds());
      for (const auto& [bucket, count] : envoy->admitted_in_window_by_bucket()) {
        by_tenant[bucket] += count;
      }
      for (const auto& end_of_stream : envoy->ServerEndedStreams()) {
        ++r.server_ended_streams;
        result.server_ended.push_back(RlqsStreamEnd{i, end_of_stream.code, end_of_stream.message,
                                                    absl::ToDoubleSeconds(end_of_stream.at - start)});
      }
    }
    r.admitted_per_s = static_cast<double>(admitted) / options.duration_s;
    result.abandons += r.abandons;
    result.busy_abandons += r.busy_abandons;
    add_rebuilds(result.rebuilds, r.rebuilds);
    result.envoys.push_back(r);
  }
  if (options.tenants > 0) {
    double demand = 0;
    for (double d : options.demands) {
      demand += d;
    }
    for (int t = 1; t <= options.tenants; ++t) {
      RlqsTenant tenant;
      tenant.bucket = NameOf(EnvoyQuotaModel::MakeBucketId(BucketOfTenant(options.bucket, t)));
      tenant.demand = demand;
      tenant.admitted_per_s = static_cast<double>(by_tenant[tenant.bucket]) / options.duration_s;
      result.tenants.push_back(std::move(tenant));
    }
  }
  for (const Newcomer& newcomer : newcomers) {
    const absl::Time to = newcomer.joined + absl::Seconds(1);
    result.busy_abandons += newcomer.envoy->busy_abandons();
    if (newcomer.joined < measure_from || to > end) {
      continue;
    }
    RlqsNewcomer r;
    r.at_s = absl::ToDoubleSeconds(newcomer.joined - start);
    r.own_first_s = newcomer.envoy->AdmittedBetween(newcomer.joined, to);
    r.all_first_s = r.own_first_s;
    for (const Slot& slot : slots) {
      for (const auto& envoy : slot.envoys) {
        r.all_first_s += envoy->AdmittedBetween(newcomer.joined, to);
      }
    }
    result.newcomers.push_back(r);
  }
  std::sort(result.server_ended.begin(), result.server_ended.end(),
            [](const RlqsStreamEnd& a, const RlqsStreamEnd& b) { return a.at_s < b.at_s; });
  return result;
}

std::vector<double> MaxMinFairShares(double limit, const std::vector<double>& demands) {
  std::vector<size_t> order(demands.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return demands[a] < demands[b]; });
  std::vector<double> shares(demands.size(), 0);
  double left = limit;
  for (size_t k = 0; k < order.size(); ++k) {
    const double equal = left / static_cast<double>(order.size() - k);
    shares[order[k]] = std::min(demands[order[k]], equal);
    left -= shares[order[k]];
  }
  return shares;
}

double JainIndex(const std::vector<double>& x) {
  double sum = 0;
  double squares = 0;
  for (double v : x) {
    sum += v;
    squares += v * v;
  }
  return squares == 0 ? 1.0 : sum * sum / (static_cast<double>(x.size()) * squares);
}

}  // namespace sluice
