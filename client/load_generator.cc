#include "client/load_generator.h"

#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "client/rls_client.h"
#include "grpcpp/grpcpp.h"

namespace sluice {
namespace {

using Stub = envoy::service::ratelimit::v3::RateLimitService::Stub;

int64_t NowNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

void SleepUntilNanos(int64_t t) {
  timespec ts;
  ts.tv_sec = t / 1'000'000'000;
  ts.tv_nsec = t % 1'000'000'000;
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

double CpuSeconds(const timeval& tv) { return tv.tv_sec + tv.tv_usec / 1e6; }

int ProcessThreads() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) {
      return std::atoi(line.c_str() + 8);
    }
  }
  return 0;
}

// splitmix64: a few cycles per draw, good enough to spread keys uniformly.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
    z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) (Lemire's multiply-shift; the bias for n << 2^32 is negligible).
  uint32_t Below(uint32_t n) {
    return static_cast<uint32_t>((static_cast<uint64_t>(Next() >> 32) * n) >> 32);
  }

 private:
  uint64_t state_;
};

// Read-only after set-up; shared by every thread.
struct Plan {
  std::vector<std::string> values;
  std::vector<std::unique_ptr<Stub>> stubs;
  absl::Duration timeout;
  int64_t measure_start = 0;
  int64_t measure_end = 0;
};

class Worker;

// One in-flight slot: everything a call needs, reused call after call.
struct Call {
  Worker* worker = nullptr;
  Rng rng{0};
  uint64_t sends = 0;
  RlsRequest request;
  RlsResponse response;
  grpc::Status status;
  std::optional<grpc::ClientContext> context;
  std::unique_ptr<grpc::ClientAsyncResponseReader<RlsResponse>> reader;
  int64_t intended_ns = 0;
};

// Open loop: the send times, call i at start + i / rate, claimed by whichever thread is awake
// when a call is due: the pacer (sleeping until the next one) or a completion thread that has
// just freed a slot. When the server falls behind, the completion threads send the overdue
// calls themselves, as in closed loop, instead of handing every slot to the pacer. Thread-safe.
class Schedule {
 public:
  Schedule(int64_t start_ns, double rate, int64_t end_ns)
      : start_ns_(start_ns), interval_ns_(1e9 / rate), end_ns_(end_ns) {}

  int64_t IntendedTime(uint64_t i) const {
    return start_ns_ + static_cast<int64_t>(static_cast<double>(i) * interval_ns_);
  }
  // The intended time of the next unclaimed call; past the end once closed.
  int64_t NextTime() const {
    const uint64_t i = next_.load(std::memory_order_relaxed);
    return i == kClosed ? end_ns_ : IntendedTime(i);
  }
  // Claims the next call if it is due at `now_ns` and scheduled before the end.
  bool TryClaim(int64_t now_ns, int64_t* intended_ns) {
    uint64_t i = next_.load(std::memory_order_relaxed);
    while (i != kClosed) {
      const int64_t t = IntendedTime(i);
      if (t > now_ns || t >= end_ns_) {
        return false;
      }
      if (next_.compare_exchange_weak(i, i + 1, std::memory_order_relaxed)) {
        *intended_ns = t;
        return true;
      }
    }
    return false;
  }
  // Ends claiming; returns the first call never claimed.
  uint64_t Close() { return next_.exchange(kClosed); }

 private:
  static constexpr uint64_t kClosed = ~uint64_t{0};
  const int64_t start_ns_;
  const double interval_ns_;
  const int64_t end_ns_;
  std::atomic<uint64_t> next_{0};
};

// Open loop: the slots not in flight. Completion threads put, the pacer takes.
class FreeSlots {
 public:
  void Put(Call* call) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(call);
    if (waiting_) {
      cv_.notify_one();
    }
  }
  // A free slot, or nullptr if none is free by `deadline_ns` (CLOCK_MONOTONIC).
  Call* Take(int64_t deadline_ns) {
    std::unique_lock<std::mutex> lock(mu_);
    const auto deadline =
        std::chrono::steady_clock::time_point(std::chrono::nanoseconds(deadline_ns));
    while (free_.empty()) {
      waiting_ = true;
      if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && free_.empty()) {
        waiting_ = false;
        return nullptr;
      }
    }
    waiting_ = false;
    Call* call = free_.back();
    free_.pop_back();
    return call;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Call*> free_;  // guarded by mu_
  bool waiting_ = false;     // guarded by mu_
};

