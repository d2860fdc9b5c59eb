// Fuzzes the quota service (server/quota/quota_server.h), which any gRPC client can reach: the
// input is a script of operations on a QuotaServer with small bounds, against the config of
// request_fuzz_common.h. Each operation is one byte, then its operands:
//   0 <peer>: open a stream from peer address `peer % 3`, whose client reads its responses when
//     `peer` is even and never reads them when odd (they pile up in a ResponseQueue, as in the
//     stream service: past its cap the stream is ended);
//   1 <stream> <len hi> <len lo> <len bytes>: a serialized RateLimitQuotaUsageReports on stream
//     `stream % open streams` (bytes that do not parse are skipped);
//   2 <tenths>: advance the clock and rebalance (Tick);   3 <stream>: close it;
//   4 <stream> <pairs> <bytes hi> <n>: a report of one bucket with `pairs % 40` pairs of keys and
//     values of `(bytes hi * 8) % 1100` bytes, named by `n` (huge ids);
//   5 <stream> <8 bytes>: a report of one bucket whose time_elapsed seconds are the 8 bytes as
//     an int64 (absurd durations, negative ones included), nanos from their low bits.
// Invariants: nothing crashes or hangs; every response names at least one bucket, every bucket
// named has a pair, every action is an abandon or an assignment with a strategy Envoy applies
// (a token bucket with at least one token, one token per fill, a fill interval of at least a
// second and nanos of 0 or 1, a TTL of whole seconds above 0); a stream whose report is refused
// gets a status with a message; the bounds hold (streams in all and per peer, buckets per stream,
// subscriptions, bytes in all; a non-reading stream's waiting responses within their cap); and
// once every stream is closed, nothing is held.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fuzz/request_fuzz_common.h"
#include "server/quota/quota_server.h"
#include "server/quota/response_queue.h"

