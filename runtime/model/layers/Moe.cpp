//===- Moe.cpp - a mixture of experts, a block's second branch -------------===//
//
// The router's scores, choice, weights and auxiliary loss are computed on the host (the
// router is N columns wide); the experts' GEMMs, the gathers of their tokens and the weighted
// sum of their outputs run on the Ops, expert by expert in index order, so that a token's
// output is the same sum in the same order however the batch is cut.
//
//===----------------------------------------------------------------------===//

#include "runtime/model/layers/Moe.h"

#include "runtime/model/layers/Initialise.h"
#include "runtime/model/layers/Mlp.h"
#include "runtime/model/layers/TensorSplit.h"

#include <algorithm>
#include <cmath>

namespace conduit::model {

namespace {
// What the forward keeps, by index: for the input gradient only, the experts' first
// projections U, in the order they run, and with a gate the shared experts' output before it;
// for both halves, the router's scores, the dispatched tokens (W1's input) and the experts'
// weighted activations G (W2's input), in the order they run. The input gradient stashes the
// router logits' gradient, the experts' output gradients (W2's output gradient: the tokens')
// and their first projections' output gradients, in the order they run, and with a gate the
// gate logits' gradient over the routed rows and the shared experts' (gated) output gradient.
enum { U, SharedOut, NumInputOnly };
enum { Scores, Dispatched, G, NumSaved };
enum { DLogits, DOut, DUp, DGate, DShared, NumStashed };

/// The shape of the shared experts: an MLP of their width, without biases.
GptShape sharedShape(const GptShape &s) {
  GptShape shared = s;
  shared.ffn = s.sharedFfn;
  return shared;
}

std::vector<double> toHost(Ops<float> &ops, const float *src, int64_t n) {
  std::vector<float> host(n);
  ops.download(src, n, host.data());
  return std::vector<double>(host.begin(), host.end());
}
std::vector<double> toHost(Ops<double> &ops, const double *src, int64_t n) {
  std::vector<double> host(n);
  ops.download(src, n, host.data());
  return host;
}
template <typename T> void fromHost(Ops<T> &ops, const std::vector<double> &host, T *dst) {
  const std::vector<T> values(host.begin(), host.end());
  ops.upload(values.data(), static_cast<int64_t>(values.size()), dst);
}

/// `rows` rows of width + 1 into `wide`: row a of width from rowOf(a) (a device pointer), then
/// extra[a]. The all-to-alls carry each weight, and its gradient, beside its row this way.
template <typename T, typename RowOf>
void joinColumn(Ops<T> &ops, int64_t rows, int64_t width, RowOf rowOf, const std::vector<T> &extra,
                T *wide) {
  Buffer<T> column = transient(ops, std::max<int64_t>(rows, 1));
  ops.upload(extra.data(), rows, column.data());
  for (int64_t a = 0; a < rows; ++a) {
    ops.copy(width, rowOf(a), wide + a * (width + 1));
    ops.copy(1, column.data() + a, wide + a * (width + 1) + width);
  }
}

/// The inverse: of `rows` rows of width + 1, the rows into `dst` (contiguous; none when null)
/// and the extra elements, returned on the host.
template <typename T>
std::vector<double> splitColumn(Ops<T> &ops, const T *wide, int64_t rows, int64_t width, T *dst) {
  Buffer<T> column = transient(ops, std::max<int64_t>(rows, 1));
  for (int64_t a = 0; a < rows; ++a) {
    if (dst)
      ops.copy(width, wide + a * (width + 1), dst + a * width);
    ops.copy(1, wide + a * (width + 1) + width, column.data() + a);
  }
  return toHost(ops, column.data(), rows);
}
} // namespace

template <typename T>
Moe<T>::Moe(const GptShape &s, bool recomputeActivation)
    : s(s), recomputeActivation(recomputeActivation) {
  const int64_t h = s.hidden;
  routerAt = 0;
  biasAt = s.sigmoidRouter ? h * s.experts : -1;
  sharedAt = h * s.experts + (s.sigmoidRouter ? s.experts : 0);
  if (s.sharedFfn > 0)
    shared = std::make_unique<Mlp<T>>(sharedShape(s));
  gateAt = sharedAt + (shared ? shared->numParams() : 0);
  expertsAt = gateAt + (gated() ? h : 0);
  // Each expert: W1 [h × up], b1 [up], W2 [fe × h], b2 [h] (biases with bias "all").
  b1At = h * up();
  w2At = b1At + (s.otherBias ? up() : 0);
  b2At = w2At + s.expertFfn * h;
  perExpert = b2At + (s.otherBias ? h : 0);
  total = expertsAt + s.localExperts() * perExpert;
  placed = expertsAt;
}

template <typename T>
void Moe<T>::slice(int64_t wholeAt, int64_t localAt, std::vector<ParameterRun> &runs) const {
  // Every rank holds the router whole, its tensor rank's part of the shared experts (split as
  // the dense MLP), and its own routed experts.
  const Moe whole(s.whole());
  addRun(runs, wholeAt, localAt, sharedAt);
  if (shared)
    shared->slice(wholeAt + sharedAt, localAt + sharedAt, runs);
  if (gated())
    addRun(runs, wholeAt + whole.gateAt, localAt + gateAt, s.hidden);
  addRun(runs, wholeAt + whole.expertsAt + s.firstLocalExpert() * perExpert, localAt + expertsAt,
         expertParams());
}

template <typename T> void Moe<T>::initialise(T *params, Random &random) const {
  std::fill(params, params + total, T(0));
  fillNormal(params + routerAt, s.hidden * s.experts, random);
  if (shared)
    shared->initialise(params + sharedAt, random);
  if (gated())
    fillNormal(params + gateAt, s.hidden, random);
  for (int64_t e = 0; e < s.localExperts(); ++e) { // all of them: on the whole shape
    T *expert = params + expertsAt + e * perExpert;
    fillNormal(expert, s.hidden * up(), random);
    fillNormal(expert + w2At, s.expertFfn * s.hidden, random);
  }
}

template <typename T> void Moe<T>::keep(Ops<T> &ops, int64_t samples, LayerCache<T> &cache) const {
  const int64_t rows = samples * routedSeq();
  startCache(cache, samples, NumInputOnly, NumSaved);
  cache.parts.resize(shared ? 1 : 0);
  if (shared)
    shared->keep(ops, samples, cache.parts[0]);
  if (gated())
    cache.inputOnly[SharedOut] = ops.allocate(samples * s.localSeq() * s.hidden);
  cache.saved[Scores] = ops.allocate(rows * s.experts);
  // This rank's experts' inputs, first projections and activations are allocated by the
  // forward, which learns how many tokens its experts take (with an expert group, from the
  // other members).
}

template <typename T> void Moe<T>::limitToCapacity(Ops<T> &ops, Routing &r) const {
  // Per sample, whatever the piece: the model does not depend on how a batch is cut.
  const int64_t N = s.experts, seq = routedSeq(), samples = r.rows / seq;
  const auto capacity = static_cast<int64_t>(
      std::ceil(s.capacityFactor * static_cast<double>(s.seq * s.topK) / static_cast<double>(N)));
  if (s.dropByWeight) {
    // Every assignment of the whole sample, ranked by its weight in single precision. With
    // T > 1 the members gather each other's through the Ops's type (float or double, so the
    // keys round as a rank's own do), and each ranks the same numbers.
    const int64_t width = seq * s.topK, n = samples * 2 * width;
    const int64_t members = s.tensorParallel() ? s.tensorSize : 1;
    std::vector<double> parts(n); // per sample: its assignments' experts, then their weights
    for (int64_t sample = 0; sample < samples; ++sample)
      for (int64_t a = 0; a < width; ++a) {
        parts[sample * 2 * width + a] = r.expert[sample * width + a];
        parts[sample * 2 * width + width + a] = r.weight[sample * width + a];
      }
    if (members > 1) {
      Buffer<T> shard = transient(ops, n), all = transient(ops, n * members);
      fromHost(ops, parts, shard.data());
      ops.tensorGroup()->allGather(n, shard.data(), all.data());
      parts = toHost(ops, all.data(), n * members);
    }
    std::vector<int32_t> experts(samples * members * width);
    std::vector<float> keys(experts.size());
    for (int64_t member = 0; member < members; ++member)
      for (int64_t sample = 0; sample < samples; ++sample)
        for (int64_t a = 0; a < width; ++a) {
          const double *part = parts.data() + member * n + sample * 2 * width;
          const int64_t whole = (sample * members + member) * width + a;
          experts[whole] = static_cast<int32_t>(part[a]);
          keys[whole] = static_cast<float>(part[width + a]);
        }
    r.limitByWeight(capacity, seq, seq * members, seq * (members > 1 ? s.tensorRank : 0), experts,
                    keys);
    return;
  }
  std::vector<int64_t> ahead;
  if (s.tensorParallel()) {
    // The members route a sample's parts in tensor-rank order: the ones before this rank's
    // come first. Their choices' counts, gathered as the Ops's numbers (exact: far below 2^24).
    const std::vector<int64_t> mine = r.chosenPerSample(seq);
    const int64_t n = samples * N;
    std::vector<double> counts(mine.begin(), mine.end());
    Buffer<T> shard = transient(ops, n), all = transient(ops, n * s.tensorSize);
    fromHost(ops, counts, shard.data());
    ops.tensorGroup()->allGather(n, shard.data(), all.data());
    counts = toHost(ops, all.data(), n * s.tensorSize);
    ahead.assign(n, 0);
    for (int64_t member = 0; member < s.tensorRank; ++member)
      for (int64_t i = 0; i < n; ++i)
        ahead[i] += static_cast<int64_t>(counts[member * n + i]);
  }
  r.limit(capacity, seq, ahead);
}

template <typename T> void Moe<T>::exchangeCounts(Ops<T> &ops, Routing &r) const {
  const int64_t N = s.experts;
  ExpertGroup<T> *group = groupOf(ops);
  r.segments.clear();
  if (!group) {
    for (int64_t e = 0; e < N; ++e)
      if (r.start[e + 1] > r.start[e])
        r.segments.push_back({e, r.start[e], r.start[e + 1] - r.start[e]});
    r.sentTo = r.receivedFrom = {r.dispatched()};
    return;
  }
  // Each member's counts of the experts of every member, exchanged as the Ops's numbers (exact:
  // a piece's assignments are far below 2^24).
  const int64_t E = group->size(), q = group->position(), L = N / E;
  std::vector<T> mine(N), theirs(N);
  for (int64_t e = 0; e < N; ++e)
    mine[e] = static_cast<T>(r.start[e + 1] - r.start[e]);
  {
    Buffer<T> send = transient(ops, N), receive = transient(ops, N);
    ops.upload(mine.data(), N, send.data());
    group->allToAll(ExpertExchange::Counts, send.data(), std::vector<int64_t>(E, L), receive.data(),
                    std::vector<int64_t>(E, L));
    ops.download(receive.data(), N, theirs.data());
  }
  r.sentTo.assign(E, 0);
  r.receivedFrom.assign(E, 0);
  int64_t first = 0;
  for (int64_t m = 0; m < E; ++m)
    for (int64_t l = 0; l < L; ++l) {
      r.sentTo[m] += static_cast<int64_t>(mine[m * L + l]);
      const int64_t count = static_cast<int64_t>(theirs[m * L + l]);
      r.receivedFrom[m] += count;
      if (count > 0)
        r.segments.push_back({q * L + l, first, count});
      first += count;
    }
}

template <typename T>
void Moe<T>::forward(Ops<T> &ops, const T *p, const T *x, const T *residual, T *y,
                     LayerCache<T> &cache) const {
  const int64_t n = cache.samples, rows = n * routedSeq(), h = s.hidden, N = s.experts,
                f = s.expertFfn;
  // The shared experts add onto the residual (their tensor collectives come first); without
  // them y starts as the residual. A gate weighs their output per token first.
  std::vector<double> gates;
  if (gated())
    gates = gatedShared(ops, p, x, residual, y, cache);
  else if (shared)
    shared->forward(ops, p + sharedAt, x, residual, y, cache.parts[0]);
  else
    ops.copy(n * s.localSeq() * h, residual, y);
  // This rank's tokens.
  Buffer<T> mine;
  x = routedRows(ops, n, x, mine);
  // The router's scores and choice, on the host.
  std::vector<double> scores(rows * N), zGradient;
  {
    Buffer<T> logits = transient(ops, rows * N);
    ops.gemm(false, false, rows, N, h, 1, x, p + routerAt, 0, logits.data());
    const std::vector<double> host = toHost(ops, logits.data(), rows * N);
    routerScores(rows, N, s.sigmoidRouter, host.data(), scores.data());
    if (s.zLossCoefficient > 0) {
      // Per sample, the coefficient times the mean over its tokens: every member of a tensor
      // group adds the part of it its own tokens give.
      zGradient.resize(rows * N);
      const double z = routerZLoss(rows, N, host.data(), zGradient.data());
      ops.addZLoss(s.zLossCoefficient * z / static_cast<double>(s.seq));
      for (double &g : zGradient)
        g *= s.zLossCoefficient;
    }
  }
  // Stored as the Ops's type, and routed from those values, so that the backward (which
  // reads them back) sees the scores the forward used.
  fromHost(ops, scores, cache.saved[Scores].data());
  scores = toHost(ops, cache.saved[Scores].data(), rows * N);
  // The sigmoid router's per-expert bias steers the choice (not the weights).
  const std::vector<double> bias = biasAt >= 0 ? toHost(ops, p + biasAt, N) : std::vector<double>();
  auto routing = std::make_shared<Routing>(Routing::choose(
      scores.data(), rows, N, s.topK, bias, s.normalizeTopK, {s.routerGroups, s.routerGroupTopK}));
  if (s.capacityFactor > 0) {
    limitToCapacity(ops, *routing);
    ops.noteDropped(rows * s.topK, rows * s.topK - routing->dispatched());
  }
  // DeepSeek-V3's routed_scaling_factor: on the chosen (and normalised) weights.
  if (s.routedScaling != 1)
    for (double &w : routing->weight)
      w *= s.routedScaling;
  routing->gates = std::move(gates);
  routing->zGradient = std::move(zGradient);
  const Routing &r = *routing;
  cache.host = routing;

  // The auxiliary loss, per sample: coefficient · N · Σ_e f_e · P_e, from each sample's f
  // (kept for the backward) and P over its whole sequence: with T > 1 the group sums its
  // members' parts, and one of them counts the loss.
  if (s.auxLossCoefficient > 0) {
    const int64_t seq = routedSeq();
    std::vector<double> statistics(n * 2 * N, 0.0); // per sample: f, then P
    for (int64_t sample = 0; sample < n; ++sample) {
      double *fraction = statistics.data() + sample * 2 * N, *mean = fraction + N;
      for (int64_t t = sample * seq; t < (sample + 1) * seq; ++t) {
        for (int64_t j = 0; j < s.topK; ++j)
          fraction[r.expert[t * s.topK + j]] += 1.0 / static_cast<double>(s.seq * s.topK);
        for (int64_t e = 0; e < N; ++e)
          mean[e] += scores[t * N + e] / static_cast<double>(s.seq);
      }
    }
    if (s.tensorParallel()) {
      Buffer<T> summed = transient(ops, n * 2 * N);
      fromHost(ops, statistics, summed.data());
      ops.tensorGroup()->allReduce(n * 2 * N, summed.data());
      statistics = toHost(ops, summed.data(), n * 2 * N);
    }
    double aux = 0;
    routing->fractions.resize(n * N);
    for (int64_t sample = 0; sample < n; ++sample) {
      const double *fraction = statistics.data() + sample * 2 * N, *mean = fraction + N;
      std::copy(fraction, fraction + N, routing->fractions.begin() + sample * N);
      double sum = 0;
      for (int64_t e = 0; e < N; ++e)
        sum += fraction[e] * mean[e];
      aux += s.auxLossCoefficient * static_cast<double>(N) * sum;
    }
    if (s.tensorRank == 0)
      ops.addAuxLoss(aux);
  }

  // Dispatch: each expert's tokens with their weights, to the member of the expert group that
  // holds the expert; there each expert's MLP, segment by segment.
  exchangeCounts(ops, *routing);
  ExpertGroup<T> *group = groupOf(ops);
  const int64_t wide = h + 1, dispatched = std::max<int64_t>(r.dispatched(), 1);
  const int64_t taken = r.taken();
  if (group && rows * s.topK > 0)
    ops.noteRoutedLoad(static_cast<double>(taken) / static_cast<double>(rows * s.topK));
  cache.saved[Dispatched] = ops.allocate(std::max<int64_t>(taken, 1) * h);
  cache.inputOnly[U] = ops.allocate(std::max<int64_t>(taken, 1) * up());
  if (!recomputeActivation)
    cache.saved[G] = ops.allocate(std::max<int64_t>(taken, 1) * f);
  T *in = cache.saved[Dispatched].data(), *u = cache.inputOnly[U].data();
  // The weights in dispatch order, in the Ops's type (as the dispatch carries them).
  std::vector<T> weights(dispatched, T(0));
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t j = 0; j < s.topK; ++j)
      if (const int32_t a = r.position[t * s.topK + j]; a >= 0)
        weights[a] = static_cast<T>(r.weight[t * s.topK + j]);
  if (group) {
    Buffer<T> send = transient(ops, dispatched * wide);
    joinColumn(
        ops, r.dispatched(), h, [&](int64_t a) { return x + r.token[a] * h; }, weights,
        send.data());
    Buffer<T> arrived = transient(ops, std::max<int64_t>(taken, 1) * wide);
    group->allToAll(ExpertExchange::Dispatch, send.data(), Routing::times(r.sentTo, wide),
                    arrived.data(), Routing::times(r.receivedFrom, wide));
    routing->takenWeight = splitColumn(ops, arrived.data(), taken, h, in);
  } else {
    for (int64_t a = 0; a < r.dispatched(); ++a)
      ops.copy(h, x + r.token[a] * h, in + a * h);
    routing->takenWeight.assign(weights.begin(), weights.begin() + r.dispatched());
  }
  // The weighted outputs, in dispatch order (the combine's receive buffer).
  Buffer<T> combined = transient(ops, dispatched * h);
  {
    Buffer<T> outputs, activations;
    T *out = combined.data();
    if (group) {
      outputs = transient(ops, std::max<int64_t>(taken, 1) * h);
      out = outputs.data();
    }
    for (const Routing::Segment &seg : r.segments) {
      const T *w = expertParamsAt(p, seg.expert);
      const int64_t first = seg.first, count = seg.count;
      ops.gemm(false, false, count, up(), h, 1, in + first * h, w, 0, u + first * up());
      if (s.otherBias)
        ops.addBias(count, up(), w + b1At, u + first * up());
    }
    // Recomputed (moe_act), the activations are working memory until the second projections.
    if (recomputeActivation)
      activations = transient(ops, std::max<int64_t>(taken, 1) * f);
    T *g = recomputeActivation ? activations.data() : cache.saved[G].data();
    weightedActivations(ops, r, u, g);
    for (const Routing::Segment &seg : r.segments) {
      const T *w = expertParamsAt(p, seg.expert);
      const int64_t first = seg.first, count = seg.count;
      ops.gemm(false, false, count, h, f, 1, g + first * f, w + w2At, 0, out + first * h);
      if (s.otherBias)
        for (int64_t a = first; a < first + count; ++a)
          ops.scaledAdd(h, static_cast<T>(r.takenWeight[a]), w + b2At, out + a * h);
    }
    // Combine: the outputs back to the members whose tokens they are.
    if (group)
      group->allToAll(ExpertExchange::Combine, out, Routing::times(r.receivedFrom, h),
                      combined.data(), Routing::times(r.sentTo, h));
  }
  // Combine: each token adds its experts' weighted outputs, in slot order, onto y, or where
  // the rank routes a part of the sequence it holds onto that part, gathered after.
  Buffer<T> part = routesPart() ? transient(ops, rows * h) : Buffer<T>();
  T *sum = routesPart() ? part.data() : y;
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t j = 0; j < s.topK; ++j)
      if (const int32_t a = r.position[t * s.topK + j]; a >= 0)
        ops.add(h, combined.data() + a * h, sum + t * h);
  if (routesPart())
    addGathered(ops, n, part.data(), y);
}