// One completion queue and the thread that polls it. As each call completes, the worker sends
// the slot's next call itself: at once in closed loop; in open loop if one is due (else the
// slot goes back to the pacer).
class Worker {
 public:
  // `schedule` and `free_slots` are null in closed loop.
  Worker(const Plan& plan, Schedule* schedule, FreeSlots* free_slots)
      : plan_(plan), schedule_(schedule), free_slots_(free_slots) {}

  void AddCall(Call* call) {
    call->worker = this;
    calls_.push_back(call);
  }

  // Starts `call` with latency measured from `intended_ns`, unless the worker was shut down
  // (then the call counts as unsent). Any thread; the call completes on this worker's queue.
  bool Start(Call* call, int64_t intended_ns) {
    std::lock_guard<std::mutex> lock(start_mu_);
    if (shut_down_) {
      NoteUnsent(intended_ns);
      return false;
    }
    call->intended_ns = intended_ns;
    call->reader.reset();  // arena-allocated: only runs the destructor
    call->context.emplace();
    call->context->set_deadline(std::chrono::system_clock::now() +
                                absl::ToChronoNanoseconds(plan_.timeout));
    const uint32_t n = static_cast<uint32_t>(plan_.values.size());
    for (auto& descriptor : *call->request.mutable_descriptors()) {
      descriptor.mutable_entries(0)->mutable_value()->assign(plan_.values[call->rng.Below(n)]);
    }
    call->response.Clear();
    Stub& stub = *plan_.stubs[(call->sends++) % plan_.stubs.size()];
    call->reader = stub.PrepareAsyncShouldRateLimit(&*call->context, call->request, &cq_);
    call->reader->StartCall();
    call->reader->Finish(&call->response, &call->status, call);
    return true;
  }

  // Polls until the queue is shut down and drained. Closed loop: starts every slot first, and
  // shuts the queue down itself once the measured interval is over and nothing is in flight.
  void Run() {
    const bool closed_loop = schedule_ == nullptr;
    size_t in_flight = 0;
    if (closed_loop) {
      for (Call* call : calls_) {
        in_flight += Start(call, NowNanos()) ? 1 : 0;
      }
      if (in_flight == 0) {
        Shutdown();
      }
    }
    void* tag;
    bool ok;
    while (cq_.Next(&tag, &ok)) {
      Call* call = static_cast<Call*>(tag);
      const int64_t now = NowNanos();
      Account(*call, now);
      if (closed_loop) {
        if (now >= plan_.measure_end || !Start(call, now)) {
          if (--in_flight == 0) {
            Shutdown();
          }
        }
        continue;
      }
      int64_t intended;
      if (schedule_->TryClaim(now, &intended)) {
        if (intended >= plan_.measure_start) {
          result_.send_lag.Record(NowNanos() - intended);
        }
        Start(call, intended);
      } else {
        free_slots_->Put(call);
      }
    }
  }

  // Stops accepting Start; the queue drains the calls in flight. Idempotent, any thread.
  void Shutdown() {
    std::lock_guard<std::mutex> lock(start_mu_);
    if (!shut_down_) {
      shut_down_ = true;
      cq_.Shutdown();
    }
  }

  // REQUIRES: after Run returned.
  void AddResultsTo(LoadResult& result) const {
    std::lock_guard<std::mutex> lock(start_mu_);
    result.requests += result_.requests;
    result.ok += result_.ok;
    result.over_limit += result_.over_limit;
    result.other_code += result_.other_code;
    result.descriptor_ok += result_.descriptor_ok;
    result.descriptor_over_limit += result_.descriptor_over_limit;
    for (size_t i = 0; i < result.errors_by_code.size(); ++i) {
      result.errors_by_code[i] += result_.errors_by_code[i];
    }
    result.unsent += result_.unsent;
    result.completed_in_interval += result_.completed_in_interval;
    result.latency.Merge(result_.latency);
    result.latency.Merge(unsent_latency_);
    result.send_lag.Merge(result_.send_lag);
  }

