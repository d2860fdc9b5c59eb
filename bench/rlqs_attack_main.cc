// sluice-rlqs-attack: one of issue 47's attacks on the Rate Limit Quota Service (RLQS), run
// against a server to see how the server holds up; bench/rlqs_attack.sh runs each against a
// fresh Sluice and measures the server (RSS, /healthcheck, a well-behaved client beside it).
//
//   sluice-rlqs-attack --server=HOST:PORT --attack=ATTACK [--streams=N] [--buckets=N]
//                      [--pairs=N] [--seconds=S] [--sources=N] ...
//
// The attacks, with the defaults each takes for the flags left unset:
//   nonreading    2 streams that report 180 buckets each and never read a response: a sync
//                 ClientReaderWriter that only Writes, on a thread of its own, every bucket
//                 reported again every second (--refresh), for --seconds (45). Each bucket has
//                 32 pairs: the tenant and 31 of a 1 KiB key and a 1 KiB value (its answers are
//                 as large), 12 MB of ids per stream: under the per-stream and per-peer state
//                 budgets, so that what stops it is the responses it leaves unread. 4 buckets a
//                 message, so that no single answer is larger than the server's pending cap.
//   large_ids     1 stream reporting 5,000 buckets of 32 pairs, 1 KiB key and value (the most a
//                 report may hold), 4 a message, each message's answer read before the next is
//                 sent (--await_answers=0 sends them back to back), for --seconds (45).
//   many_buckets  100 streams x 10,000 one-pair buckets, 1,000 a message, each answered before
//                 the next, for --seconds (45).
//   hold_slots    streams opened one after the other, one bucket each, until the server refuses
//                 one (or --max_streams); then each filled, 500 buckets a message, up to
//                 --buckets (10,000) or until refused, to within one bucket of the bound that
//                 refuses it (see SlotHolder::Fill); then "ready", and the streams are held
//                 --hold seconds (30) while the script checks a real client. Opening and
//                 filling stop at --seconds (150); the hold follows whatever was reached.
// Every bucket reports 1 request a second (so that no server abandons it as idle) with the
// domain and a time_elapsed of --refresh in every message (what both the server before issue
// 47's fix and after it accept), and is reported again every --refresh (10 s; 1 s for
// nonreading) so that it is not abandoned as quiet for long. A bucket's tenant value is
// "a<stream>_<n>." (padded to --value_bytes), so with a rule on `tenant` each bucket gets a token
// bucket, and the attacker knows which bucket an answer is for.
//
// Streams go 100 to a connection (--streams_per_channel), and the connections leave from
// 127.0.0.2 (--sources=N: 127.0.0.2 to 127.0.0.<N+1>, round robin by connection; 0: the kernel's
// choice, 127.0.0.1 on loopback): a server that bounds per peer address sees the attacker as
// another peer than a client of 127.0.0.1 beside it, as on a real network.
//
// Prints progress on stderr, "ready" on stdout when the attack's state is in place (every new
// bucket sent; hold_slots: filled), and at the end what happened: streams opened, streams the
// server ended (by gRPC code, with their messages), reports sent, time; its last line is
// "summary: key=value ..." for scripts. Exit status 0 unless the attack could not run.
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "envoy/service/rate_limit_quota/v3/rlqs.grpc.pb.h"
#include "grpc/support/sync.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

ABSL_FLAG(std::string, server, "127.0.0.1:8081", "the RLQS server, HOST:PORT");
ABSL_FLAG(std::string, attack, "", "nonreading, large_ids, many_buckets or hold_slots");
ABSL_FLAG(std::string, domain, "edge", "domain of every report");
ABSL_FLAG(int64_t, streams, 0, "streams (0: the attack's; hold_slots: see --max_streams)");
ABSL_FLAG(int64_t, buckets, 0, "buckets per stream (0: the attack's)");
ABSL_FLAG(int32_t, pairs, 0, "pairs per bucket id: the tenant and pairs-1 fillers (0: attack's)");
ABSL_FLAG(int32_t, key_bytes, -1, "bytes of each filler pair's key (-1: the attack's)");
ABSL_FLAG(int32_t, value_bytes, -1,
          "bytes of each value, the tenant's padded to it (-1: the attack's; 0: unpadded)");
ABSL_FLAG(int64_t, chunk, 0,
          "most new buckets per message (0: the attack's), fewer when a message would pass "
          "--max_message_bytes");
ABSL_FLAG(int64_t, max_message_bytes, 3 << 20,
          "largest report message (gRPC's default cap: 4 MiB)");
ABSL_FLAG(absl::Duration, refresh, absl::ZeroDuration(),
          "every bucket reported again this often, with this time_elapsed (0: the attack's)");
ABSL_FLAG(double, seconds, 0, "longest the attack runs, streams then closed (0: the attack's)");
ABSL_FLAG(double, hold, 30, "hold_slots: seconds the filled streams are held open");
ABSL_FLAG(int64_t, max_streams, 20000, "hold_slots: most streams opened");
ABSL_FLAG(int64_t, streams_per_channel, 100, "streams per connection");
ABSL_FLAG(int32_t, await_answers, -1,
          "1: each message of new buckets waits for its answer before the next is sent, as a "
          "client that reads does not pile up answers; 0: sent back to back (-1: the attack's)");
ABSL_FLAG(int32_t, sources, 1,
          "source addresses 127.0.0.2 .. 127.0.0.<N+1>, round robin by connection (0: any)");