template <typename T> void Moe<T>::activate(Ops<T> &ops, const Routing &r, const T *u, T *g) const {
  const int64_t f = s.expertFfn;
  for (const Routing::Segment &seg : r.segments) {
    if (s.gated)
      ops.swigluForward(seg.count, f, u + seg.first * up(), g + seg.first * f);
    else
      ops.geluForward(seg.count * f, u + seg.first * up(), g + seg.first * f);
  }
}

template <typename T> void Moe<T>::weigh(Ops<T> &ops, const Routing &r, int64_t width, T *x) const {
  const std::vector<T> weights(r.takenWeight.begin(), r.takenWeight.end());
  ops.scaleRows(r.taken(), width, weights.data(), x);
}

template <typename T>
void Moe<T>::weightedActivations(Ops<T> &ops, const Routing &r, const T *u, T *g) const {
  activate(ops, r, u, g);
  weigh(ops, r, s.expertFfn, g);
}

template <typename T>
std::vector<double> Moe<T>::gatedShared(Ops<T> &ops, const T *p, const T *x, const T *residual,
                                        T *y, LayerCache<T> &cache) const {
  const int64_t rows = cache.samples * s.localSeq(), h = s.hidden;
  // The shared experts' output alone (onto zeros), kept for the gate's gradient.
  T *out = cache.inputOnly[SharedOut].data();
  {
    Buffer<T> zeros = transient(ops, rows * h);
    ops.fill(rows * h, T(0), zeros.data());
    shared->forward(ops, p + sharedAt, x, zeros.data(), out, cache.parts[0]);
  }
  // sigmoid(x · wg) per row, on the host, as the router's scores.
  std::vector<double> gates(rows);
  {
    Buffer<T> logits = transient(ops, std::max<int64_t>(rows, 1));
    ops.gemm(false, false, rows, 1, h, 1, x, p + gateAt, 0, logits.data());
    const std::vector<double> host = toHost(ops, logits.data(), rows);
    for (int64_t i = 0; i < rows; ++i)
      gates[i] = 1.0 / (1.0 + std::exp(-host[i]));
  }
  Buffer<T> weighted = transient(ops, rows * h);
  ops.copy(rows * h, out, weighted.data());
  const std::vector<T> factors(gates.begin(), gates.end());
  ops.scaleRows(rows, h, factors.data(), weighted.data());
  ops.copy(rows * h, residual, y);
  ops.add(rows * h, weighted.data(), y);
  return gates;
}

