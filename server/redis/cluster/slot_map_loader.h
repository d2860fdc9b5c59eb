// Fetches a Redis Cluster's slot map from one node: a short-lived blocking connection (TCP
// connect, the TLS handshake when asked, AUTH, CLUSTER SLOTS, close), each step bounded by a
// timeout. It is meant for the
// cluster client's topology thread, which may block; never call it on an I/O or request thread.
// Using its own connection keeps topology refresh independent of the state of the data-path
// connections it is often called to repair.
//
// Thread-safe: Load may be called concurrently; the loader holds only its options.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/redis/address.h"
#include "server/redis/cluster/slot_map.h"
#include "server/redis/tls_context.h"

namespace sluice {

struct SlotMapLoaderOptions {
  // AUTH: `password` alone for requirepass, `username` and `password` for an ACL user.
  std::string username{};
  std::string password{};
  // Bounds the connect and each command's reply separately.
  absl::Duration timeout = absl::Seconds(1);
  // TLS to the node when set. Over TLS a node names its peers' TLS ports in CLUSTER SLOTS.
  std::shared_ptr<TlsClientContext> tls{};
};

class SlotMapLoader {
 public:
  explicit SlotMapLoader(SlotMapLoaderOptions options) : options_(std::move(options)) {}

  // Asks the node at `address` ("host:port" or "[v6]:port") for CLUSTER SLOTS and parses it.
  // kUnavailable if the node cannot be reached or times out; kFailedPrecondition if it answers
  // with an error (e.g. cluster support disabled, or AUTH refused); kInvalidArgument if the reply
  // is malformed or does not validate (see SlotMap::FromClusterSlots). Blocks.
  absl::StatusOr<SlotMap> Load(const std::string& address) const;

 private:
  const SlotMapLoaderOptions options_;
};


}  // namespace sluice