// gRPC's socket mutator (src/core/lib/iomgr/socket_mutator.h of gRPC 1.51, which libgrpc-dev
// does not install), the one way it offers to act on a client socket before it connects: here,
// to bind the source address. Declared as that header does; checked at run time (the count of
// sockets bound must grow with the connections, else the attack stops).
struct grpc_socket_mutator_vtable {
  bool (*mutate_fd)(int fd, grpc_socket_mutator* mutator);
  int (*compare)(grpc_socket_mutator* a, grpc_socket_mutator* b);
  void (*destroy)(grpc_socket_mutator* mutator);
  bool (*mutate_fd_2)(const void* info, grpc_socket_mutator* mutator);  // null: mutate_fd
};
struct grpc_socket_mutator {
  const grpc_socket_mutator_vtable* vtable;
  gpr_refcount refcount;
};
void grpc_socket_mutator_init(grpc_socket_mutator* mutator,
                              const grpc_socket_mutator_vtable* vtable);

namespace sluice {
namespace {

namespace rlqs = envoy::service::rate_limit_quota::v3;
using Reports = rlqs::RateLimitQuotaUsageReports;
using Response = rlqs::RateLimitQuotaResponse;
using Stub = rlqs::RateLimitQuotaService::Stub;

// ---- Source addresses --------------------------------------------------------------------------

std::atomic<int64_t> sockets_bound{0};
std::atomic<int64_t> channels_made{0};

// Binds each socket of a channel to 127.0.0.<octet> (or its v4-mapped IPv6 form, since gRPC
// connects to an IPv4 address from a dual-stack socket when it can).
struct SourceBinder {
  grpc_socket_mutator base;  // first: gRPC sees only this
  int octet;
};

bool BindSource(int fd, grpc_socket_mutator* mutator) {
  const int octet = reinterpret_cast<SourceBinder*>(mutator)->octet;
  int family = 0;
  socklen_t len = sizeof(family);
  if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &family, &len) != 0) {
    return false;
  }
  int rc = -1;
  if (family == AF_INET) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl((127u << 24) | static_cast<uint32_t>(octet));
    rc = bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  } else if (family == AF_INET6) {
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    const unsigned char mapped[16] = {
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, static_cast<unsigned char>(octet)};
    std::memcpy(&addr.sin6_addr, mapped, sizeof(mapped));
    rc = bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  } else {
    return true;  // not an IP socket (unix:): nothing to bind
  }
  if (rc != 0) {
    std::fprintf(stderr, "sluice-rlqs-attack: bind to 127.0.0.%d: %s\n", octet,
                 std::strerror(errno));
    return false;
  }
  ++sockets_bound;
  return true;
}

int CompareBinders(grpc_socket_mutator* a, grpc_socket_mutator* b) {
  return a < b ? -1 : (a > b ? 1 : 0);
}

void DestroyBinder(grpc_socket_mutator* mutator) {
  delete reinterpret_cast<SourceBinder*>(mutator);
}

const grpc_socket_mutator_vtable kBinderVtable = {BindSource, CompareBinders, DestroyBinder,
                                                  nullptr};

// A channel of its own (a connection of its own: the subchannel pool is the channel's), from
// source address `octet` when it is not 0.
std::shared_ptr<grpc::Channel> NewChannel(const std::string& server, int64_t index, int octet) {
  ++channels_made;
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("sluice.rlqs_attack.channel", static_cast<int>(index));
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  if (octet != 0) {
    auto* binder = new SourceBinder;
    binder->octet = octet;
    grpc_socket_mutator_init(&binder->base, &kBinderVtable);
    args.SetSocketMutator(&binder->base);  // the arguments hold its reference
  }
  return grpc::CreateCustomChannel(server, grpc::InsecureChannelCredentials(), args);
}

// Stubs, one per --streams_per_channel streams, each on a connection of its own.
class Channels {
 public:
  Channels(std::string server, int64_t per_channel, int sources)
      : server_(std::move(server)),
        per_channel_(std::max<int64_t>(1, per_channel)),
        sources_(sources) {}

  // The source address's last octet of stream `stream`'s connection (0: the kernel's choice).
  int SourceOf(int64_t stream) const {
    return sources_ > 0 ? 2 + static_cast<int>((stream / per_channel_) % sources_) : 0;
  }

  Stub& ForStream(int64_t stream) {
    const int64_t index = stream / per_channel_;
    absl::MutexLock lock(&mu_);
    while (static_cast<int64_t>(stubs_.size()) <= index) {
      const int64_t i = static_cast<int64_t>(stubs_.size());
      stubs_.push_back(
          rlqs::RateLimitQuotaService::NewStub(NewChannel(server_, i, SourceOf(i * per_channel_))));
    }
    return *stubs_[static_cast<size_t>(index)];
  }
  int64_t count() {
    absl::MutexLock lock(&mu_);
    return static_cast<int64_t>(stubs_.size());
  }

 private:
  const std::string server_;
  const int64_t per_channel_;
  const int sources_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<Stub>> stubs_ ABSL_GUARDED_BY(mu_);
};

// ---- What the attack sends ---------------------------------------------------------------------

struct Shape {
  std::string domain;
  int pairs = 1;
  int key_bytes = 0;
  int value_bytes = 0;
  int64_t chunk = 500;
  absl::Duration refresh = absl::Seconds(10);
};

std::string Padded(std::string text, int bytes) {
  if (static_cast<int>(text.size()) < bytes) {
    text.resize(static_cast<size_t>(bytes), 'x');
  }
  return text;
}

