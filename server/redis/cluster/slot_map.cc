#include "server/redis/cluster/slot_map.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/redis/address.h"
#include "server/redis/cluster/cluster_error.h"

namespace sluice {
namespace {

std::string RangeText(const SlotRange& range) {
  return absl::StrCat(range.first, "-", range.last, " (", range.master, ")");
}

// Parses one [host, port, ...] node entry of CLUSTER SLOTS into "host:port"; an empty string
// for a node whose endpoint Redis does not know ("?").
absl::StatusOr<std::string> ParseNode(const RedisReply& node, std::string_view replying_host,
                                      int entry) {
  if (!node.is_array() || node.elements().size() < 2 || !node.elements()[0].is_string() ||
      !node.elements()[1].is_integer()) {
    return absl::InvalidArgumentError(absl::StrCat("CLUSTER SLOTS entry ", entry,
                                                   ": a node is not [host, port, ...] but ",
                                                   node.LogString()));
  }
  std::string_view host = node.elements()[0].str();
  int64_t port = node.elements()[1].integer();
  if (port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("CLUSTER SLOTS entry ", entry, ": node port ", port, " is out of range"));
  }
  if (host == "?") {
    return std::string();
  }
  if (host.empty()) {
    host = replying_host;
  } else if (!IsPlausibleHost(host)) {
    return absl::InvalidArgumentError(absl::StrCat("CLUSTER SLOTS entry ", entry,
                                                   ": a node host that is not a host name: ",
                                                   node.elements()[0].LogString(64)));
  }
  return JoinHostPort(host, static_cast<int>(port));
}

}  // namespace

SlotMap::SlotMap() : owner_(kClusterSlots, -1) {}

absl::StatusOr<SlotMap> SlotMap::FromRanges(const std::vector<SlotRange>& ranges) {
  std::vector<const SlotRange*> sorted;
  sorted.reserve(ranges.size());
  for (const SlotRange& range : ranges) {
    if (range.first < 0 || range.last >= kClusterSlots || range.first > range.last) {
      return absl::InvalidArgumentError(absl::StrCat("slot range ", RangeText(range),
                                                     " is not within 0-", kClusterSlots - 1,
                                                     " with first <= last"));
    }
    if (range.master.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("slot range ", range.first, "-", range.last, " names no master"));
    }
    sorted.push_back(&range);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const SlotRange* a, const SlotRange* b) { return a->first < b->first; });
  SlotMap map;
  for (size_t k = 0; k < sorted.size(); ++k) {
    const SlotRange& range = *sorted[k];
    if (k > 0 && sorted[k - 1]->last >= range.first) {
      return absl::InvalidArgumentError(absl::StrCat("slot range ", RangeText(*sorted[k - 1]),
                                                     " overlaps slot range ", RangeText(range)));
    }
    int index = map.FindNode(range.master);
    if (index < 0) {
      if (map.nodes_.size() >= static_cast<size_t>(std::numeric_limits<int16_t>::max())) {
        return absl::InvalidArgumentError("too many cluster masters");
      }
      index = static_cast<int>(map.nodes_.size());
      map.nodes_.push_back(Node{range.master, {}});
    }
    std::vector<std::string>& replicas = map.nodes_[static_cast<size_t>(index)].replicas;
    for (const std::string& replica : range.replicas) {
      if (std::find(replicas.begin(), replicas.end(), replica) == replicas.end()) {
        replicas.push_back(replica);
      }
    }
    std::fill(map.owner_.begin() + range.first, map.owner_.begin() + range.last + 1,
              static_cast<int16_t>(index));
    map.covered_slots_ += range.last - range.first + 1;
  }
  return map;
}