template <typename T>
const T *Moe<T>::routedRows(Ops<T> &ops, int64_t samples, const T *rows, Buffer<T> &part) const {
  if (!routesPart())
    return rows;
  const int64_t width = routedSeq() * s.hidden;
  part = transient(ops, samples * width);
  ops.copyRows(samples, width, rows + s.tensorRank * width, s.seq * s.hidden, part.data(), width);
  return part.data();
}

template <typename T>
void Moe<T>::addGathered(Ops<T> &ops, int64_t samples, const T *part, T *whole) const {
  // The group's parts in sample order, as sequence parallelism gathers its shards.
  GptShape sharded = s;
  sharded.sequenceParallel = true;
  Buffer<T> gathered = transient(ops, samples * s.seq * s.hidden);
  gatherSequence(ops, sharded, samples, s.hidden, part, gathered.data());
  ops.add(samples * s.seq * s.hidden, gathered.data(), whole);
}

template <typename T>
void Moe<T>::recompute(Ops<T> &ops, const T *, const T *, LayerCache<T> &cache) const {
  if (!recomputeActivation)
    return;
  // From the kept first projections, with the forward's kernels: the same bits. They live
  // until the weight gradient (W2's input), as the forward's would have.
  const Routing &r = *std::static_pointer_cast<const Routing>(cache.host);
  cache.saved[G] = ops.allocate(std::max<int64_t>(r.taken(), 1) * s.expertFfn);
  weightedActivations(ops, r, cache.inputOnly[U].data(), cache.saved[G].data());
}