// Bucket `n` of stream `stream`: tenant "a<stream>_<n>" and pairs-1 fillers.
void FillBucket(const Shape& shape, int64_t stream, int64_t n,
                rlqs::RateLimitQuotaUsageReports::BucketQuotaUsage* usage) {
  auto& bucket = *usage->mutable_bucket_id()->mutable_bucket();
  bucket["tenant"] = Padded(absl::StrCat("a", stream, "_", n, "."), shape.value_bytes);
  for (int j = 1; j < shape.pairs; ++j) {
    bucket[Padded(absl::StrCat("k", j, "."), shape.key_bytes)] =
        Padded(absl::StrCat("v", j, "."), shape.value_bytes);
  }
  const int64_t seconds = std::max<int64_t>(1, absl::ToInt64Seconds(shape.refresh));
  usage->mutable_time_elapsed()->set_seconds(seconds);
  usage->set_num_requests_allowed(static_cast<uint64_t>(seconds));
}

// The bucket number a response's action is for (from the tenant value), or -1.
int64_t BucketNumber(const Response::BucketAction& action) {
  const auto& bucket = action.bucket_id().bucket();
  auto it = bucket.find("tenant");
  if (it == bucket.end()) {
    return -1;
  }
  const std::string& value = it->second;
  const size_t underscore = value.find('_');
  const size_t dot = value.find('.', underscore);
  int64_t n = -1;
  if (underscore == std::string::npos || dot == std::string::npos ||
      !absl::SimpleAtoi(value.substr(underscore + 1, dot - underscore - 1), &n)) {
    return -1;
  }
  return n;
}

// How many buckets go in one message: at most shape.chunk and --max_message_bytes.
int64_t BucketsPerMessage(const Shape& shape) {
  Reports probe;
  probe.set_domain(shape.domain);
  FillBucket(shape, 0, 0, probe.add_bucket_quota_usages());
  const int64_t bytes = static_cast<int64_t>(probe.ByteSizeLong());
  const int64_t fit = absl::GetFlag(FLAGS_max_message_bytes) / std::max<int64_t>(1, bytes);
  return std::max<int64_t>(1, std::min(shape.chunk, fit));
}

// Reports buckets [first, first + count) of `stream`, a message at a time through `send`;
// false (and the rest not sent) when `send` fails.
bool ReportRange(const Shape& shape, int64_t stream, int64_t first, int64_t count,
                 const std::function<bool(const Reports&)>& send) {
  const int64_t per_message = BucketsPerMessage(shape);
  for (int64_t at = first; at < first + count; at += per_message) {
    Reports reports;
    reports.set_domain(shape.domain);
    const int64_t end = std::min(first + count, at + per_message);
    for (int64_t n = at; n < end; ++n) {
      FillBucket(shape, stream, n, reports.add_bucket_quota_usages());
    }
    if (!send(reports)) {
      return false;
    }
  }
  return true;
}

// ---- What happened -----------------------------------------------------------------------------

class Outcomes {
 public:
  void Opened() { ++opened_; }
  void Reported() { ++reports_; }
  void NewBuckets(int64_t n) { new_buckets_ += n; }
  void Actions(int64_t assignments, int64_t abandons) {
    assignments_ += assignments;
    abandons_ += abandons;
  }
  explicit Outcomes(absl::Time start) : start_(start) {}

  // A stream the server ended (or refused: `at_open`), with its status; `when` it was seen over.
  void Ended(const grpc::Status& status, bool at_open, absl::Time when = absl::Now()) {
    absl::MutexLock lock(&mu_);
    const double at = absl::ToDoubleSeconds(when - start_);
    first_end_ = std::min(first_end_, at);
    last_end_ = std::max(last_end_, at);
    Code& code = ended_[status.error_code()];
    ++code.count;
    code.at_open += at_open ? 1 : 0;
    if (code.messages.size() < 3 && std::find(code.messages.begin(), code.messages.end(),
                                              status.error_message()) == code.messages.end()) {
      code.messages.push_back(status.error_message());
    }
  }
  void ClosedByUs() { ++closed_by_us_; }

  void Print(const std::string& attack, double seconds, int64_t connections) {
    absl::MutexLock lock(&mu_);
    std::printf("attack %s: %.1f s, %lld connections, %lld sockets bound to a source address\n",
                attack.c_str(), seconds, static_cast<long long>(connections),
                static_cast<long long>(sockets_bound.load()));
    std::printf(
        "streams opened: %lld; reports sent: %lld (new buckets: %lld); actions received: "
        "%lld assignments, %lld abandons\n",
        static_cast<long long>(opened_.load()), static_cast<long long>(reports_.load()),
        static_cast<long long>(new_buckets_.load()), static_cast<long long>(assignments_.load()),
        static_cast<long long>(abandons_.load()));
    int64_t ended = 0;
    std::vector<std::string> codes;
    for (const auto& [code, what] : ended_) {
      ended += what.count;
      codes.push_back(absl::StrCat(CodeName(code), ":", what.count));
    }
    std::printf("streams the server ended: %lld", static_cast<long long>(ended));
    if (ended > 0) {
      std::printf(" (seen from %.1f s to %.1f s after the start)", first_end_, last_end_);
    }
    std::printf("; still open at the end (closed by the attacker): %lld\n",
                static_cast<long long>(closed_by_us_.load()));
    for (const auto& [code, what] : ended_) {
      std::printf("  %s x%lld (%lld when opened)\n", CodeName(code).c_str(),
                  static_cast<long long>(what.count), static_cast<long long>(what.at_open));
      for (const std::string& message : what.messages) {
        std::printf("    \"%s\"\n", message.c_str());
      }
    }
    std::printf(
        "summary: attack=%s seconds=%.1f opened=%lld ended=%s first_end=%.1f "
        "open_at_end=%lld reports=%lld new_buckets=%lld assignments=%lld\n",
        attack.c_str(), seconds, static_cast<long long>(opened_.load()),
        codes.empty() ? "none" : absl::StrJoin(codes, ",").c_str(), ended > 0 ? first_end_ : -1.0,
        static_cast<long long>(closed_by_us_.load()), static_cast<long long>(reports_.load()),
        static_cast<long long>(new_buckets_.load()), static_cast<long long>(assignments_.load()));
    std::fflush(stdout);
  }

