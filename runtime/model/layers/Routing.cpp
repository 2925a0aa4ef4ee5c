//===- Routing.cpp - a mixture of experts' router: scores and choice ------===//
//
// On the host, in double precision, for both backends (layers/Moe.h): the router's scores from
// its logits, and each token's experts and weights from the scores.
//
//===----------------------------------------------------------------------===//

#include "runtime/model/layers/Moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace conduit::model {

void routerScores(int64_t rows, int64_t experts, bool sigmoid, const double *logits,
                  double *scores) {
  for (int64_t r = 0; r < rows; ++r) {
    const double *l = logits + r * experts;
    double *p = scores + r * experts;
    if (sigmoid) {
      for (int64_t e = 0; e < experts; ++e)
        p[e] = 1.0 / (1.0 + std::exp(-l[e]));
      continue;
    }
    const double most = *std::max_element(l, l + experts);
    double sum = 0;
    for (int64_t e = 0; e < experts; ++e)
      sum += p[e] = std::exp(l[e] - most);
    for (int64_t e = 0; e < experts; ++e)
      p[e] /= sum;
  }
}

Routing Routing::choose(const double *scores, int64_t rows, int64_t experts, int64_t topK,
                        const std::vector<double> &bias, bool normalize, int64_t capacity,
                        GroupLimit limit) {
  Routing r;
  r.rows = rows;
  r.experts = experts;
  r.topK = topK;
  r.expert.resize(rows * topK);
  r.position.assign(rows * topK, -1);
  r.weight.resize(rows * topK);
  const bool limited = limit.groups > 1 && limit.top < limit.groups;
  const int64_t width = limited ? experts / limit.groups : experts;
  const int64_t best = std::max<int64_t>(1, topK / std::max<int64_t>(limit.top, 1));
  std::vector<int32_t> order(experts), groups(limited ? limit.groups : 0), members(width);
  std::vector<double> groupKey(groups.size());
  std::vector<int64_t> taken(experts, 0);
  // Descending keys; among equal keys the lower index first.
  auto higher = [](auto keyOf) {
    return [keyOf](int32_t a, int32_t b) {
      const double ka = keyOf(a), kb = keyOf(b);
      return ka > kb || (ka == kb && a < b);
    };
  };
  for (int64_t t = 0; t < rows; ++t) {
    const double *p = scores + t * experts;
    auto key = [&](int32_t e) { return p[e] + (bias.empty() ? 0.0 : bias[e]); };
    int64_t candidates = experts;
    std::iota(order.begin(), order.end(), 0);
    if (limited) {
      for (int64_t g = 0; g < limit.groups; ++g) {
        std::iota(members.begin(), members.end(), static_cast<int32_t>(g * width));
        std::partial_sort(members.begin(), members.begin() + best, members.end(), higher(key));
        groupKey[g] = 0;
        for (int64_t j = 0; j < best; ++j)
          groupKey[g] += key(members[j]);
      }
      std::iota(groups.begin(), groups.end(), 0);
      std::partial_sort(groups.begin(), groups.begin() + limit.top, groups.end(),
                        higher([&](int32_t g) { return groupKey[g]; }));
      candidates = 0;
      for (int64_t i = 0; i < limit.top; ++i)
        for (int64_t e = 0; e < width; ++e)
          order[candidates++] = static_cast<int32_t>(groups[i] * width + e);
    }
    // The k highest keys among the candidates.
    std::partial_sort(order.begin(), order.begin() + topK, order.begin() + candidates, higher(key));
    double sum = 0;
    for (int64_t j = 0; j < topK; ++j)
      sum += p[order[j]];
    for (int64_t j = 0; j < topK; ++j) {
      const int32_t e = order[j];
      r.expert[t * topK + j] = e;
      r.weight[t * topK + j] = normalize ? p[e] / sum : p[e];
      // Tokens in order: an expert past its capacity drops the later ones.
      if (capacity <= 0 || taken[e] < capacity)
        r.position[t * topK + j] = static_cast<int32_t>(taken[e]++);
    }
  }
  // Positions so far count within each expert; the dispatch order is expert by expert.
  r.start.assign(experts + 1, 0);
  for (int64_t e = 0; e < experts; ++e)
    r.start[e + 1] = r.start[e] + taken[e];
  r.token.resize(r.start.back());
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t j = 0; j < topK; ++j) {
      int32_t &at = r.position[t * topK + j];
      if (at < 0)
        continue;
      at = static_cast<int32_t>(r.start[r.expert[t * topK + j]] + at);
      r.token[at] = static_cast<int32_t>(t);
    }
  return r;
}

} // namespace conduit::model