template <typename T>
std::vector<double> Moe<T>::gateBackward(Ops<T> &ops, LayerCache<T> &cache, const T *dy) const {
  const int64_t n = cache.samples, rows = n * s.localSeq(), h = s.hidden;
  const std::vector<double> &gates = std::static_pointer_cast<const Routing>(cache.host)->gates;
  // The shared experts' output gradient: the gate times the block's.
  cache.stash[DShared] = ops.allocate(rows * h);
  ops.copy(rows * h, dy, cache.stash[DShared].data());
  const std::vector<T> factors(gates.begin(), gates.end());
  ops.scaleRows(rows, h, factors.data(), cache.stash[DShared].data());
  // The gate logits' gradient: <dy, shared output> g (1 - g) per row, on the host.
  const std::vector<double> d = toHost(ops, dy, rows * h),
                            out = toHost(ops, cache.inputOnly[SharedOut].data(), rows * h);
  std::vector<double> dLogits(rows);
  for (int64_t i = 0; i < rows; ++i) {
    double dot = 0;
    for (int64_t c = 0; c < h; ++c)
      dot += d[i * h + c] * out[i * h + c];
    dLogits[i] = dot * gates[i] * (1.0 - gates[i]);
  }
  // The weight gradient's part: the rows the rank routes (every rank holds the whole sequence
  // without sequence parallelism and the tensor group sums the parts, as the router's).
  std::vector<double> routed;
  if (routesPart()) {
    const int64_t part = routedSeq();
    for (int64_t sample = 0; sample < n; ++sample) {
      const auto first = dLogits.begin() + sample * s.seq + s.tensorRank * part;
      routed.insert(routed.end(), first, first + part);
    }
  } else {
    routed = dLogits;
  }
  cache.stash[DGate] = ops.allocate(std::max<int64_t>(n * routedSeq(), 1));
  fromHost(ops, routed, cache.stash[DGate].data());
  return dLogits;
}