  static std::string CodeName(grpc::StatusCode code) {
    static const char* const kNames[] = {"OK",
                                         "CANCELLED",
                                         "UNKNOWN",
                                         "INVALID_ARGUMENT",
                                         "DEADLINE_EXCEEDED",
                                         "NOT_FOUND",
                                         "ALREADY_EXISTS",
                                         "PERMISSION_DENIED",
                                         "RESOURCE_EXHAUSTED",
                                         "FAILED_PRECONDITION",
                                         "ABORTED",
                                         "OUT_OF_RANGE",
                                         "UNIMPLEMENTED",
                                         "INTERNAL",
                                         "UNAVAILABLE",
                                         "DATA_LOSS",
                                         "UNAUTHENTICATED"};
    const int i = static_cast<int>(code);
    return i >= 0 && i <= 16 ? kNames[i] : absl::StrCat("CODE_", i);
  }

 private:
  struct Code {
    int64_t count = 0;
    int64_t at_open = 0;
    std::vector<std::string> messages;
  };
  const absl::Time start_;
  std::atomic<int64_t> opened_{0};
  std::atomic<int64_t> reports_{0};
  std::atomic<int64_t> new_buckets_{0};
  std::atomic<int64_t> assignments_{0};
  std::atomic<int64_t> abandons_{0};
  std::atomic<int64_t> closed_by_us_{0};
  absl::Mutex mu_;
  std::map<grpc::StatusCode, Code> ended_ ABSL_GUARDED_BY(mu_);
  double first_end_ ABSL_GUARDED_BY(mu_) = 1e18;
  double last_end_ ABSL_GUARDED_BY(mu_) = 0;
};

// ---- A stream that reads (callback API) ---------------------------------------------------------

// One RLQS stream that reads and counts every response, and sends what it is given, one write at
// a time. Thread-safe. REQUIRES: Close before it is destroyed.
class ReadingStream final : public grpc::ClientBidiReactor<Reports, Response> {
 public:
  ReadingStream(Stub& stub, Outcomes& outcomes) : outcomes_(outcomes) {
    stub.async()->StreamRateLimitQuotas(&context_, this);
    StartRead(&response_);
    AddHold();  // writes start outside reactions: OnDone waits for Close
    StartCall();
  }

  // Queues `reports` (blocking while two messages wait); false, nothing sent, once the stream is
  // over (the server ended it or the call broke).
  bool Send(Reports reports) {
    const Reports* start = nullptr;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &ReadingStream::CanSend));
      if (over_) {
        return false;
      }
      queue_.push_back(std::move(reports));
      if (!writing_) {
        writing_ = true;
        start = &queue_.front();  // a deque's elements stay put as it grows at the back
      }
    }
    if (start != nullptr) {
      StartWrite(start);
    }
    outcomes_.Reported();
    return true;
  }

  // Waits until an action for bucket `n` or a later one has been read; false when the stream
  // is over first or `timeout` passes.
  bool AwaitAnswer(int64_t n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    awaited_ = n;
    mu_.AwaitWithTimeout(absl::Condition(this, &ReadingStream::AnsweredOrOver), timeout);
    return answered_ >= n;
  }

  bool over() {
    absl::MutexLock lock(&mu_);
    return over_;
  }
  // When the stream was first seen over (meaningful once over()).
  absl::Time over_at() {
    absl::MutexLock lock(&mu_);
    return over_at_;
  }

  // Cancels the call (Close still to be called).
  void Cancel() {
    absl::MutexLock lock(&mu_);
    if (!over_) {
      cancelled_ = true;
      context_.TryCancel();
    }
  }

  // Ends the stream, cancelling it unless the server already has, waits for gRPC to be done
  // with it and returns its status; `*by_us` says whether this cancelled it.
  grpc::Status Close(bool* by_us) {
    bool remove = false;
    {
      absl::MutexLock lock(&mu_);
      *by_us = !over_ || cancelled_;
      remove = !hold_removed_;
      hold_removed_ = true;
    }
    if (*by_us) {
      context_.TryCancel();
    }
    if (remove) {
      RemoveHold();
    }
    absl::MutexLock lock(&mu_);
    if (!mu_.AwaitWithTimeout(absl::Condition(&done_), absl::Seconds(10))) {
      // The server ended the stream but its status has not come (behind responses unread?).
      context_.TryCancel();
      mu_.Await(absl::Condition(&done_));
      return grpc::Status(grpc::StatusCode::UNKNOWN,
                          absl::StrCat("ended, no status within 10 s: ", status_.error_message()));
    }
    return status_;
  }

 private:
  bool CanSend() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return over_ || queue_.size() < 2; }
  void SetOver() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!over_) {
      over_ = true;
      over_at_ = absl::Now();
    }
  }
  bool AnsweredOrOver() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return over_ || answered_ >= awaited_;
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      absl::MutexLock lock(&mu_);
      SetOver();
      return;
    }
    int64_t assignments = 0;
    int64_t abandons = 0;
    int64_t answered = -1;
    for (const auto& action : response_.bucket_action()) {
      if (action.has_abandon_action()) {
        ++abandons;
      } else {
        ++assignments;
        answered = std::max(answered, BucketNumber(action));
      }
    }
    outcomes_.Actions(assignments, abandons);
    {
      absl::MutexLock lock(&mu_);
      answered_ = std::max(answered_, answered);
    }
    StartRead(&response_);
  }

  void OnWriteDone(bool ok) override {
    const Reports* next = nullptr;
    {
      absl::MutexLock lock(&mu_);
      queue_.pop_front();
      if (!ok) {
        SetOver();
        queue_.clear();
      }
      if (!queue_.empty()) {
        next = &queue_.front();
      } else {
        writing_ = false;
      }
    }
    if (next != nullptr) {
      StartWrite(next);
    }
  }

  void OnDone(const grpc::Status& status) override {
    absl::MutexLock lock(&mu_);
    status_ = status;
    SetOver();
    done_ = true;
  }

  Outcomes& outcomes_;
  grpc::ClientContext context_;
  Response response_;  // the read in flight's
  absl::Mutex mu_;
  std::deque<Reports> queue_ ABSL_GUARDED_BY(mu_);  // the front one is being written
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool over_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time over_at_ ABSL_GUARDED_BY(mu_);
  bool hold_removed_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;  // by Cancel: not the server's doing
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
  int64_t answered_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t awaited_ ABSL_GUARDED_BY(mu_) = 0;
};

