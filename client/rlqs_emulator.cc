#include "client/rlqs_emulator.h"

#include <algorithm>
#include <cstdio>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <numeric>
#include <thread>

#include "absl/strings/str_cat.h"
#include "envoy/service/rate_limit_quota/v3/rlqs.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace sluice {
namespace {

namespace rlqs = envoy::service::rate_limit_quota::v3;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// One emulated Envoy.
class EmulatedEnvoy {
 public:
  EmulatedEnvoy(const std::string& server, const RlqsEmulationOptions& options, double demand)
      : options_(options),
        demand_(demand),
        stub_(rlqs::RateLimitQuotaService::NewStub(
            grpc::CreateChannel(server, grpc::InsecureChannelCredentials()))) {}

  ~EmulatedEnvoy() {
    if (reader_.joinable()) {
      context_.TryCancel();
      reader_.join();
    }
  }

  // Runs until `end`; counts admissions between `measure_from` and `end`.
  void Run(Clock::time_point measure_from, Clock::time_point end) {
    stream_ = stub_->StreamRateLimitQuotas(&context_);
    reader_ = std::thread([this] { Read(); });
    const auto step = std::chrono::milliseconds(5);
    Clock::time_point now = Clock::now();
    Clock::time_point last_report = now;
    double arrivals = 0;  // fractional requests carried to the next step
    uint64_t allowed = 0;
    uint64_t denied = 0;
    bool first = true;
    while (now < end) {
      std::this_thread::sleep_for(step);
      const Clock::time_point t = Clock::now();
      arrivals += demand_ * Seconds(t - now);
      now = t;
      for (; arrivals >= 1; arrivals -= 1) {
        const bool admit = Admit(now);
        (admit ? allowed : denied) += 1;
        if (admit && now >= measure_from) {
          ++admitted_;
        }
        if (first) {  // a new bucket: Envoy reports it at once
          Report(allowed, denied, 1);
          allowed = denied = 0;
          last_report = now;
          first = false;
        }
      }
      if (Seconds(now - last_report) >= static_cast<double>(options_.report_interval_s)) {
        Report(allowed, denied, options_.report_interval_s);
        allowed = denied = 0;
        last_report = now;
      }
    }
    stream_->WritesDone();
    context_.TryCancel();
    reader_.join();
  }

  uint64_t admitted() const { return admitted_; }
  uint64_t assignments() const { return assignments_.load(); }
  std::string error() const {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }

 private:
  void Report(uint64_t allowed, uint64_t denied, int64_t seconds) {
    rlqs::RateLimitQuotaUsageReports reports;
    reports.set_domain(options_.domain);
    auto* usage = reports.add_bucket_quota_usages();
    for (const auto& [k, v] : options_.bucket) {
      (*usage->mutable_bucket_id()->mutable_bucket())[k] = v;
    }
    usage->mutable_time_elapsed()->set_seconds(seconds);
    usage->set_num_requests_allowed(allowed);
    usage->set_num_requests_denied(denied);
    stream_->Write(reports);
  }