template <typename T>
Buffer<T> Moe<T>::backwardInput(Ops<T> &ops, const T *p, LayerCache<T> &cache, const T *dy,
                                bool dyKept) const {
  const int64_t n = cache.samples, rows = n * routedSeq(), h = s.hidden, N = s.experts,
                f = s.expertFfn, k = s.topK;
  const Routing &r = *std::static_pointer_cast<const Routing>(cache.host);
  const int64_t dispatched = std::max<int64_t>(r.dispatched(), 1);
  std::vector<Buffer<T>> &stash = cache.stash;
  stash.clear();
  stash.resize(NumStashed);
  // With a gate the shared experts take the gated output gradient, kept here for their weight
  // gradient, and the gate's logits their gradient (its input gradient added below).
  std::vector<double> dGate;
  if (gated())
    dGate = gateBackward(ops, cache, dy);
  Buffer<T> dx =
      shared ? shared->backwardInput(ops, p + sharedAt, cache.parts[0],
                                     gated() ? stash[DShared].data() : dy, gated() || dyKept)
             : ops.allocate(n * s.localSeq() * h);
  if (gated() && s.sequenceParallel)
    stash[DShared].reset(); // the shared experts kept the gathered output gradient instead
  if (gated()) {
    Buffer<T> logits = transient(ops, std::max<int64_t>(n * s.localSeq(), 1));
    fromHost(ops, dGate, logits.data());
    ops.gemm(false, true, n * s.localSeq(), h, 1, 1, logits.data(), p + gateAt, 1, dx.data());
  }
  // This rank's tokens' output gradients, and where their input gradients add: dx, or where
  // the rank routes a part of the sequence it holds that part, gathered after.
  Buffer<T> mine, part = routesPart() ? transient(ops, rows * h) : Buffer<T>();
  dy = routedRows(ops, n, dy, mine);
  T *dxRouted = routesPart() ? part.data() : dx.data();
  stash[DLogits] = ops.allocate(rows * N);

  // Each expert's backward: its output gradient is the token's, sent to the member that holds
  // the expert (the combine's gradient); the input gradients come back, each with its weight's
  // gradient (the dispatch's).
  ExpertGroup<T> *group = groupOf(ops);
  const int64_t wide = h + 1, taken = std::max<int64_t>(r.taken(), 1);
  stash[DOut] = ops.allocate(taken * h);
  stash[DUp] = ops.allocate(taken * up());
  T *dOut = stash[DOut].data(), *dUp = stash[DUp].data();
  {
    Buffer<T> tokens;
    T *mine = dOut;
    if (group) {
      tokens = transient(ops, dispatched * h);
      mine = tokens.data();
    }
    for (int64_t t = 0; t < rows; ++t)
      for (int64_t j = 0; j < k; ++j)
        if (const int32_t a = r.position[t * k + j]; a >= 0)
          ops.copy(h, dy + t * h, mine + a * h);
    if (group)
      group->allToAll(ExpertExchange::Combine, mine, Routing::times(r.sentTo, h), dOut,
                      Routing::times(r.receivedFrom, h));
  }
  // Per assignment in dispatch order, its weight's gradient: <activation, dg> (+ <b2, dy> with
  // biases), where dg is the gradient of the weighted activation. Rounded to the Ops's type, as
  // the dispatch's gradient carries it.
  std::vector<double> dWeightDispatched;
  {
    Buffer<T> dg = transient(ops, taken * f);
    for (const Routing::Segment &seg : r.segments) {
      const T *w = expertParamsAt(p, seg.expert);
      ops.gemm(false, true, seg.count, f, h, 1, dOut + seg.first * h, w + w2At, 0,
               dg.data() + seg.first * f);
    }
    std::vector<T> dWeightTaken(taken, T(0));
    {
      Buffer<T> act = transient(ops, taken * f); // the activations again
      activate(ops, r, cache.inputOnly[U].data(), act.data());
      const std::vector<double> a = toHost(ops, act.data(), r.taken() * f),
                                g = toHost(ops, dg.data(), r.taken() * f),
                                d = s.otherBias ? toHost(ops, dOut, r.taken() * h)
                                                : std::vector<double>();
      for (const Routing::Segment &seg : r.segments) {
        const std::vector<double> b2 = s.otherBias
                                           ? toHost(ops, expertParamsAt(p, seg.expert) + b2At, h)
                                           : std::vector<double>();
        for (int64_t i = seg.first; i < seg.first + seg.count; ++i) {
          double dot = 0;
          for (int64_t c = 0; c < f; ++c)
            dot += a[i * f + c] * g[i * f + c];
          for (size_t c = 0; c < b2.size(); ++c)
            dot += b2[c] * d[i * h + static_cast<int64_t>(c)];
          dWeightTaken[i] = static_cast<T>(dot);
        }
      }
    }
    // dg becomes the activations' gradient: the weight times the weighted activations'.
    weigh(ops, r, f, dg.data());
    Buffer<T> dIn = transient(ops, taken * h);
    for (const Routing::Segment &seg : r.segments) {
      const T *w = expertParamsAt(p, seg.expert);
      const int64_t first = seg.first, count = seg.count;
      const T *u = cache.inputOnly[U].data() + first * up();
      if (s.gated)
        ops.swigluBackward(count, f, u, dg.data() + first * f, dUp + first * up());
      else
        ops.geluBackward(count * f, u, dg.data() + first * f, dUp + first * up());
      ops.gemm(false, true, count, h, up(), 1, dUp + first * up(), w, 0, dIn.data() + first * h);
    }
    // Back to the tokens, in dispatch order.
    if (group) {
      Buffer<T> send = transient(ops, taken * wide), returned = transient(ops, dispatched * wide);
      joinColumn(
          ops, r.taken(), h, [&](int64_t a) { return dIn.data() + a * h; }, dWeightTaken,
          send.data());
      group->allToAll(ExpertExchange::Dispatch, send.data(), Routing::times(r.receivedFrom, wide),
                      returned.data(), Routing::times(r.sentTo, wide));
      for (int64_t a = 0; a < r.dispatched(); ++a)
        ops.add(h, returned.data() + a * wide, dxRouted + r.token[a] * h);
      dWeightDispatched = splitColumn<T>(ops, returned.data(), r.dispatched(), h, nullptr);
    } else {
      for (int64_t a = 0; a < r.dispatched(); ++a)
        ops.add(h, dIn.data() + a * h, dxRouted + r.token[a] * h);
      dWeightDispatched.assign(dWeightTaken.begin(), dWeightTaken.begin() + r.dispatched());
    }
  }
  std::vector<double> dWeight(rows * k, 0.0);
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t j = 0; j < k; ++j)
      if (const int32_t a = r.position[t * k + j]; a >= 0)
        dWeight[t * k + j] = dWeightDispatched[a];

  // The router: the scores' gradient from the weights' and the auxiliary loss's, then the
  // logits' through the softmax (or sigmoid) with the z-loss's, then the router's input
  // gradient.
  {
    const std::vector<double> scores = toHost(ops, cache.saved[Scores].data(), rows * N);
    std::vector<double> dScores(rows * N, 0.0);
    for (int64_t t = 0; t < rows; ++t) {
      const double *ps = scores.data() + t * N;
      double *ds = dScores.data() + t * N;
      // With the routed scaling γ the weights are w_j = γ · s_j (/ S over the chosen when
      // normalised). Normalised: dL/ds_i = (γ dw_i − Σ_j dw_j · w_j) / S; else γ dw_i.
      const double gamma = s.routedScaling;
      if (s.normalizeTopK) {
        double sum = 0, weighted = 0;
        for (int64_t j = 0; j < k; ++j) {
          sum += ps[r.expert[t * k + j]];
          weighted += dWeight[t * k + j] * r.weight[t * k + j];
        }
        for (int64_t j = 0; j < k; ++j)
          ds[r.expert[t * k + j]] += (gamma * dWeight[t * k + j] - weighted) / sum;
      } else {
        for (int64_t j = 0; j < k; ++j)
          ds[r.expert[t * k + j]] += gamma * dWeight[t * k + j];
      }
    }
    if (s.auxLossCoefficient > 0)
      for (int64_t sample = 0; sample < n; ++sample) {
        // d(mean over the global batch's samples of the loss)/d score: lossScale · seq per
        // sample, times coefficient · N · f_e / seq, f_e over the sample's whole sequence.
        const double *fraction = r.fractions.data() + sample * N;
        for (int64_t t = sample * routedSeq(); t < (sample + 1) * routedSeq(); ++t)
          for (int64_t e = 0; e < N; ++e)
            dScores[t * N + e] +=
                cache.lossScale * s.auxLossCoefficient * static_cast<double>(N) * fraction[e];
      }
    std::vector<double> dLogits(rows * N);
    for (int64_t t = 0; t < rows; ++t) {
      const double *ps = scores.data() + t * N, *ds = dScores.data() + t * N;
      double *dl = dLogits.data() + t * N;
      if (s.sigmoidRouter) {
        for (int64_t e = 0; e < N; ++e)
          dl[e] = ds[e] * ps[e] * (1.0 - ps[e]);
      } else {
        double dot = 0;
        for (int64_t e = 0; e < N; ++e)
          dot += ps[e] * ds[e];
        for (int64_t e = 0; e < N; ++e)
          dl[e] = ps[e] * (ds[e] - dot);
      }
      // d(mean over the global batch's samples)/d logit: lossScale · seq per sample, times
      // the sample's coefficient / seq · d lse² / d logit.
      if (!r.zGradient.empty())
        for (int64_t e = 0; e < N; ++e)
          dl[e] += cache.lossScale * r.zGradient[t * N + e];
    }
    fromHost(ops, dLogits, stash[DLogits].data());
  }
  ops.gemm(false, true, rows, h, N, 1, stash[DLogits].data(), p + routerAt, 1, dxRouted);
  if (routesPart())
    addGathered(ops, n, dxRouted, dx.data());
  for (LayerCache<T> &unit : cache.parts)
    unit.inputOnly.clear();
  return dx;
}

