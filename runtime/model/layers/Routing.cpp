//===- Routing.cpp - a mixture of experts' router: scores and choice ------===//
//
// On the host, in double precision, for both backends (layers/Moe.h): the router's scores from
// its logits, and each token's experts and weights from the scores.
//
//===----------------------------------------------------------------------===//

#include "runtime/model/layers/Moe.h"

#include <algorithm>
#include <cassert>
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

double routerZLoss(int64_t rows, int64_t experts, const double *logits, double *gradient) {
  double sum = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const double *l = logits + r * experts;
    double *g = gradient + r * experts;
    const double most = *std::max_element(l, l + experts);
    double total = 0;
    for (int64_t e = 0; e < experts; ++e)
      total += g[e] = std::exp(l[e] - most);
    const double lse = most + std::log(total);
    sum += lse * lse;
    for (int64_t e = 0; e < experts; ++e)
      g[e] *= 2 * lse / total;
  }
  return sum;
}

Routing Routing::choose(const double *scores, int64_t rows, int64_t experts, int64_t topK,
                        const std::vector<double> &bias, bool normalize, GroupLimit limit) {
  Routing r;
  r.rows = rows;
  r.experts = experts;
  r.topK = topK;
  r.expert.resize(rows * topK);
  r.position.assign(rows * topK, 0);
  r.weight.resize(rows * topK);
  const bool limited = limit.groups > 1 && limit.top < limit.groups;
  const int64_t width = limited ? experts / limit.groups : experts;
  const int64_t best = std::max<int64_t>(1, topK / std::max<int64_t>(limit.top, 1));
  std::vector<int32_t> order(experts), groups(limited ? limit.groups : 0), members(width);
  std::vector<double> groupKey(groups.size());
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
    }
  }
  r.arrange();
  return r;
}

std::vector<int64_t> Routing::chosenPerSample(int64_t sampleRows) const {
  assert(sampleRows > 0 && rows % sampleRows == 0);
  std::vector<int64_t> counts(rows / sampleRows * experts, 0);
  for (int64_t a = 0; a < rows * topK; ++a)
    ++counts[a / topK / sampleRows * experts + expert[a]];
  return counts;
}

void Routing::limit(int64_t capacity, int64_t sampleRows, const std::vector<int64_t> &ahead) {
  assert(sampleRows > 0 && rows % sampleRows == 0);
  assert(ahead.empty() || static_cast<int64_t>(ahead.size()) == rows / sampleRows * experts);
  // An assignment is kept while fewer than `capacity` of its expert's come before it in its
  // sample's token order (the kept ones then number min(capacity, those before)).
  std::vector<int64_t> before(experts);
  for (int64_t t = 0; t < rows; ++t) {
    if (t % sampleRows == 0) {
      const int64_t sample = t / sampleRows;
      for (int64_t e = 0; e < experts; ++e)
        before[e] = ahead.empty() ? 0 : ahead[sample * experts + e];
    }
    for (int64_t j = 0; j < topK; ++j)
      if (before[expert[t * topK + j]]++ >= capacity)
        position[t * topK + j] = -1;
  }
  arrange();
}

void Routing::limitByWeight(int64_t capacity, int64_t sampleRows, int64_t wholeRows, int64_t offset,
                            const std::vector<int32_t> &experts, const std::vector<float> &keys) {
  assert(sampleRows > 0 && rows % sampleRows == 0 && offset + sampleRows <= wholeRows);
  const int64_t samples = rows / sampleRows, width = wholeRows * topK;
  assert(static_cast<int64_t>(experts.size()) == samples * width && keys.size() == experts.size());
  std::vector<int32_t> order(width);
  std::vector<char> kept(width);
  std::vector<int64_t> taken(this->experts);
  for (int64_t sample = 0; sample < samples; ++sample) {
    const int32_t *e = experts.data() + sample * width;
    const float *key = keys.data() + sample * width;
    // Expert by expert, each one's assignments by descending key; among equal keys the
    // earlier assignment (token, then slot) first.
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      if (e[a] != e[b])
        return e[a] < e[b];
      return key[a] > key[b] || (key[a] == key[b] && a < b);
    });
    std::fill(taken.begin(), taken.end(), 0);
    for (int32_t a : order)
      kept[a] = taken[e[a]]++ < capacity;
    for (int64_t t = 0; t < sampleRows; ++t)
      for (int64_t j = 0; j < topK; ++j) {
        const int64_t mine = (sample * sampleRows + t) * topK + j;
        assert(expert[mine] == e[(offset + t) * topK + j]);
        if (!kept[(offset + t) * topK + j])
          position[mine] = -1;
      }
  }
  arrange();
}

void Routing::arrange() {
  // The dispatch order is expert by expert, each expert's tokens ascending.
  start.assign(experts + 1, 0);
  for (int64_t a = 0; a < rows * topK; ++a)
    if (position[a] >= 0)
      ++start[expert[a] + 1];
  for (int64_t e = 0; e < experts; ++e)
    start[e + 1] += start[e];
  token.resize(start.back());
  std::vector<int64_t> next(start.begin(), start.end() - 1);
  for (int64_t a = 0; a < rows * topK; ++a)
    if (position[a] >= 0) {
      position[a] = static_cast<int32_t>(next[expert[a]]++);
      token[position[a]] = static_cast<int32_t>(a / topK);
    }
}

} // namespace conduit::model
