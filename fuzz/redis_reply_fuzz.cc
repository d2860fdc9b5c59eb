// Fuzzes RedisReplyReader (server/redis/reply.h), the parser every byte a Redis, a sentinel or
// anyone on the path to them sends goes through: any bytes as a reply stream, fed in pieces cut
// where the input says. It must never crash or leak; no allocation may pass the malloc limit
// scripts/fuzz gives it (64 MB: an announced count or length allocates nothing); it reads the
// same replies, and ends the same way (a protocol error or not), however the stream is cut;
// every reply it hands out keeps within its limits; and an error names no byte of the stream
// raw (hiredis' and ours are printable text).
//
// Input: byte 0, bit 0: the small limits below instead of the defaults (so that a short input
// reaches each of them); byte 1: how many cuts (0 to 15); then two bytes per cut, its offset in
// the stream (little-endian, modulo the stream's length); the rest is the stream.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "server/common/log_text.h"
#include "server/redis/reply.h"

namespace {

using sluice::RedisReply;
using sluice::RedisReplyLimits;
using sluice::RedisReplyReader;

void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "redis_reply_fuzz: %s: %s\n", what, detail.c_str());
  std::abort();
}

RedisReplyLimits SmallLimits() {
  RedisReplyLimits limits;
  limits.max_array_elements = 8;
  limits.max_reply_elements = 32;
  limits.max_nesting = 3;
  limits.max_string_bytes = 64;
  limits.max_reply_bytes = 256;
  return limits;
}

struct Outcome {
  std::vector<RedisReply> replies;
  bool failed = false;
  std::string error;
};

// Feeds `stream` cut at `cuts` (ascending offsets), taking every reply after each piece.
Outcome Read(const std::string& stream, const std::vector<size_t>& cuts,
             const RedisReplyLimits& limits) {
  RedisReplyReader reader(limits);
  Outcome outcome;
  size_t at = 0;
  for (size_t k = 0; k <= cuts.size() && !outcome.failed; ++k) {
    const size_t end = k < cuts.size() ? cuts[k] : stream.size();
    if (!reader.Feed(stream.data() + at, end - at)) {
      Fail("Feed failed", "out of memory");
    }
    at = end;
    for (;;) {
      const RedisReplyReader::Result result = reader.Next();
      if (result == RedisReplyReader::Result::kReply) {
        outcome.replies.push_back(std::move(*reader.reply()));
        continue;
      }
      if (result == RedisReplyReader::Result::kError) {
        outcome.failed = true;
        outcome.error = reader.error();
      }
      break;
    }
  }
  return outcome;
}

// Checks `reply` keeps within `limits`: returns its values inside arrays and its string bytes.
void CheckWithin(const RedisReply& reply, const RedisReplyLimits& limits, int depth,
                 size_t* values, size_t* bytes) {
  *bytes += reply.str().size();
  if (reply.str().size() > limits.max_string_bytes) {
    Fail("a string past max_string_bytes", reply.LogString());
  }
  if (!reply.is_array()) {
    return;
  }
  if (depth > limits.max_nesting) {
    Fail("arrays nested past max_nesting", reply.LogString());
  }
  const std::vector<RedisReply>& elements = reply.elements();
  if (elements.size() > limits.max_array_elements) {
    Fail("an array past max_array_elements", reply.LogString());
  }
  // Grown as elements arrived: never sized from a count beyond what it holds.
  if (elements.capacity() > 16 && elements.capacity() > 2 * elements.size()) {
    Fail("an array with room for more than it holds", reply.LogString());
  }
  *values += elements.size();
  for (const RedisReply& element : elements) {
    CheckWithin(element, limits, depth + 1, values, bytes);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  size_t pos = 0;
  const bool small = size > pos && (data[pos++] & 1) != 0;
  const size_t cut_count = size > pos ? data[pos++] % 16 : 0;
  std::vector<size_t> offsets;
  for (size_t k = 0; k < cut_count && pos + 2 <= size; ++k, pos += 2) {
    offsets.push_back(static_cast<size_t>(data[pos]) | static_cast<size_t>(data[pos + 1]) << 8);
  }
  const std::string stream(reinterpret_cast<const char*>(data) + pos, size - pos);
  std::vector<size_t> cuts;
  for (size_t offset : offsets) {
    cuts.push_back(stream.empty() ? 0 : offset % (stream.size() + 1));
  }
  std::sort(cuts.begin(), cuts.end());
  const RedisReplyLimits limits = small ? SmallLimits() : RedisReplyLimits{};

  const Outcome whole = Read(stream, {}, limits);
  const Outcome cut = Read(stream, cuts, limits);
  if (whole.failed != cut.failed || whole.replies != cut.replies) {
    auto describe = [](const Outcome& o) {
      return std::to_string(o.replies.size()) + " replies" + (o.failed ? ", failed: " : "") +
             o.error;
    };
    Fail("cut and whole streams read differently", describe(whole) + " vs " + describe(cut));
  }
  for (const Outcome* outcome : {&whole, &cut}) {
    for (char c : outcome->error) {
      if (c < ' ' || c > '~') {
        Fail("an error with a byte that is not printable", sluice::LogText(outcome->error));
      }
    }
    for (const RedisReply& reply : outcome->replies) {
      size_t values = 0;
      size_t bytes = 0;
      CheckWithin(reply, limits, 1, &values, &bytes);
      if (values > limits.max_reply_elements) {
        Fail("a reply past max_reply_elements", reply.LogString());
      }
      if (bytes > limits.max_reply_bytes) {
        Fail("a reply past max_reply_bytes", reply.LogString());
      }
      (void)reply.DebugString();
    }
  }
  return 0;
}