 private:
  // A call scheduled in the measured interval that will never be sent: its latency is at least
  // the rest of the interval.
  void NoteUnsent(int64_t intended_ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(start_mu_) {
    if (intended_ns >= plan_.measure_start && intended_ns < plan_.measure_end) {
      ++result_.unsent;
      unsent_latency_.Record(plan_.measure_end - intended_ns);
    }
  }

  void Account(Call& call, int64_t now) {
    if (now >= plan_.measure_start && now < plan_.measure_end) {
      ++result_.completed_in_interval;
    }
    if (call.intended_ns < plan_.measure_start || call.intended_ns >= plan_.measure_end) {
      return;
    }
    ++result_.requests;
    result_.latency.Record(now - call.intended_ns);
    if (!call.status.ok()) {
      const size_t code = std::min<size_t>(call.status.error_code(),
                                           result_.errors_by_code.size() - 1);
      ++result_.errors_by_code[code];
      return;
    }
    switch (call.response.overall_code()) {
      case RlsResponse::OK:
        ++result_.ok;
        break;
      case RlsResponse::OVER_LIMIT:
        ++result_.over_limit;
        break;
      default:
        ++result_.other_code;
        break;
    }
    for (const auto& status : call.response.statuses()) {
      if (status.code() == RlsResponse::OK) {
        ++result_.descriptor_ok;
      } else if (status.code() == RlsResponse::OVER_LIMIT) {
        ++result_.descriptor_over_limit;
      }
    }
  }

  const Plan& plan_;
  Schedule* const schedule_;
  FreeSlots* const free_slots_;
  grpc::CompletionQueue cq_;
  std::vector<Call*> calls_;
  // Written only by this worker's thread (unsent_*: under start_mu_); read after it is joined.
  LoadResult result_;
  mutable std::mutex start_mu_;
  bool shut_down_ ABSL_GUARDED_BY(start_mu_) = false;
  LatencyHistogram unsent_latency_ ABSL_GUARDED_BY(start_mu_);
};

absl::Status Validate(const LoadOptions& o) {
  if (o.server.empty()) {
    return absl::InvalidArgumentError("--server is required (HOST:PORT)");
  }
  if (o.concurrency < 1) {
    return absl::InvalidArgumentError("--concurrency must be at least 1");
  }
  if (o.rate < 0) {
    return absl::InvalidArgumentError("--rate must be 0 (closed loop) or positive");
  }
  if (o.duration <= absl::ZeroDuration() || o.warmup < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--duration must be positive and --warmup not negative");
  }
  if (o.domain.empty() || o.key.empty()) {
    return absl::InvalidArgumentError("--domain and --key must not be empty");
  }
  if (o.keyspace < 1 || o.descriptors < 1) {
    return absl::InvalidArgumentError("--keyspace and --descriptors must be at least 1");
  }
  if (o.channels < 1 || o.threads < 1) {
    return absl::InvalidArgumentError("--channels and --threads must be at least 1");
  }
  if (o.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--timeout must be positive");
  }
  return absl::OkStatus();
}

}  // namespace

uint64_t LoadResult::errors() const {
  uint64_t total = 0;
  for (uint64_t n : errors_by_code) {
    total += n;
  }
  return total;
}