  void Read() {
    rlqs::RateLimitQuotaResponse response;
    while (stream_->Read(&response)) {
      for (const auto& action : response.bucket_action()) {
        if (!action.has_quota_assignment_action()) {
          continue;  // an abandon: keep the last assignment, as reuse_last_assignment would
        }
        const auto& strategy = action.quota_assignment_action().rate_limit_strategy();
        std::lock_guard<std::mutex> lock(mu_);
        ++assignments_;
        if (options_.verbose) {
          std::fprintf(stderr, "%.3f envoy %.0f/s: %s\n", Seconds(Clock::now().time_since_epoch()),
                       demand_, action.ShortDebugString().c_str());
        }
        if (strategy.has_token_bucket()) {
          const auto& b = strategy.token_bucket();
          const double rate = static_cast<double>(b.tokens_per_fill().value()) /
                              static_cast<double>(std::max<int64_t>(1, b.fill_interval().seconds()));
          const double capacity = b.max_tokens();
          if (mode_ != Mode::kBucket || rate != rate_ || capacity != capacity_) {
            mode_ = Mode::kBucket;
            rate_ = rate;
            capacity_ = capacity;
            tokens_ = capacity;  // rebuilt full
            last_ = Clock::now();
          }
        } else if (action.quota_assignment_action().has_assignment_time_to_live() &&
                   action.quota_assignment_action().assignment_time_to_live().seconds() == 0 &&
                   !strategy.has_blanket_rule()) {
          // Expired at once (the server restarts): keep the last assignment.
        } else {
          mode_ = strategy.blanket_rule() == envoy::type::v3::RateLimitStrategy::DENY_ALL
                      ? Mode::kDenyAll
                      : Mode::kAllowAll;
        }
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    error_ = stream_->Finish().error_message();
  }

  bool Admit(Clock::time_point now) {
    std::lock_guard<std::mutex> lock(mu_);
    switch (mode_) {
      case Mode::kAllowAll:
        return true;
      case Mode::kDenyAll:
        return false;
      case Mode::kBucket:
        tokens_ = std::min(capacity_, tokens_ + rate_ * Seconds(now - last_));
        last_ = now;
        if (tokens_ >= 1) {
          tokens_ -= 1;
          return true;
        }
        return false;
    }
    return true;
  }

  enum class Mode { kAllowAll, kDenyAll, kBucket };

  const RlqsEmulationOptions& options_;
  const double demand_;
  std::unique_ptr<rlqs::RateLimitQuotaService::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<rlqs::RateLimitQuotaUsageReports,
                                           rlqs::RateLimitQuotaResponse>>
      stream_;
  std::thread reader_;
  mutable std::mutex mu_;
  Mode mode_ = Mode::kAllowAll;  // no assignment yet: allow all
  double rate_ = 0;
  double capacity_ = 0;
  double tokens_ = 0;
  Clock::time_point last_;
  std::atomic<uint64_t> assignments_{0};
  uint64_t admitted_ = 0;
  std::string error_;
};

}  // namespace

absl::StatusOr<RlqsEmulationResult> RunRlqsEmulation(const RlqsEmulationOptions& options) {
  if (options.demands.empty()) {
    return absl::InvalidArgumentError("--rlqs: give at least one demand");
  }
  std::vector<std::unique_ptr<EmulatedEnvoy>> envoys;
  for (size_t i = 0; i < options.demands.size(); ++i) {
    const std::string& server =
        options.servers.empty() ? options.server : options.servers[i % options.servers.size()];
    envoys.push_back(std::make_unique<EmulatedEnvoy>(server, options, options.demands[i]));
  }
  const Clock::time_point start = Clock::now();
  const auto after = [](double seconds) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  };
  const auto leave_at = start + after(options.warmup_s);
  const auto measure_from =
      options.leave >= 0
          ? leave_at + after(static_cast<double>(options.settle_intervals *
                                                 options.report_interval_s))
          : leave_at;
  const auto end = measure_from + after(options.duration_s);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < envoys.size(); ++i) {
    const bool leaves = static_cast<int>(i) == options.leave;
    threads.emplace_back([&envoy = envoys[i], measure_from, end, leaves, leave_at] {
      envoy->Run(measure_from, leaves ? leave_at : end);
    });
  }
  for (std::thread& t : threads) {
    t.join();
  }
  RlqsEmulationResult result;
  result.measured_s = options.duration_s;
  for (size_t i = 0; i < envoys.size(); ++i) {
    RlqsEnvoyResult r;
    r.demand = options.demands[i];
    r.admitted_per_s = static_cast<double>(envoys[i]->admitted()) / options.duration_s;
    r.assignments = envoys[i]->assignments();
    r.error = envoys[i]->error();
    result.envoys.push_back(r);
  }
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