absl::StatusOr<SlotMap> SlotMap::FromClusterSlots(const RedisReply& reply,
                                                  std::string_view replying_host) {
  if (!reply.is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat("CLUSTER SLOTS reply is not an array: ", reply.LogString()));
  }
  std::vector<SlotRange> ranges;
  ranges.reserve(reply.elements().size());
  int entry = 0;
  for (const RedisReply& element : reply.elements()) {
    const std::vector<RedisReply>& fields = element.elements();
    if (!element.is_array() || fields.size() < 3 || !fields[0].is_integer() ||
        !fields[1].is_integer()) {
      return absl::InvalidArgumentError(
          absl::StrCat("CLUSTER SLOTS entry ", entry,
                       " is not [first, last, master, replica...]: ", element.LogString()));
    }
    int64_t first = fields[0].integer();
    int64_t last = fields[1].integer();
    absl::StatusOr<std::string> master = ParseNode(fields[2], replying_host, entry);
    if (!master.ok()) {
      return master.status();
    }
    if (first < 0 || last >= kClusterSlots || first > last) {
      return absl::InvalidArgumentError(absl::StrCat("CLUSTER SLOTS entry ", entry, ": range ",
                                                     first, "-", last, " is not within 0-",
                                                     kClusterSlots - 1, " with first <= last"));
    }
    SlotRange range;
    range.first = static_cast<int>(first);
    range.last = static_cast<int>(last);
    range.master = *std::move(master);
    for (size_t k = 3; k < fields.size(); ++k) {
      absl::StatusOr<std::string> replica = ParseNode(fields[k], replying_host, entry);
      if (!replica.ok()) {
        return replica.status();
      }
      if (!replica->empty()) {
        range.replicas.push_back(*std::move(replica));
      }
    }
    // A master nobody can reach leaves its slots uncovered rather than routed nowhere.
    if (!range.master.empty()) {
      ranges.push_back(std::move(range));
    }
    ++entry;
  }
  return FromRanges(ranges);
}

int SlotMap::FindNode(std::string_view address) const {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].address == address) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

SlotMap SlotMap::WithSlotOwner(int slot, std::string_view address) const {
  SlotMap patched = *this;
  int index = patched.FindNode(address);
  if (index < 0) {
    index = static_cast<int>(patched.nodes_.size());
    patched.nodes_.push_back(Node{std::string(address), {}});
  }
  int16_t& owner = patched.owner_[static_cast<size_t>(slot)];
  if (owner < 0) {
    ++patched.covered_slots_;
  }
  owner = static_cast<int16_t>(index);
  return patched;
}

std::vector<SlotRange> SlotMap::Ranges() const {
  std::vector<SlotRange> ranges;
  int slot = 0;
  while (slot < kClusterSlots) {
    int owner = owner_[static_cast<size_t>(slot)];
    int end = slot;
    while (end + 1 < kClusterSlots && owner_[static_cast<size_t>(end + 1)] == owner) {
      ++end;
    }
    if (owner >= 0) {
      const Node& node = nodes_[static_cast<size_t>(owner)];
      ranges.push_back(SlotRange{slot, end, node.address, node.replicas});
    }
    slot = end + 1;
  }
  return ranges;
}

std::string SlotMap::DebugString() const {
  std::vector<std::string> parts;
  for (const SlotRange& range : Ranges()) {
    std::string part = absl::StrCat(range.first, "-", range.last, " ", range.master);
    if (!range.replicas.empty()) {
      absl::StrAppend(&part, " (replicas ", absl::StrJoin(range.replicas, ", "), ")");
    }
    parts.push_back(std::move(part));
  }
  if (covered_slots_ < kClusterSlots) {
    parts.push_back(absl::StrCat("uncovered: ", kClusterSlots - covered_slots_));
  }
  return absl::StrJoin(parts, "; ");
}

bool operator==(const SlotMap& a, const SlotMap& b) {
  if (a.covered_slots_ != b.covered_slots_) {
    return false;
  }
  for (int slot = 0; slot < kClusterSlots; ++slot) {
    int x = a.NodeForSlot(slot);
    int y = b.NodeForSlot(slot);
    if ((x < 0) != (y < 0)) {
      return false;
    }
    if (x >= 0) {
      const SlotMap::Node& p = a.nodes_[static_cast<size_t>(x)];
      const SlotMap::Node& q = b.nodes_[static_cast<size_t>(y)];
      if (p.address != q.address || p.replicas != q.replicas) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace sluice