// ---- The feeding loop (nonreading, large_ids, many_buckets) ------------------------------------

// Sends buckets [0, buckets) of `stream` a message at a time, every one sent so far again every
// shape.refresh, until `end`, `stop`, or `send` fails. With `await_answer`, each message of new
// buckets waits for the answer to its last one (false: the stream is over). Counts
// `*initial_done` up once every new bucket has been sent (or the stream is over).
void Feed(const Shape& shape, int64_t stream, int64_t buckets, absl::Time end,
          const std::atomic<bool>& stop, Outcomes& outcomes, std::atomic<int64_t>* initial_done,
          const std::function<bool(const Reports&)>& send,
          const std::function<bool(int64_t)>& await_answer = nullptr) {
  const int64_t per_message = BucketsPerMessage(shape);
  int64_t sent = 0;
  bool counted = false;
  absl::Time next_refresh = absl::Now() + shape.refresh;
  while (!stop && absl::Now() < end) {
    if (absl::Now() >= next_refresh) {
      next_refresh = absl::Now() + shape.refresh;
      if (!ReportRange(shape, stream, 0, sent, send)) {
        break;
      }
      continue;
    }
    if (sent < buckets) {
      const int64_t n = std::min(per_message, buckets - sent);
      if (!ReportRange(shape, stream, sent, n, send)) {
        break;
      }
      sent += n;
      outcomes.NewBuckets(n);
      if (await_answer != nullptr && !await_answer(sent - 1)) {
        break;
      }
      continue;
    }
    if (!counted) {
      counted = true;
      ++*initial_done;
    }
    absl::SleepFor(
        std::min({absl::Milliseconds(100), next_refresh - absl::Now(), end - absl::Now()}));
  }
  if (!counted) {
    ++*initial_done;
  }
}

// Waits for every feeder's first pass (printing "ready") or `end`.
void AnnounceReady(const std::atomic<int64_t>& initial_done, int64_t streams, absl::Time end,
                   const std::atomic<bool>& stop) {
  while (!stop && initial_done < streams && absl::Now() < end) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  if (initial_done >= streams) {
    std::printf("ready\n");
    std::fflush(stdout);
  }
}

// nonreading: sync streams that only ever Write.
void RunNonReading(Channels& channels, const Shape& shape, int64_t streams, int64_t buckets,
                   absl::Time end, Outcomes& outcomes) {
  struct Sync {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReaderWriter<Reports, Response>> stream;
    std::thread writer;
    std::atomic<bool> failed{false};
    absl::Time failed_at;  // set before `failed`
    std::atomic<bool> finished{false};
    grpc::Status status;
  };
  std::atomic<bool> stop{false};
  std::atomic<int64_t> initial_done{0};
  std::vector<std::unique_ptr<Sync>> syncs;
  for (int64_t s = 0; s < streams; ++s) {
    auto sync = std::make_unique<Sync>();
    sync->stream = channels.ForStream(s).StreamRateLimitQuotas(&sync->context);
    outcomes.Opened();
    Sync* raw = sync.get();
    sync->writer = std::thread([&, raw, s] {
      Feed(shape, s, buckets, end, stop, outcomes, &initial_done, [&](const Reports& reports) {
        if (!raw->stream->Write(reports)) {
          raw->failed_at = absl::Now();
          raw->failed = true;
          return false;
        }
        outcomes.Reported();
        return true;
      });
    });
    syncs.push_back(std::move(sync));
  }
  AnnounceReady(initial_done, streams, end, stop);
  // Until the end, or until every stream's writes fail (the server ended them all).
  while (absl::Now() < end &&
         std::any_of(syncs.begin(), syncs.end(), [](const auto& s) { return !s->failed; })) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  stop = true;
  // The streams still open are cancelled; the others were ended by the server, whose status
  // may never come: it follows the responses this client never reads. Each waited for 5 s, all
  // at once.
  std::vector<bool> by_us;
  for (auto& sync : syncs) {
    by_us.push_back(!sync->failed);
    if (by_us.back()) {
      sync->context.TryCancel();  // also wakes a Write blocked on flow control
      outcomes.ClosedByUs();
    }
    sync->writer.join();
  }
  std::vector<std::thread> finishers;
  for (auto& sync : syncs) {
    Sync* raw = sync.get();
    finishers.emplace_back([raw] {
      raw->status = raw->stream->Finish();
      raw->finished = true;
    });
  }
  const absl::Time limit = absl::Now() + absl::Seconds(5);
  while (absl::Now() < limit &&
         std::any_of(syncs.begin(), syncs.end(), [](const auto& s) { return !s->finished; })) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  for (size_t i = 0; i < syncs.size(); ++i) {
    Sync& sync = *syncs[i];
    const bool in_time = sync.finished;
    if (!in_time) {
      sync.context.TryCancel();
    }
    finishers[i].join();
    if (!by_us[i]) {
      outcomes.Ended(in_time ? sync.status
                             : grpc::Status(grpc::StatusCode::UNKNOWN,
                                            "writes failed (the server ended the stream), its "
                                            "status not delivered within 5 s"),
                     false, sync.failed_at);
    }
  }
}

