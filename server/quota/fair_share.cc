#include "server/quota/fair_share.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace sluice::quota {

std::vector<double> MaxMinShares(double limit, absl::Span<const double> demands) {
  const size_t n = demands.size();
  std::vector<double> shares(n, 0.0);
  if (n == 0) {
    return shares;
  }
  std::vector<double> asked(demands.begin(), demands.end());
  for (double& d : asked) {
    d = d > 0 ? d : 0.0;  // NaN and negatives: 0
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return asked[a] < asked[b]; });
  double left = limit;
  size_t k = 0;
  // The smallest demands first: each gets all it asks while that is below an equal part of
  // what is left; from the first that does not, everyone left gets the equal part.
  for (; k < n; ++k) {
    const double equal = left / static_cast<double>(n - k);
    if (asked[order[k]] > equal) {
      break;
    }
    shares[order[k]] = asked[order[k]];
    left -= asked[order[k]];
  }
  if (k < n) {
    const double equal = left / static_cast<double>(n - k);
    for (size_t j = k; j < n; ++j) {
      shares[order[j]] = equal;
    }
    return shares;
  }
  // Every demand fits: the surplus is shared equally.
  const double surplus = std::max(0.0, left) / static_cast<double>(n);
  for (double& share : shares) {
    share += surplus;
  }
  return shares;
}

bool ShareMoved(double assigned, double fresh, double tolerance) {
  if ((assigned > 0) != (fresh > 0)) {
    return true;
  }
  return std::abs(fresh - assigned) > tolerance * std::max(assigned, fresh);
}

}  // namespace sluice::quota
