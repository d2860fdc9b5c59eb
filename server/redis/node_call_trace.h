// The span of one call to one Redis node: a batch of commands written back-to-back on one
// connection and answered together (a pipelined call), from Execute to its replies or its
// failure. A traced decision gets one such span for each node call that carries its commands:
// on a cluster, one per node its keys live on, and one more per redirection or retry.
//
// Thread-safe: the wrapper runs wherever the batch's callback runs.
#pragma once

#include <cstddef>
#include <string_view>

#include "server/redis/command_batch.h"

namespace sluice {

// Keys the i-th command of `batch` names: an EVALSHA's (or EVAL's) numkeys, 1 for another
// command with a routing key, else 0. REQUIRES: i < batch.size().
size_t CommandKeys(const CommandBatch& batch, size_t i);

// `done`, wrapped so that when it runs, each trace of `batch` gets a client span "redis" of
// `node` (HOST:PORT or unix:PATH) from now until then: the number of commands and of keys,
// error replies, and the failure's message and reason. REQUIRES: !batch.traces().empty().
BatchCallback TraceNodeCall(const CommandBatch& batch, std::string_view node, BatchCallback done);

}  // namespace sluice