// large_ids, many_buckets: reading streams, a feeder thread each.
void RunReading(Channels& channels, const Shape& shape, int64_t streams, int64_t buckets,
                bool await_answers, absl::Time end, Outcomes& outcomes) {
  std::atomic<bool> stop{false};
  std::atomic<int64_t> initial_done{0};
  std::vector<std::unique_ptr<ReadingStream>> readers;
  std::vector<std::thread> feeders;
  for (int64_t s = 0; s < streams; ++s) {
    readers.push_back(std::make_unique<ReadingStream>(channels.ForStream(s), outcomes));
    outcomes.Opened();
  }
  for (int64_t s = 0; s < streams; ++s) {
    ReadingStream* reader = readers[static_cast<size_t>(s)].get();
    feeders.emplace_back([&, reader, s] {
      std::function<bool(int64_t)> await_answer;
      if (await_answers) {
        await_answer = [reader, end](int64_t n) {
          // A server that takes long to answer is waited for up to the end.
          while (!reader->AwaitAnswer(n, absl::Seconds(1))) {
            if (reader->over() || absl::Now() >= end) {
              return false;
            }
          }
          return true;
        };
      }
      Feed(
          shape, s, buckets, end, stop, outcomes, &initial_done,
          [reader](const Reports& reports) { return reader->Send(reports); }, await_answer);
    });
  }
  AnnounceReady(initial_done, streams, end, stop);
  while (absl::Now() < end &&
         std::any_of(readers.begin(), readers.end(), [](const auto& r) { return !r->over(); })) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  stop = true;
  for (std::thread& feeder : feeders) {
    feeder.join();
  }
  for (auto& reader : readers) {
    bool by_us = false;
    const grpc::Status status = reader->Close(&by_us);
    if (by_us) {
      outcomes.ClosedByUs();
    } else {
      outcomes.Ended(status, false, reader->over_at());
    }
  }
}

// ---- hold_slots ---------------------------------------------------------------------------------

// Opens streams until refused, fills them until refused, holds them. Streams the server ended are
// kept (closed) until the end, since the refresher may still be sending to one.
class SlotHolder {
 public:
  SlotHolder(Channels& channels, const Shape& shape, Outcomes& outcomes)
      : channels_(channels), shape_(shape), outcomes_(outcomes) {}

  // Opens and fills until `end`, then holds the streams `hold` (past `end` if need be).
  void Run(int64_t max_streams, int64_t max_buckets, absl::Duration hold, absl::Time end) {
    std::thread refresher([this] { Refresh(); });
    int64_t next_id = Open(0, max_streams, end);
    Fill(max_buckets, end);
    // Slots given up while filling (a stream opened again and refused) taken back.
    (void)Open(next_id, max_streams, end);
    {
      absl::MutexLock lock(&mu_);
      int64_t buckets = 0;
      for (const Held& held : held_) {
        buckets += held.buckets;
      }
      std::fprintf(stderr, "hold_slots: %zu streams hold %lld buckets\n", held_.size(),
                   static_cast<long long>(buckets));
    }
    std::printf("ready\n");
    std::fflush(stdout);
    const absl::Time until = absl::Now() + hold;
    while (absl::Now() < until) {
      absl::SleepFor(absl::Milliseconds(100));
    }
    stop_ = true;
    refresher.join();
    absl::MutexLock lock(&mu_);
    for (Held& held : held_) {
      if (!held.lost) {
        held.stream->Cancel();  // all at once: closing them one by one takes long
      }
    }
    for (Held& held : held_) {
      if (held.lost) {
        continue;  // counted when refused
      }
      bool by_us = false;
      const grpc::Status status = held.stream->Close(&by_us);
      if (by_us) {
        outcomes_.ClosedByUs();
      } else {
        outcomes_.Ended(status, false);
      }
    }
  }

 private:
  struct Held {
    int64_t id = 0;
    ReadingStream* stream = nullptr;  // in streams_
    int64_t buckets = 0;
    bool lost = false;  // refused, and refused again when opened anew: closed
  };

