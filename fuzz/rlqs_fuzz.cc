// Fuzzes the quota service (server/quota/quota_server.h), which any gRPC client can reach: the
// input is a script of operations on a QuotaServer with small bounds, against the config of
// request_fuzz_common.h. Each operation is one byte, then its operands:
//   0 open a stream;   1 <stream> <len hi> <len lo> <len bytes>: a serialized
//   RateLimitQuotaUsageReports on stream `stream % open streams` (bytes that do not parse are
//   skipped);   2 <tenths>: advance the clock and rebalance (Tick);   3 <stream>: close it;
//   4: expire everything (shutdown).
// Invariants: nothing crashes or hangs; every response names at least one bucket, every bucket
// named has a pair, every token bucket has at least one token, one token per fill and a fill
// interval of at least a second; a stream whose report is refused gets a status with a message;
// the bounds hold (streams, buckets per stream, subscriptions in all).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "fuzz/request_fuzz_common.h"
#include "server/quota/quota_server.h"

namespace sluice {
namespace {

using quota::QuotaResponse;
using quota::QuotaServer;

void CheckResponse(const QuotaResponse& response) {
  if (response.bucket_action_size() == 0) {
    fuzz::Fail("a response without a bucket action");
  }
  for (const auto& action : response.bucket_action()) {
    if (action.bucket_id().bucket().empty()) {
      fuzz::Fail("a bucket action without a bucket");
    }
    if (!action.has_quota_assignment_action() && !action.has_abandon_action()) {
      fuzz::Fail("a bucket action with no action");
    }
    const auto& strategy = action.quota_assignment_action().rate_limit_strategy();
    if (strategy.has_token_bucket()) {
      const auto& b = strategy.token_bucket();
      if (b.max_tokens() < 1 || b.tokens_per_fill().value() < 1 || b.fill_interval().seconds() < 1 ||
          b.fill_interval().nanos() != 0) {
        fuzz::Fail("a token bucket Envoy would refuse");
      }
    }
  }
}

struct World {
  World() : store(fuzz::LoadRequestConfig()), server(store, Options()) {}

  static quota::QuotaOptions Options() {
    quota::QuotaOptions options;
    options.max_streams = 4;
    options.max_buckets_per_stream = 16;
    options.max_subscriptions = 32;
    return options;
  }

  ConfigStore store;
  QuotaServer server;
};

}  // namespace
}  // namespace sluice

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sluice;
  World world;  // fresh per input: the script is the state
  std::vector<QuotaServer::StreamId> open;
  int64_t now_us = 1'000'000'000;
  size_t at = 0;
  const auto next = [&]() -> int { return at < size ? data[at++] : -1; };
  while (at < size) {
    switch (next() % 5) {
      case 0: {
        auto id = world.server.Open([](QuotaResponse r) { CheckResponse(r); });
        if (id.ok()) {
          open.push_back(*id);
        } else if (open.size() < 4) {
          fuzz::Fail("a stream refused under the bound");
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
        if (!parsed || open.empty()) {
          break;
        }
        const size_t index = static_cast<size_t>(which) % open.size();
        if (std::getenv("RLQS_FUZZ_TRACE") != nullptr) {
          std::fprintf(stderr, "report on %zu: %s\n", index, reports.ShortDebugString().c_str());
        }
        const absl::Status status = world.server.Report(open[index], reports, now_us);
        if (std::getenv("RLQS_FUZZ_TRACE") != nullptr) {
          std::fprintf(stderr, "  -> %s\n", status.ToString().c_str());
        }
        if (!status.ok()) {
          if (status.message().empty()) {
            fuzz::Fail("a refusal without a message");
          }
          world.server.Close(open[index]);
          open.erase(open.begin() + static_cast<std::ptrdiff_t>(index));
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
          world.server.Close(open[index]);
          open.erase(open.begin() + static_cast<std::ptrdiff_t>(index));
        }
        break;
      }
      default:
        world.server.ExpireAll();
        break;
    }
    const QuotaServer::Usage usage = world.server.TotalUsage();
    if (usage.streams > 4 || usage.subscriptions > 32) {
      fuzz::Fail("a bound passed");
    }
  }
  return 0;
}
