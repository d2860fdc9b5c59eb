#include "server/quota/response_queue.h"

#include <utility>

#include "server/quota/bucket_key.h"

namespace sluice::quota {
namespace {

// A parsed message takes about twice its encoded size (a map's entries, strings' headers), and
// a queued action its key (in the index) and its slot too.
constexpr size_t kSlotBytes = 96;

size_t ActionBytes(const QuotaResponse::BucketAction& action, const std::string& bucket) {
  return 2 * action.ByteSizeLong() + bucket.size() + kSlotBytes;
}

}  // namespace

size_t ResponseQueue::MessageBytes(const QuotaResponse& response) {
  return 2 * response.ByteSizeLong() +
         kSlotBytes * static_cast<size_t>(response.bucket_action_size());
}

bool ResponseQueue::Add(QuotaResponse response, size_t* would_be) {
  struct Incoming {
    std::string bucket;
    size_t bytes;
  };
  std::vector<Incoming> incoming;
  incoming.reserve(static_cast<size_t>(response.bucket_action_size()));
  size_t after = bytes_;
  for (const auto& action : response.bucket_action()) {
    Incoming in{BucketKey(action.bucket_id()), 0};
    in.bytes = ActionBytes(action, in.bucket);
    auto it = index_.find(in.bucket);
    after += in.bytes - (it != index_.end() ? waiting_[it->second].bytes : 0);
    incoming.push_back(std::move(in));
  }
  if (after > max_bytes_) {
    if (would_be != nullptr) {
      *would_be = after;
    }
    return false;
  }
  for (int i = 0; i < response.bucket_action_size(); ++i) {
    Incoming& in = incoming[static_cast<size_t>(i)];
    auto [it, fresh] = index_.try_emplace(std::move(in.bucket), waiting_.size());
    if (fresh) {
      waiting_.push_back(Waiting{});
    }
    Waiting& waiting = waiting_[it->second];
    bytes_ += in.bytes - waiting.bytes;
    waiting.bytes = in.bytes;
    waiting.action = std::move(*response.mutable_bucket_action(i));
  }
  return true;
}

QuotaResponse ResponseQueue::Take() {
  QuotaResponse response;
  for (Waiting& waiting : waiting_) {
    *response.add_bucket_action() = std::move(waiting.action);
  }
  waiting_.clear();
  waiting_.shrink_to_fit();
  index_.clear();
  bytes_ = 0;
  return response;
}

}  // namespace sluice::quota
