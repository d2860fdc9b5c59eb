// New trace and span ids: random, never all zeros. An interface so that tests can make ids
// they know.
//
// Thread-safety: implementations are safe for concurrent use.
#pragma once

#include <string>

#include "server/trace/span.h"

namespace sluice {

class IdGenerator {
 public:
  virtual ~IdGenerator() = default;
  virtual TraceId NewTraceId() = 0;
  virtual SpanId NewSpanId() = 0;
};

// A random (version 4) UUID in its text form, e.g. a replica's service.instance.id when none is
// given.
std::string RandomUuid();

// Random ids from a per-thread generator seeded from the system's entropy.
class RandomIdGenerator final : public IdGenerator {
 public:
  TraceId NewTraceId() override;
  SpanId NewSpanId() override;
};

}  // namespace sluice