  // Counts a stream that was refused, whether the server ended it or the attacker gave up on it
  // (by_us: no answer within 30 s).
  void Refused(ReadingStream& stream, bool at_open) {
    bool by_us = false;
    const grpc::Status status = stream.Close(&by_us);
    outcomes_.Ended(by_us ? grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                         "no answer within 30 s (cancelled by the attacker)")
                          : status,
                    at_open);
  }

  // A new stream `id` reporting its buckets [0, buckets), each message answered before the
  // next; null (the refusal counted) when the server ends it.
  ReadingStream* OpenWith(int64_t id, int64_t buckets, bool at_open) {
    ReadingStream* stream;
    {
      absl::MutexLock lock(&mu_);
      streams_.push_back(std::make_unique<ReadingStream>(channels_.ForStream(id), outcomes_));
      stream = streams_.back().get();
    }
    const int64_t per_message = BucketsPerMessage(shape_);
    for (int64_t at = 0; at < buckets; at += per_message) {
      const int64_t n = std::min(per_message, buckets - at);
      if (!ReportRange(shape_, id, at, n, [&](const Reports& r) { return stream->Send(r); }) ||
          !stream->AwaitAnswer(at + n - 1, absl::Seconds(30))) {
        Refused(*stream, at_open);
        return nullptr;
      }
    }
    outcomes_.Opened();
    return stream;
  }

  // Opens streams `first_id` on, one bucket each, until one is refused (or --max_streams are
  // held, or `end`); returns the next id.
  int64_t Open(int64_t first_id, int64_t max_streams, absl::Time end) {
    int64_t id = first_id;
    while (absl::Now() < end) {
      {
        absl::MutexLock lock(&mu_);
        if (Live() >= max_streams) {
          break;
        }
      }
      ReadingStream* stream = OpenWith(id, 1, true);
      ++id;
      if (stream == nullptr) {
        break;
      }
      outcomes_.NewBuckets(1);
      absl::MutexLock lock(&mu_);
      held_.push_back(Held{id - 1, stream, 1});
      if (held_.size() % 500 == 0) {
        std::fprintf(stderr, "hold_slots: %zu streams open\n", held_.size());
      }
    }
    absl::MutexLock lock(&mu_);
    std::fprintf(stderr, "hold_slots: %lld streams open\n", static_cast<long long>(Live()));
    return id;
  }

  int64_t Live() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return static_cast<int64_t>(
        std::count_if(held_.begin(), held_.end(), [](const Held& h) { return !h.lost; }));
  }

  // Each stream filled a message at a time until refused or max_buckets. The server drops a
  // stream it refuses with all it held, so a refused stream is opened again with what it held
  // (which fitted before) and filled on with messages half as large, down to one bucket: filled
  // to within one bucket of the bound. A stream that cannot take even one more bucket marks its
  // source address full (the bound is the peer's or the server's), and that source's other
  // streams are left as they are.
  void Fill(int64_t max_buckets, absl::Time end) {
    const int64_t per_message = BucketsPerMessage(shape_);
    std::map<int, bool> full;  // by source octet
    size_t count;
    {
      absl::MutexLock lock(&mu_);
      count = held_.size();
    }
    for (size_t i = 0; i < count && absl::Now() < end; ++i) {
      Held held;
      {
        absl::MutexLock lock(&mu_);
        held = held_[i];
      }
      const int source = channels_.SourceOf(held.id);
      if (full[source]) {
        continue;
      }
      bool added_any = false;
      int64_t step = per_message;
      while (held.buckets < max_buckets && absl::Now() < end) {
        const int64_t first = held.buckets;
        const int64_t n = std::min(step, max_buckets - first);
        ReadingStream* stream = held.stream;
        if (ReportRange(shape_, held.id, first, n,
                        [&](const Reports& r) { return stream->Send(r); }) &&
            stream->AwaitAnswer(first + n - 1, absl::Seconds(30))) {
          held.buckets += n;
          outcomes_.NewBuckets(n);
          added_any = true;
          absl::MutexLock lock(&mu_);
          held_[i].buckets = held.buckets;
          continue;
        }
        Refused(*stream, false);
        // The server frees what the stream held once it is done with it: a moment, else the
        // stream opened again may find the bound still full.
        absl::SleepFor(absl::Milliseconds(200));
        ReadingStream* again = OpenWith(held.id, first, false);
        if (again == nullptr) {
          absl::SleepFor(absl::Seconds(1));
          again = OpenWith(held.id, first, false);
        }
        absl::MutexLock lock(&mu_);
        if (again == nullptr) {
          held_[i].buckets = 0;  // closed: the refresher's reports to it fail
          held_[i].lost = true;
          break;
        }
        held_[i].stream = again;
        held.stream = again;
        if (step > 1) {
          step = std::max<int64_t>(1, step / 2);
          continue;
        }
        full[source] = !added_any;
        break;
      }
      if (i % 10 == 9) {
        std::fprintf(stderr, "hold_slots: %zu streams filled\n", i + 1);
      }
    }
  }

  // Every shape_.refresh, every held bucket reported again (so that none is abandoned).
  void Refresh() {
    absl::Time next = absl::Now() + shape_.refresh;
    while (!stop_) {
      if (absl::Now() < next) {
        absl::SleepFor(absl::Milliseconds(100));
        continue;
      }
      next = absl::Now() + shape_.refresh;
      std::vector<Held> snapshot;
      {
        absl::MutexLock lock(&mu_);
        snapshot = held_;
      }
      for (const Held& held : snapshot) {
        if (stop_) {
          break;
        }
        if (held.lost) {
          continue;
        }
        // A stream replaced meanwhile is closed: the reports to it fail, harmlessly.
        (void)ReportRange(shape_, held.id, 0, held.buckets,
                          [&](const Reports& r) { return held.stream->Send(r); });
      }
    }
  }

  Channels& channels_;
  const Shape shape_;
  Outcomes& outcomes_;
  std::atomic<bool> stop_{false};
  absl::Mutex mu_;
  std::vector<std::unique_ptr<ReadingStream>> streams_ ABSL_GUARDED_BY(mu_);  // every one opened
  std::vector<Held> held_ ABSL_GUARDED_BY(mu_);
};

