// A snapshot of a Redis Cluster's topology: which master serves each of the 16384 hash slots,
// and which replicas each master has. Built from the cluster's own CLUSTER SLOTS reply (or from
// ranges, in tests), validated as a whole: a reply with overlapping or out-of-range slot ranges,
// or with malformed entries, is rejected with a message that names the offending ranges, so a
// confused node never half-updates routing. Slots no range covers are allowed (a cluster with
// a failed, unreplaced master): NodeForSlot answers -1 for them.
//
// Immutable after construction and so safe to read from any thread without a lock; the cluster
// client publishes each new snapshot through a SnapshotPublisher, and a MOVED patch is a new
// snapshot (WithSlotOwner), never an edit.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/redis/cluster/hash_slot.h"
#include "server/redis/reply.h"

namespace sluice {

// Slots [first, last] (inclusive, as CLUSTER SLOTS reports them) served by `master`.
struct SlotRange {
  int first = 0;
  int last = 0;
  std::string master{};                 // "host:port"
  std::vector<std::string> replicas{};  // "host:port" each
};

class SlotMap {
 public:
  // A master and its replicas. A master appears once however many ranges it serves.
  struct Node {
    std::string address{};
    std::vector<std::string> replicas{};
  };

  // No node, no slot covered.
  SlotMap();

  // Validates `ranges` and builds the map. kInvalidArgument if a range is empty or reversed,
  // leaves [0, 16383], names no master, or overlaps another range.
  static absl::StatusOr<SlotMap> FromRanges(const std::vector<SlotRange>& ranges);

  // Parses a CLUSTER SLOTS reply (RESP2, Redis 3 to 7 formats: each entry is
  // [first, last, [host, port, id?, ...], replica...]). A node whose host is empty lives on the
  // host the reply came from, `replying_host`; a replica whose host is "?" (unknown endpoint) is
  // left out. kInvalidArgument if the reply is not such an array, or as FromRanges.
  static absl::StatusOr<SlotMap> FromClusterSlots(const RedisReply& reply,
                                                  std::string_view replying_host);

  // The index in nodes() of the master serving `slot`, or -1 if no one does.
  // REQUIRES: 0 <= slot < kClusterSlots.
  int NodeForSlot(int slot) const { return owner_[static_cast<size_t>(slot)]; }

  // The masters, each serving at least one slot, in order of their first slot.
  const std::vector<Node>& nodes() const { return nodes_; }

  // The index of the master at `address`, or -1.
  int FindNode(std::string_view address) const;

  // How many slots have a master.
  int covered_slots() const { return covered_slots_; }

  // This map with `slot` moved to the master at `address` (added as a node if new): what a
  // MOVED reply says, applied before the full refresh it triggers. A master left without slots
  // stays in nodes() until the next full map. REQUIRES: 0 <= slot < kClusterSlots.
  SlotMap WithSlotOwner(int slot, std::string_view address) const;

  // The map as maximal ranges of consecutive slots with the same master, in slot order.
  std::vector<SlotRange> Ranges() const;

  // E.g. "0-5460 127.0.0.1:7000 (replicas 127.0.0.1:7004); 5461-10922 ...; uncovered: 3".
  std::string DebugString() const;

  friend bool operator==(const SlotMap& a, const SlotMap& b);
  friend bool operator!=(const SlotMap& a, const SlotMap& b) { return !(a == b); }

 private:
  std::vector<Node> nodes_;
  // owner_[slot]: index into nodes_, -1 if uncovered. int16_t: 32 KiB per snapshot.
  std::vector<int16_t> owner_;
  int covered_slots_ = 0;
};

}  // namespace sluice
