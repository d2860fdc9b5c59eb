// Fuzzes MetaReplyReader (server/memcached/meta_protocol.h), the parser every byte a memcached
// server, or anyone on the path to it, sends goes through: any bytes as a stream of meta-protocol
// replies, fed in pieces cut where the input says. It must never crash or leak; no allocation may
// pass the malloc limit scripts/fuzz gives it (64 MB: a value's announced size allocates
// nothing); it reads the same replies, and ends the same way (a protocol error or not), however
// the stream is cut; once it has failed it stays failed, with the same error, whatever comes
// after; every reply is one the header promises (a number only from a value memcached could have
// written, an error line only on an error reply), each took at least a four-byte line; and no
// text it hands out names a byte of the stream raw.
//
// Input: byte 0: how many cuts (0 to 15); then two bytes per cut, its offset in the stream
// (little-endian, modulo the stream's length); the rest is the stream.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "server/common/log_text.h"
#include "server/memcached/meta_protocol.h"

namespace {

using sluice::MetaReply;
using sluice::MetaReplyReader;

void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "memcached_reply_fuzz: %s: %s\n", what, detail.c_str());
  std::abort();
}

bool SameReply(const MetaReply& a, const MetaReply& b) {
  return a.kind == b.kind && a.value == b.value && a.numeric == b.numeric && a.error == b.error &&
         a.ttl_seconds == b.ttl_seconds;
}

struct Outcome {
  std::vector<MetaReply> replies;
  bool failed = false;
  std::string error;
};

// Feeds `stream` cut at `cuts` (ascending offsets), taking every reply after each piece.
Outcome Read(const std::string& stream, const std::vector<size_t>& cuts) {
  MetaReplyReader reader;
  Outcome outcome;
  size_t at = 0;
  for (size_t k = 0; k <= cuts.size() && !outcome.failed; ++k) {
    const size_t end = k < cuts.size() ? cuts[k] : stream.size();
    reader.Feed(stream.data() + at, end - at);
    at = end;
    for (;;) {
      MetaReply reply;
      const MetaReplyReader::Result result = reader.Next(&reply);
      if (result == MetaReplyReader::Result::kReply) {
        outcome.replies.push_back(std::move(reply));
        continue;
      }
      if (result == MetaReplyReader::Result::kError) {
        outcome.failed = true;
        outcome.error = reader.error();
        if (outcome.error.empty()) {
          Fail("kError with no error text", "");
        }
      } else if (reader.Next(&reply) != MetaReplyReader::Result::kNone) {
        Fail("kNone, then something with no byte fed between", "");
      }
      break;
    }
  }
  if (outcome.failed) {
    // The connection is gone: whatever else arrives, the reader only repeats its error.
    MetaReply reply;
    reader.Feed(stream.data() + at, stream.size() - at);
    reader.Feed("HD\r\n", 4);
    for (int k = 0; k < 2; ++k) {
      if (reader.Next(&reply) != MetaReplyReader::Result::kError ||
          reader.error() != outcome.error) {
        Fail("an error that did not stay", sluice::LogText(outcome.error));
      }
    }
  }
  return outcome;
}

void CheckPrintable(const char* what, const std::string& text) {
  for (char c : text) {
    if (c < ' ' || c > '~') {
      Fail(what, sluice::LogText(text));
    }
  }
}

// What each kind of reply may carry (MetaReply's comments).
void CheckReply(const MetaReply& reply) {
  // LogText's cut: 256 input bytes, each at most 4 when escaped, and "...(N bytes)".
  constexpr size_t kMaxErrorBytes = 4 * sluice::kLogTextMaxBytes + 32;
  switch (reply.kind) {
    case MetaReply::Kind::kValue:
      if (!reply.numeric && reply.value != 0) {
        Fail("a value that is no number, yet not 0", std::to_string(reply.value));
      }
      if (!reply.error.empty()) {
        Fail("a value with an error line", sluice::LogText(reply.error));
      }
      break;
    case MetaReply::Kind::kNotFound:
    case MetaReply::Kind::kOther:
      if (reply.numeric || reply.value != 0 || !reply.error.empty() ||
          reply.ttl_seconds.has_value()) {
        Fail("a reply with no value that holds one", sluice::LogText(reply.error));
      }
      break;
    case MetaReply::Kind::kError:
      if (reply.error.empty() || reply.error.size() > kMaxErrorBytes) {
        Fail("an error reply's line empty or past its cut", sluice::LogText(reply.error));
      }
      CheckPrintable("an error reply with a byte that is not printable", reply.error);
      if (reply.numeric || reply.value != 0) {
        Fail("an error reply with a value", sluice::LogText(reply.error));
      }
      break;
    default:
      Fail("a reply of no kind", std::to_string(static_cast<int>(reply.kind)));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  size_t pos = 0;
  const size_t cut_count = size > pos ? data[pos++] % 16 : 0;
  std::vector<size_t> offsets;
  for (size_t k = 0; k < cut_count && pos + 2 <= size; ++k, pos += 2) {
    offsets.push_back(static_cast<size_t>(data[pos]) | static_cast<size_t>(data[pos + 1]) << 8);
  }
  const std::string stream(reinterpret_cast<const char*>(data) + pos, size - pos);
  std::vector<size_t> cuts;
  for (size_t offset : offsets) {
    cuts.push_back(offset % (stream.size() + 1));
  }
  std::sort(cuts.begin(), cuts.end());

  const Outcome whole = Read(stream, {});
  const Outcome cut = Read(stream, cuts);
  const bool same_replies =
      whole.replies.size() == cut.replies.size() &&
      std::equal(whole.replies.begin(), whole.replies.end(), cut.replies.begin(), SameReply);
  if (whole.failed != cut.failed || whole.error != cut.error || !same_replies) {
    auto describe = [](const Outcome& o) {
      return std::to_string(o.replies.size()) + " replies" + (o.failed ? ", failed: " : "") +
             o.error;
    };
    Fail("cut and whole streams read differently", describe(whole) + " vs " + describe(cut));
  }
  CheckPrintable("an error with a byte that is not printable", whole.error);
  // The shortest reply is a code of two letters and CRLF.
  if (whole.replies.size() > stream.size() / 4) {
    Fail("more replies than the stream holds lines", std::to_string(whole.replies.size()));
  }
  for (const MetaReply& reply : whole.replies) {
    CheckReply(reply);
  }
  return 0;
}
