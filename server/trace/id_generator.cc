#include "server/trace/id_generator.h"

#include <cstring>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"

namespace sluice {
namespace {

// One generator per thread: ids are made on gRPC and Redis I/O threads at once.
absl::InsecureBitGen& ThreadGenerator() {
  thread_local absl::InsecureBitGen generator;
  return generator;
}

template <typename Id>
Id NewId() {
  Id id{};
  absl::InsecureBitGen& generator = ThreadGenerator();
  do {
    for (size_t i = 0; i < id.size(); i += 8) {
      const uint64_t word = generator();
      std::memcpy(id.data() + i, &word, 8);
    }
  } while (!IsValid(id));
  return id;
}

}  // namespace

std::string RandomUuid() {
  TraceId bytes = NewId<TraceId>();
  bytes[6] = static_cast<uint8_t>((bytes[6] & 0x0F) | 0x40);  // version 4
  bytes[8] = static_cast<uint8_t>((bytes[8] & 0x3F) | 0x80);  // RFC 4122 variant
  const std::string hex = ToHex(bytes);
  return absl::StrCat(hex.substr(0, 8), "-", hex.substr(8, 4), "-", hex.substr(12, 4), "-",
                      hex.substr(16, 4), "-", hex.substr(20));
}

TraceId RandomIdGenerator::NewTraceId() { return NewId<TraceId>(); }
SpanId RandomIdGenerator::NewSpanId() { return NewId<SpanId>(); }

}  // namespace sluice