template <typename T>
void Moe<T>::backwardWeight(Ops<T> &ops, const LayerCache<T> &cache, const T *x, const T *dy,
                            T *dp) const {
  const int64_t n = cache.samples, rows = n * routedSeq(), h = s.hidden, N = s.experts,
                f = s.expertFfn;
  const Routing &r = *std::static_pointer_cast<const Routing>(cache.host);
  const std::vector<Buffer<T>> &stash = cache.stash;
  if (shared)
    shared->backwardWeight(ops, cache.parts[0], x, gated() ? stash[DShared].data() : dy,
                           dp + sharedAt);
  // The router's, over this rank's tokens; where the load moves its bias, each expert's count
  // of those tokens' choices in the bias's slot, right after the router's weights; the gate's
  // over the same tokens. With T > 1 the group sums its members' in one all-reduce.
  {
    Buffer<T> mine;
    const T *routed = routedRows(ops, n, x, mine);
    const bool counts = loadBalancedBias() >= 0;
    std::vector<double> chosen;
    if (counts) {
      chosen.assign(N, 0.0);
      for (int32_t e : r.expert)
        chosen[e] += 1;
    }
    if (s.tensorParallel()) {
      const int64_t routerWidth = h * N + (counts ? N : 0), width = routerWidth + (gated() ? h : 0);
      Buffer<T> dRouter = transient(ops, width);
      ops.gemm(true, false, h, N, rows, 1, routed, stash[DLogits].data(), 0, dRouter.data());
      if (counts)
        fromHost(ops, chosen, dRouter.data() + h * N);
      if (gated())
        ops.gemm(true, false, h, 1, rows, 1, routed, stash[DGate].data(), 0,
                 dRouter.data() + routerWidth);
      ops.tensorGroup()->allReduce(width, dRouter.data());
      ops.add(routerWidth, dRouter.data(), dp + routerAt);
      if (gated())
        ops.add(h, dRouter.data() + routerWidth, dp + gateAt);
    } else {
      ops.gemm(true, false, h, N, rows, 1, routed, stash[DLogits].data(), 1, dp + routerAt);
      if (counts) {
        Buffer<T> summed = transient(ops, N);
        fromHost(ops, chosen, summed.data());
        ops.add(N, summed.data(), dp + biasAt);
      }
      if (gated())
        ops.gemm(true, false, h, 1, rows, 1, routed, stash[DGate].data(), 1, dp + gateAt);
    }
  }
  // Otherwise the sigmoid router's bias takes no gradient.
  // This rank's experts' weight gradients, over the tokens they took. Where the chain adds the
  // piece's gradients to double accumulators, each segment's (one member's tokens, the
  // GEMMs the reference runs for that member's sample) is added there on its own and the
  // piece's range cleared: an expert's sums over its group's members are then the reference's
  // sums over samples, in double, not a float sum of the members'.
  const T *in = cache.saved[Dispatched].data(), *g = cache.saved[G].data(),
          *dOut = stash[DOut].data(), *dUp = stash[DUp].data();
  for (const Routing::Segment &seg : r.segments) {
    T *dw = expertGradsAt(dp, seg.expert);
    const int64_t first = seg.first, count = seg.count;
    weightGradient(ops, count, h, up(), in + first * h, dUp + first * up(), dw,
                   s.otherBias ? dw + b1At : nullptr);
    // W2's output gradients are the tokens'; its bias, added weighted, takes them weighted.
    weightGradient<T>(ops, count, f, h, g + first * f, dOut + first * h, dw + w2At, nullptr);
    if (s.otherBias)
      for (int64_t a = first; a < first + count; ++a)
        ops.scaledAdd(h, static_cast<T>(r.takenWeight[a]), dOut + a * h, dw + b2At);
    if (double *sums = cache.expertAccumulators) {
      ops.accumulate(perExpert, dw, sums + (seg.expert - s.firstLocalExpert()) * perExpert);
      ops.fill(perExpert, T(0), dw);
    }
  }
}

template class Moe<float>;
template class Moe<double>;

} // namespace conduit::model