namespace sluice {
namespace {

using quota::QuotaResponse;
using quota::QuotaServer;

constexpr size_t kMaxPendingBytes = 8 << 10;

void CheckResponse(const QuotaResponse& response) {
  if (response.bucket_action_size() == 0) {
    fuzz::Fail("a response without a bucket action");
  }
  for (const auto& action : response.bucket_action()) {
    if (action.bucket_id().bucket().empty()) {
      fuzz::Fail("a bucket action without a bucket");
    }
    if (action.has_abandon_action()) {
      continue;
    }
    if (!action.has_quota_assignment_action()) {
      fuzz::Fail("a bucket action with no action");
    }
    const auto& assignment = action.quota_assignment_action();
    if (assignment.assignment_time_to_live().seconds() < 1 ||
        assignment.assignment_time_to_live().nanos() != 0) {
      fuzz::Fail("a TTL Envoy would expire at once, or one with nanos it ignores");
    }
    const auto& strategy = assignment.rate_limit_strategy();
    if (!strategy.has_token_bucket() && !strategy.has_blanket_rule()) {
      fuzz::Fail("an assignment Envoy skips (no strategy, or requests_per_time_unit)");
    }
    if (strategy.has_token_bucket()) {
      const auto& b = strategy.token_bucket();
      if (b.max_tokens() < 1 || b.tokens_per_fill().value() < 1 ||
          b.fill_interval().seconds() < 1 || b.fill_interval().nanos() > 1 ||
          b.fill_interval().nanos() < 0) {
        fuzz::Fail("a token bucket Envoy would refuse or misread");
      }
    }
  }
}

struct Stream {
  QuotaServer::StreamId id = 0;
  // What a non-reading client's responses pile up in; null for a reading client.
  std::shared_ptr<quota::ResponseQueue> unread;
  std::shared_ptr<bool> overflowed = std::make_shared<bool>(false);
};

quota::QuotaOptions Options() {
  quota::QuotaOptions options;
  options.max_streams = 6;
  options.max_streams_per_peer = 3;
  options.max_buckets_per_stream = 16;
  options.max_subscriptions = 40;
  options.max_stream_bytes = 256 << 10;
  options.max_peer_bytes = 512 << 10;
  options.max_bytes = 1 << 20;
  return options;
}

struct World {
  World() : store(fuzz::LoadRequestConfig()), server(store, Options()) {}
  ConfigStore store;
  QuotaServer server;
};

quota::Reports OneBucket(int pairs, size_t bytes, int n) {
  quota::Reports reports;
  reports.set_domain("fuzz");
  auto* usage = reports.add_bucket_quota_usages();
  for (int p = 0; p < pairs; ++p) {
    (*usage->mutable_bucket_id()->mutable_bucket())[absl::StrCat(p, std::string(bytes, 'k'))] =
        absl::StrCat(n, std::string(bytes, 'v'));
  }
  usage->set_num_requests_allowed(static_cast<uint64_t>(n));
  return reports;
}

}  // namespace
}  // namespace sluice

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sluice;
  World world;  // fresh per input: the script is the state
  std::vector<Stream> open;
  int64_t now_us = 1'000'000'000;
  size_t at = 0;
  const auto next = [&]() -> int { return at < size ? data[at++] : -1; };
  const bool trace = std::getenv("RLQS_FUZZ_TRACE") != nullptr;
  const auto report = [&](size_t index, const quota::Reports& reports) {
    if (trace) {
      std::fprintf(stderr, "report on %zu: %s\n", index, reports.ShortDebugString().c_str());
    }
    const absl::Status status = world.server.Report(open[index].id, reports, now_us);
    if (trace) {
      std::fprintf(stderr, "  -> %s\n", status.ToString().c_str());
    }
    if (!status.ok() || *open[index].overflowed) {
      if (!status.ok() && status.message().empty()) {
        fuzz::Fail("a refusal without a message");
      }
      world.server.Close(open[index].id);
      open.erase(open.begin() + static_cast<std::ptrdiff_t>(index));
    }
  };
  while (at < size) {
    switch (next() % 6) {
      case 0: {
        const int peer = next();
        if (peer < 0) {
          break;
        }
        Stream stream;
        if (peer % 2 == 1) {
          stream.unread = std::make_shared<quota::ResponseQueue>(kMaxPendingBytes);
        }
        auto id = world.server.Open(
            [unread = stream.unread, overflowed = stream.overflowed](QuotaResponse r) {
              CheckResponse(r);
              if (unread != nullptr && !unread->Add(std::move(r))) {
                *overflowed = true;  // the stream service cancels such a stream
              }
            },
            absl::StrCat("ipv4:10.0.0.", peer % 3));
        if (id.ok()) {
          stream.id = *id;
          open.push_back(std::move(stream));
        } else if (open.size() < 3) {
          fuzz::Fail("a stream refused under both stream bounds");
        }
        break;
      }
      case 1: {
        const int which = next();
        const int hi = next();
        const int lo = next();
        if (which < 0 || hi < 0 || lo < 0) {
          break;
        }
        const size_t len = std::min(size - at, static_cast<size_t>(hi * 256 + lo));
        quota::Reports reports;
        const bool parsed = reports.ParseFromArray(data + at, static_cast<int>(len));
        at += len;
        if (parsed && !open.empty()) {
          report(static_cast<size_t>(which) % open.size(), reports);
        }
        break;
      }
      case 2: {
        const int tenths = next();
        now_us += (tenths < 0 ? 0 : tenths) * 100'000;
        world.server.Tick(now_us);
        break;
      }
      case 3: {
        const int which = next();
        if (which >= 0 && !open.empty()) {
          const size_t index = static_cast<size_t>(which) % open.size();
          world.server.Close(open[index].id);
          open.erase(open.begin() + static_cast<std::ptrdiff_t>(index));
        }
        break;
      }
      case 4: {
        const int which = next();
        const int pairs = next();
        const int bytes = next();
        const int n = next();
        if (n >= 0 && !open.empty()) {
          report(static_cast<size_t>(which) % open.size(),
                 OneBucket(pairs % 40, static_cast<size_t>(bytes * 8) % 1100, n));
        }
        break;
      }
      default: {
        const int which = next();
        if (which < 0 || size - at < 8 || open.empty()) {
          at = size;
          break;
        }
        int64_t seconds;
        std::memcpy(&seconds, data + at, sizeof seconds);
        at += 8;
        quota::Reports reports = OneBucket(1, 1, which);
        auto* elapsed = reports.mutable_bucket_quota_usages(0)->mutable_time_elapsed();
        elapsed->set_seconds(seconds);
        elapsed->set_nanos(static_cast<int32_t>(seconds % 2'000'000'000));
        report(static_cast<size_t>(which) % open.size(), reports);
        break;
      }
    }
    const QuotaServer::Usage usage = world.server.TotalUsage();
    if (usage.streams > 6 || usage.subscriptions > 40 || usage.bytes > (1 << 20)) {
      fuzz::Fail("a bound passed");
    }
    for (const Stream& stream : open) {
      if (stream.unread != nullptr && stream.unread->bytes() > kMaxPendingBytes) {
        fuzz::Fail("a non-reading stream's responses passed their cap");
      }
    }
  }
  for (const Stream& stream : open) {
    world.server.Close(stream.id);
  }
  const QuotaServer::Usage usage = world.server.TotalUsage();
  if (usage.bytes != 0 || usage.buckets != 0 || usage.subscriptions != 0 || usage.peers != 0) {
    fuzz::Fail("state held after every stream closed");
  }
  return 0;
}