absl::StatusOr<LoadResult> RunLoad(const LoadOptions& options) {
  if (absl::Status s = Validate(options); !s.ok()) {
    return s;
  }
  Plan plan;
  plan.timeout = options.timeout;
  plan.values.reserve(options.keyspace);
  for (int i = 0; i < options.keyspace; ++i) {
    plan.values.push_back(absl::StrCat("v", i));
  }

  // A local subchannel pool and a distinct argument per channel: otherwise gRPC shares one
  // connection between channels to the same address.
  const auto connect_deadline =
      std::chrono::system_clock::now() + absl::ToChronoNanoseconds(options.connect_timeout);
  for (int i = 0; i < options.channels; ++i) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("sluice_bench.channel", i);
    auto channel = grpc::CreateCustomChannel(options.server, grpc::InsecureChannelCredentials(),
                                             args);
    if (!channel->WaitForConnected(connect_deadline)) {
      return absl::UnavailableError(absl::StrCat("cannot connect to ", options.server));
    }
    plan.stubs.push_back(envoy::service::ratelimit::v3::RateLimitService::NewStub(channel));
  }

  const bool closed_loop = options.rate == 0;
  // Declared in this order so that the calls (their ClientContexts) go before the queues.
  std::optional<Schedule> schedule;
  FreeSlots free_slots;
  std::vector<std::unique_ptr<Worker>> workers;
  std::vector<std::unique_ptr<Call>> calls;
  for (int i = 0; i < options.concurrency; ++i) {
    auto call = std::make_unique<Call>();
    call->rng = Rng(options.seed * 0x100000001b3 + static_cast<uint64_t>(i));
    call->sends = static_cast<uint64_t>(i);
    call->request.set_domain(options.domain);
    if (options.hits > 0) {
      call->request.set_hits_addend(options.hits);
    }
    for (int d = 0; d < options.descriptors; ++d) {
      auto* entry = call->request.add_descriptors()->add_entries();
      entry->set_key(d == 0 ? options.key : absl::StrCat(options.key, d + 1));
      // Room for the longest value, so that sends never grow the string.
      entry->mutable_value()->reserve(plan.values.back().size());
    }
    calls.push_back(std::move(call));
  }

  const int64_t start = NowNanos();
  plan.measure_start = start + absl::ToInt64Nanoseconds(options.warmup);
  plan.measure_end = plan.measure_start + absl::ToInt64Nanoseconds(options.duration);
  if (!closed_loop) {
    schedule.emplace(start, options.rate, plan.measure_end);
  }
  for (int i = 0; i < options.threads; ++i) {
    workers.push_back(std::make_unique<Worker>(plan, closed_loop ? nullptr : &*schedule,
                                               closed_loop ? nullptr : &free_slots));
  }
  for (size_t i = 0; i < calls.size(); ++i) {
    workers[i % workers.size()]->AddCall(calls[i].get());
    if (!closed_loop) {
      free_slots.Put(calls[i].get());
    }
  }

  std::vector<std::thread> threads;
  for (auto& worker : workers) {
    threads.emplace_back([&worker] { worker->Run(); });
  }

  LoadResult result;
  rusage usage_start{};
  rusage usage_end{};
  auto begin_measuring = [&] {
    getrusage(RUSAGE_SELF, &usage_start);
    if (options.on_phase) {
      options.on_phase(LoadOptions::Phase::kMeasuring);
    }
  };
  auto end_measuring = [&] {
    getrusage(RUSAGE_SELF, &usage_end);
    result.process_threads = ProcessThreads();
    if (options.on_phase) {
      options.on_phase(LoadOptions::Phase::kMeasured);
    }
  };

  if (closed_loop) {
    SleepUntilNanos(plan.measure_start);
    begin_measuring();
    SleepUntilNanos(plan.measure_end);
    end_measuring();
  } else {
    // The pacer: sleeps until the next call is due and sends it, unless a completion thread
    // got to it first. Timer slack of 1 us keeps the kernel from batching its wake-ups by the
    // default 50 us.
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    bool measuring = false;
    while (true) {
      const int64_t now = NowNanos();
      if (!measuring && now >= plan.measure_start) {
        begin_measuring();
        measuring = true;
      }
      if (now >= plan.measure_end) {
        break;
      }
      const int64_t milestone = measuring ? plan.measure_end : plan.measure_start;
      const int64_t next = schedule->NextTime();
      if (next > now) {
        SleepUntilNanos(std::min(next, milestone));
        continue;
      }
      // Due (or overdue: the lateness counts in its latency). Waits for a free slot at most
      // until the next milestone.
      Call* call = free_slots.Take(milestone);
      if (call == nullptr) {
        continue;
      }
      int64_t intended;
      if (!schedule->TryClaim(NowNanos(), &intended)) {
        free_slots.Put(call);  // a completion thread sent it
        continue;
      }
      if (intended >= plan.measure_start) {
        result.send_lag.Record(NowNanos() - intended);
      }
      call->worker->Start(call, intended);
    }
    end_measuring();
    // Calls of the interval that were never claimed will never be sent.
    for (uint64_t i = schedule->Close();; ++i) {
      const int64_t t = schedule->IntendedTime(i);
      if (t >= plan.measure_end) {
        break;
      }
      if (t >= plan.measure_start) {
        ++result.unsent;
        result.latency.Record(plan.measure_end - t);
      }
    }
    for (auto& worker : workers) {
      worker->Shutdown();
    }
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  for (auto& worker : workers) {
    worker->AddResultsTo(result);
  }
  result.duration_s = absl::ToDoubleSeconds(options.duration);
  result.cpu_user_s = CpuSeconds(usage_end.ru_utime) - CpuSeconds(usage_start.ru_utime);
  result.cpu_sys_s = CpuSeconds(usage_end.ru_stime) - CpuSeconds(usage_start.ru_stime);
  return result;
}

}  // namespace sluice