int Main() {
  const std::string attack = absl::GetFlag(FLAGS_attack);
  struct Preset {
    const char* name;
    int64_t streams;
    int64_t buckets;
    int pairs;
    int key_bytes;
    int value_bytes;
    int64_t chunk;
    absl::Duration refresh;
    double seconds;
    bool await_answers;
  };
  const Preset kPresets[] = {
      {"nonreading", 2, 180, 32, 1024, 1024, 4, absl::Seconds(1), 45, false},
      {"large_ids", 1, 5000, 32, 1024, 1024, 4, absl::Seconds(10), 45, true},
      {"many_buckets", 100, 10000, 1, 0, 0, 1000, absl::Seconds(10), 45, true},
      {"hold_slots", 0, 10000, 1, 0, 0, 500, absl::Seconds(10), 150, true},
  };
  const Preset* preset = nullptr;
  for (const Preset& p : kPresets) {
    if (attack == p.name) {
      preset = &p;
    }
  }
  if (preset == nullptr) {
    std::fprintf(stderr,
                 "sluice-rlqs-attack: --attack=%s: nonreading, large_ids, many_buckets "
                 "or hold_slots\n",
                 attack.c_str());
    return 2;
  }
  const auto or_default = [](auto flag, auto fallback) { return flag > 0 ? flag : fallback; };
  Shape shape;
  shape.domain = absl::GetFlag(FLAGS_domain);
  shape.pairs = or_default(absl::GetFlag(FLAGS_pairs), preset->pairs);
  shape.key_bytes =
      absl::GetFlag(FLAGS_key_bytes) >= 0 ? absl::GetFlag(FLAGS_key_bytes) : preset->key_bytes;
  shape.value_bytes = absl::GetFlag(FLAGS_value_bytes) >= 0 ? absl::GetFlag(FLAGS_value_bytes)
                                                            : preset->value_bytes;
  shape.chunk = or_default(absl::GetFlag(FLAGS_chunk), preset->chunk);
  shape.refresh = absl::GetFlag(FLAGS_refresh) > absl::ZeroDuration() ? absl::GetFlag(FLAGS_refresh)
                                                                      : preset->refresh;
  const int64_t streams = or_default(absl::GetFlag(FLAGS_streams), preset->streams);
  const int64_t buckets = or_default(absl::GetFlag(FLAGS_buckets), preset->buckets);
  const double seconds = or_default(absl::GetFlag(FLAGS_seconds), preset->seconds);
  const int sources = absl::GetFlag(FLAGS_sources);
  if (sources < 0 || sources > 250) {
    std::fprintf(stderr, "sluice-rlqs-attack: --sources=%d: 0 to 250\n", sources);
    return 2;
  }

  Channels channels(absl::GetFlag(FLAGS_server), absl::GetFlag(FLAGS_streams_per_channel), sources);
  const bool await_answers = absl::GetFlag(FLAGS_await_answers) >= 0
                                 ? absl::GetFlag(FLAGS_await_answers) > 0
                                 : preset->await_answers;
  const absl::Time start = absl::Now();
  Outcomes outcomes(start);
  const absl::Time end = start + absl::Seconds(seconds);
  std::fprintf(stderr,
               "sluice-rlqs-attack: %s on %s: %lld streams x %lld buckets of %d pairs (keys %d, "
               "values %d bytes), %lld buckets a message%s, reported every %s, at most %.0f s\n",
               attack.c_str(), absl::GetFlag(FLAGS_server).c_str(), static_cast<long long>(streams),
               static_cast<long long>(buckets), shape.pairs, shape.key_bytes, shape.value_bytes,
               static_cast<long long>(BucketsPerMessage(shape)),
               attack == "nonreading" ? ", never reading"
               : await_answers        ? " each answered before the next"
                                      : " back to back",
               absl::FormatDuration(shape.refresh).c_str(), seconds);
  std::thread bind_check([sources] {
    // Every connection must leave from the source asked for, else the attacker is the real
    // client's peer (and the per-peer bounds mean something else): stop.
    absl::SleepFor(absl::Seconds(3));
    if (sources > 0 && sockets_bound == 0 && channels_made > 0) {
      std::fprintf(stderr,
                   "sluice-rlqs-attack: no socket was bound to 127.0.0.2: gRPC's socket "
                   "mutator differs from this program's declaration of it; use --sources=0\n");
      std::_Exit(1);
    }
  });
  bind_check.detach();
  if (attack == "nonreading") {
    RunNonReading(channels, shape, streams, buckets, end, outcomes);
  } else if (attack == "hold_slots") {
    SlotHolder(channels, shape, outcomes)
        .Run(absl::GetFlag(FLAGS_max_streams), buckets, absl::Seconds(absl::GetFlag(FLAGS_hold)),
             end);
  } else {
    RunReading(channels, shape, streams, buckets, await_answers, end, outcomes);
  }
  outcomes.Print(attack, absl::ToDoubleSeconds(absl::Now() - start), channels.count());
  return 0;
}

}  // namespace
}  // namespace sluice

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "sluice-rlqs-attack --server=HOST:PORT --attack=nonreading|large_ids|many_buckets|"
      "hold_slots [--streams=N] [--buckets=N] [--seconds=S] [--sources=N]\n"
      "Runs one of issue 47's attacks on an RLQS server and says what the server did.");
  absl::ParseCommandLine(argc, argv);
  return sluice::Main();
}
