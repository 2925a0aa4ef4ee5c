//===- LatentAttention.cpp - multi-head latent attention -------------------===//
//
// The two latents and their norms, the heads assembled for the attention kernel, the output
// projection; their input and weight gradients; this rank's heads of them over a tensor group.
//
//===----------------------------------------------------------------------===//

#include "runtime/model/layers/LatentAttention.h"

#include "runtime/model/layers/Attention.h"
#include "runtime/model/layers/Initialise.h"
#include "runtime/model/layers/TensorSplit.h"

#include <algorithm>

namespace conduit::model {

namespace {
// The latents' RMSNorms take DeepSeek's epsilon whatever the model's (Hugging Face's
// DeepseekV3RMSNorm default for q_a_layernorm and kv_a_layernorm; rms_norm_eps is the blocks').
constexpr double kLatentNormEps = 1e-6;

// What the forward keeps, by index: for the input gradient only, the kernel's q, k and v
// (rotated, values padded; empty when recomputed), the probabilities (empty with selective
// checkpointing), each latent before its norm with the norm's statistics (the query latent's
// empty without one) and the shared rotary key before its rotation; for both halves, the normalised
// latents (the up projections' inputs) and the attention's output (Wo's input); the latents, their
// statistics and the rotary key on the rows they are computed on (latentRows()). The input
// gradient stashes the output gradient where the block does not keep it (empty otherwise), the
// output gradients of the up projections (q, kv) and of the down projections (the key/value
// one's; the query one's where there is a query latent), and the two gains' gradients.
enum { Qkv, Probs, QRaw, QRstd, KvRaw, KvRstd, KRope, NumInputOnly };
enum { QLatent, KvLatent, Att, NumSaved };
enum { StashDy, StashDq, StashDkv, StashDdown, StashDqRaw, StashDgQ, StashDgKv, NumStashed };
} // namespace

template <typename T>
LatentAttention<T>::LatentAttention(const GptShape &s, bool recomputeAttention, bool recomputeHeads)
    : s(s), recomputeAttention(recomputeAttention), recomputeHeads(recomputeHeads) {
  auto take = [&](int64_t n, bool present = true) {
    const int64_t here = present ? total : -1;
    total += present ? n : 0;
    return here;
  };
  const int64_t h = s.hidden;
  wDq = take(h * s.qLora, s.qLora > 0);
  gQ = take(s.qLora, s.qLora > 0);
  wUq = take(s.qLora * qWidth(), s.qLora > 0);
  wQ = take(h * qWidth(), s.qLora == 0);
  wDkv = take(h * downWidth());
  gKv = take(s.kvLora);
  wUkv = take(s.kvLora * kvWidth());
  wO = take(heads() * s.vHead * h);
  bO = take(h, s.otherBias);
}

template <typename T>
void LatentAttention<T>::slice(int64_t wholeAt, int64_t localAt,
                               std::vector<ParameterRun> &runs) const {
  if (!s.tensorParallel()) {
    addRun(runs, wholeAt, localAt, total);
    return;
  }
  const LatentAttention whole(s.whole(), false, false);
  const int64_t h = s.hidden, r = s.tensorRank;
  auto replicated = [&](int64_t wholeParam, int64_t localParam, int64_t n) {
    if (localParam >= 0)
      addRun(runs, wholeAt + wholeParam, localAt + localParam, n);
  };
  // Column-parallel by heads: this rank's `width` columns of each of `rows` rows.
  auto byHeads = [&](int64_t wholeParam, int64_t localParam, int64_t rows, int64_t wholeWidth,
                     int64_t width) {
    if (localParam < 0)
      return;
    for (int64_t i = 0; i < rows; ++i)
      addRun(runs, wholeAt + wholeParam + i * wholeWidth + r * width,
             localAt + localParam + i * width, width);
  };
  replicated(whole.wDq, wDq, h * s.qLora);
  replicated(whole.gQ, gQ, s.qLora);
  byHeads(whole.wUq, wUq, s.qLora, whole.qWidth(), qWidth());
  byHeads(whole.wQ, wQ, h, whole.qWidth(), qWidth());
  replicated(whole.wDkv, wDkv, h * downWidth());
  replicated(whole.gKv, gKv, s.kvLora);
  byHeads(whole.wUkv, wUkv, s.kvLora, whole.kvWidth(), kvWidth());
  // Row-parallel: this rank's heads' rows of Wo.
  const int64_t out = heads() * s.vHead * h;
  addRun(runs, wholeAt + whole.wO + r * out, localAt + wO, out);
  replicated(whole.bO, bO, h);
}

template <typename T> void LatentAttention<T>::initialise(T *params, Random &random) const {
  std::fill(params, params + total, T(0));
  const int64_t h = s.hidden;
  if (s.qLora > 0) {
    fillNormal(params + wDq, h * s.qLora, random);
    std::fill(params + gQ, params + gQ + s.qLora, T(1));
    fillNormal(params + wUq, s.qLora * qWidth(), random);
  } else {
    fillNormal(params + wQ, h * qWidth(), random);
  }
  fillNormal(params + wDkv, h * downWidth(), random);
  std::fill(params + gKv, params + gKv + s.kvLora, T(1));
  fillNormal(params + wUkv, s.kvLora * kvWidth(), random);
  fillNormal(params + wO, heads() * s.vHead * h, random);
}

template <typename T>
void LatentAttention<T>::keep(Ops<T> &ops, int64_t samples, LayerCache<T> &cache) const {
  const int64_t rows = samples * s.seq, latent = latentRows(samples);
  startCache(cache, samples, NumInputOnly, NumSaved);
  if (!recomputeHeads) // else recompute() allocates them before the input gradient
    cache.inputOnly[Qkv] = ops.allocate(rows * 3 * qWidth());
  cache.inputOnly[Probs] = ops.allocate(recomputeAttention ? 0 : probsSize(samples));
  if (s.qLora > 0) {
    cache.inputOnly[QRaw] = ops.allocate(latent * s.qLora);
    cache.inputOnly[QRstd] = ops.allocate(latent);
    cache.saved[QLatent] = ops.allocate(latent * s.qLora);
  }
  cache.inputOnly[KvRaw] = ops.allocate(latent * s.kvLora);
  cache.inputOnly[KvRstd] = ops.allocate(latent);
  cache.inputOnly[KRope] = ops.allocate(latent * s.qkRope);
  cache.saved[KvLatent] = ops.allocate(latent * s.kvLora);
  cache.saved[Att] = ops.allocate(rows * heads() * s.vHead);
}

template <typename T>
typename LatentAttention<T>::WholeLatents
LatentAttention<T>::wholeLatents(Ops<T> &ops, const LayerCache<T> &cache, bool withRope) const {
  const std::vector<Buffer<T>> &in = cache.inputOnly, &kept = cache.saved;
  WholeLatents whole;
  if (!shardedLatents()) {
    whole.q = s.qLora > 0 ? kept[QLatent].data() : nullptr;
    whole.kv = kept[KvLatent].data();
    whole.rope = withRope ? in[KRope].data() : nullptr;
    return whole;
  }
  // One gather of the rows [q latent | kv latent | rotary key], then each part apart.
  const T *parts[3] = {kept[QLatent].data(), kept[KvLatent].data(),
                       withRope ? in[KRope].data() : nullptr};
  const int64_t widths[3] = {s.qLora, s.kvLora, withRope ? s.qkRope : 0};
  const int64_t n = cache.samples, local = latentRows(n), rows = n * s.seq,
                width = widths[0] + widths[1] + widths[2];
  Buffer<T> all = transient(ops, rows * width);
  {
    Buffer<T> mine = transient(ops, local * width);
    for (int64_t i = 0, at = 0; i < 3; at += widths[i++])
      ops.copyRows(local, widths[i], parts[i], widths[i], mine.data() + at, width);
    gatherSequence(ops, s, n, width, mine.data(), all.data());
  }
  for (int64_t i = 0, at = 0; i < 3; at += widths[i++]) {
    whole.gathered[i] = transient(ops, rows * widths[i]);
    ops.copyRows(rows, widths[i], all.data() + at, width, whole.gathered[i].data(), widths[i]);
  }
  whole.q = whole.gathered[0].data();
  whole.kv = whole.gathered[1].data();
  whole.rope = withRope ? whole.gathered[2].data() : nullptr;
  return whole;
}

// The kernel's rows are [q heads | k heads | v heads], each head d wide: a query head is the
// head's nope part of q and its rotated rope part; a key head the head's nope part of kv and
// the shared rotated key; a value head the head's value part of kv, then zeros.
template <typename T>
void LatentAttention<T>::assemble(Ops<T> &ops, int64_t rows, const T *q, const T *kv, const T *rope,
                                  T *qkv) const {
  const int64_t heads = this->heads(), dn = s.qkNope, dr = s.qkRope, dv = s.vHead, w = d(),
                stride = 3 * qWidth(), kvHead = dn + dv;
  ops.fill(rows * stride, T(0), qkv);
  for (int64_t hd = 0; hd < heads; ++hd) {
    T *qh = qkv + hd * w, *kh = qh + qWidth(), *vh = kh + qWidth();
    ops.copyRows(rows, dn, q + hd * w, qWidth(), qh, stride);
    ops.copyRows(rows, dr, rope + hd * dr, ropeWidth(), qh + dn, stride);
    ops.copyRows(rows, dn, kv + hd * kvHead, kvWidth(), kh, stride);
    ops.copyRows(rows, dr, rope + heads * dr, ropeWidth(), kh + dn, stride);
    ops.copyRows(rows, dv, kv + hd * kvHead + dn, kvWidth(), vh, stride);
  }
}

// The inverse: the nope and value parts go to dq and dkv; the rope parts to drope, the
// queries' per head and the shared key's summed over the heads in head order.
template <typename T>
void LatentAttention<T>::disassemble(Ops<T> &ops, int64_t rows, const T *dqkv, T *dq, T *dkv,
                                     T *drope) const {
  const int64_t heads = this->heads(), dn = s.qkNope, dr = s.qkRope, dv = s.vHead, w = d(),
                stride = 3 * qWidth(), kvHead = dn + dv;
  Buffer<T> dk = transient(ops, rows * dr), part = transient(ops, rows * dr);
  ops.fill(rows * ropeWidth(), T(0), drope);
  for (int64_t hd = 0; hd < heads; ++hd) {
    const T *qh = dqkv + hd * w, *kh = qh + qWidth(), *vh = kh + qWidth();
    ops.copyRows(rows, dn, qh, stride, dq + hd * w, qWidth());
    ops.copyRows(rows, dr, qh + dn, stride, drope + hd * dr, ropeWidth());
    ops.copyRows(rows, dn, kh, stride, dkv + hd * kvHead, kvWidth());
    ops.copyRows(rows, dv, vh, stride, dkv + hd * kvHead + dn, kvWidth());
    ops.copyRows(rows, dr, kh + dn, stride, hd == 0 ? dk.data() : part.data(), dr);
    if (hd > 0)
      ops.add(rows * dr, part.data(), dk.data());
  }
  ops.copyRows(rows, dr, dk.data(), dr, drope + heads * dr, ropeWidth());
}

template <typename T>
void LatentAttention<T>::latents(Ops<T> &ops, const T *p, const T *x, LayerCache<T> &cache) const {
  const int64_t rows = latentRows(cache.samples), h = s.hidden;
  std::vector<Buffer<T>> &in = cache.inputOnly, &kept = cache.saved;
  if (s.qLora > 0) {
    ops.gemm(false, false, rows, s.qLora, h, 1, x, p + wDq, 0, in[QRaw].data());
    ops.rmsNormForward(rows, s.qLora, in[QRaw].data(), p + gQ, kLatentNormEps, kept[QLatent].data(),
                       in[QRstd].data());
  }
  Buffer<T> down = transient(ops, rows * downWidth());
  ops.gemm(false, false, rows, downWidth(), h, 1, x, p + wDkv, 0, down.data());
  ops.copyRows(rows, s.kvLora, down.data(), downWidth(), in[KvRaw].data(), s.kvLora);
  ops.copyRows(rows, s.qkRope, down.data() + s.kvLora, downWidth(), in[KRope].data(), s.qkRope);
  ops.rmsNormForward(rows, s.kvLora, in[KvRaw].data(), p + gKv, kLatentNormEps,
                     kept[KvLatent].data(), in[KvRstd].data());
}

template <typename T>
void LatentAttention<T>::queriesKeysValues(Ops<T> &ops, const T *p, const T *x,
                                           const WholeLatents &latent, int64_t n, T *qkv) const {
  const int64_t rows = n * s.seq, heads = this->heads(), dr = s.qkRope;
  Buffer<T> q = transient(ops, rows * qWidth());
  // The queries carry the softmax scale's extension factor (Hugging Face's DeepseekV3Attention
  // multiplies its scaling by it): the scores are q · k / sqrt(dn + dr) times the factor.
  const T factor = static_cast<T>(s.ropeScaling.latentSoftmaxFactor());
  if (s.qLora > 0)
    ops.gemm(false, false, rows, qWidth(), s.qLora, factor, latent.q, p + wUq, 0, q.data());
  else
    ops.gemm(false, false, rows, qWidth(), s.hidden, factor, x, p + wQ, 0, q.data());
  Buffer<T> kv = transient(ops, rows * kvWidth());
  ops.gemm(false, false, rows, kvWidth(), s.kvLora, 1, latent.kv, p + wUkv, 0, kv.data());
  // The rope parts, rotated together: the query heads' and the shared key.
  Buffer<T> rope = transient(ops, rows * ropeWidth());
  ops.fill(rows * ropeWidth(), T(0), rope.data());
  for (int64_t hd = 0; hd < heads; ++hd)
    ops.copyRows(rows, dr, q.data() + hd * d() + s.qkNope, qWidth(), rope.data() + hd * dr,
                 ropeWidth());
  ops.copyRows(rows, dr, latent.rope, dr, rope.data() + heads * dr, ropeWidth());
  if (s.rotary && dr > 0)
    ops.rotaryForward(n, s.seq, heads, 1, dr, s.rotaryPositions(), rope.data());
  assemble(ops, rows, q.data(), kv.data(), rope.data(), qkv);
}

template <typename T>
void LatentAttention<T>::forward(Ops<T> &ops, const T *p, const T *x, const T *residual, T *y,
                                 LayerCache<T> &cache) const {
  const int64_t n = cache.samples, rows = n * s.seq, heads = this->heads();
  std::vector<Buffer<T>> &in = cache.inputOnly, &kept = cache.saved;
  // Recomputed, q, k and v are working memory until the attention has read them.
  Buffer<T> working = recomputeHeads ? transient(ops, rows * 3 * qWidth()) : Buffer<T>();
  T *qkv = recomputeHeads ? working.data() : in[Qkv].data();
  {
    // The latents of this rank's rows, gathered; or of the whole sequence, the input gathered.
    Buffer<T> gathered;
    const T *input = shardedLatents() ? x : wholeSequence(ops, s, n, x, gathered);
    latents(ops, p, input, cache);
    queriesKeysValues(ops, p, input, wholeLatents(ops, cache, /*withRope=*/true), n, qkv);
  }
  {
    Buffer<T> probs = recomputeAttention ? transient(ops, probsSize(n)) : Buffer<T>();
    Buffer<T> out = transient(ops, rows * qWidth());
    ops.attentionForward(n, s.seq, heads, heads, d(), qkv,
                         recomputeAttention ? probs.data() : in[Probs].data(), out.data());
    // Each head's output without the values' padding.
    ops.copyRows(rows * heads, s.vHead, out.data(), d(), kept[Att].data(), s.vHead);
  }
  working.reset();
  rowParallel(ops, s, n, heads * s.vHead, kept[Att].data(), p + wO, bO >= 0 ? p + bO : nullptr,
              residual, y);
}

template <typename T>
void LatentAttention<T>::recompute(Ops<T> &ops, const T *p, const T *x,
                                   LayerCache<T> &cache) const {
  if (!recomputeHeads)
    return;
  // The forward's kernels on the kept latents: the same bits, kept until the input gradient
  // is done, as the forward's would have been.
  cache.inputOnly[Qkv] = ops.allocate(cache.samples * s.seq * 3 * qWidth());
  // Without a query latent the queries come from the whole sequence's input.
  Buffer<T> gathered;
  const T *whole = s.qLora > 0 ? nullptr : wholeSequence(ops, s, cache.samples, x, gathered);
  queriesKeysValues(ops, p, whole, wholeLatents(ops, cache, /*withRope=*/true), cache.samples,
                    cache.inputOnly[Qkv].data());
}

template <typename T>
Buffer<T> LatentAttention<T>::backwardInput(Ops<T> &ops, const T *p, LayerCache<T> &cache,
                                            const T *dy, bool dyKept) const {
  const int64_t n = cache.samples, rows = n * s.seq, latent = latentRows(n), h = s.hidden,
                heads = this->heads(), dr = s.qkRope, values = heads * s.vHead;
  const std::vector<Buffer<T>> &in = cache.inputOnly;
  std::vector<Buffer<T>> &g = cache.stash;
  g.clear();
  g.resize(NumStashed);
  g[StashDy] = outputGradient(ops, s, n, dy, dyKept);
  const T *whole = g[StashDy].empty() ? dy : g[StashDy].data();
  g[StashDq] = ops.allocate(rows * qWidth());
  g[StashDkv] = ops.allocate(rows * kvWidth());
  T *dq = g[StashDq].data(), *dkv = g[StashDkv].data();
  // The shared rotary key's gradient, summed over this rank's heads.
  Buffer<T> dKey = transient(ops, rows * dr);
  {
    Buffer<T> dqkv = transient(ops, rows * 3 * qWidth());
    {
      // Wo's input gradient, padded as the kernel's output was.
      Buffer<T> datt = transient(ops, rows * qWidth());
      {
        Buffer<T> dout = transient(ops, rows * values);
        ops.gemm(false, true, rows, values, h, 1, whole, p + wO, 0, dout.data());
        ops.fill(rows * qWidth(), T(0), datt.data());
        ops.copyRows(rows * heads, s.vHead, dout.data(), s.vHead, datt.data(), d());
      }
      Buffer<T> probs;
      ops.attentionBackward(n, s.seq, heads, heads, d(), in[Qkv].data(),
                            attentionProbabilities(ops, n, s.seq, heads, heads, d(), in[Qkv].data(),
                                                   in[Probs], recomputeAttention, probs),
                            datt.data(), dqkv.data());
    }
    Buffer<T> drope = transient(ops, rows * ropeWidth());
    disassemble(ops, rows, dqkv.data(), dq, dkv, drope.data());
    dqkv.reset();
    if (s.rotary && dr > 0)
      ops.rotaryBackward(n, s.seq, heads, 1, dr, s.rotaryPositions(), drope.data());
    for (int64_t hd = 0; hd < heads; ++hd)
      ops.copyRows(rows, dr, drope.data() + hd * dr, ropeWidth(), dq + hd * d() + s.qkNope,
                   qWidth());
    ops.copyRows(rows, dr, drope.data() + heads * dr, ropeWidth(), dKey.data(), dr);
    // The queries' extension factor (queriesKeysValues), on their gradient.
    if (const double factor = s.ropeScaling.latentSoftmaxFactor(); factor != 1) {
      const std::vector<T> factors(rows, static_cast<T>(factor));
      ops.scaleRows(rows, qWidth(), factors.data(), dq);
    }
  }
  // The normalised latents' gradients through the up projections: over a tensor group, this
  // rank's heads' part. With the latents on each rank's rows, one reduce-scatter of the rows
  // [q latent | kv latent | rotary key] sums them and leaves the rank its rows.
  Buffer<T> dQLatent = s.qLora > 0 ? transient(ops, rows * s.qLora) : Buffer<T>();
  Buffer<T> dKvLatent = transient(ops, rows * s.kvLora);
  if (s.qLora > 0)
    ops.gemm(false, true, rows, s.qLora, qWidth(), 1, dq, p + wUq, 0, dQLatent.data());
  ops.gemm(false, true, rows, s.kvLora, kvWidth(), 1, dkv, p + wUkv, 0, dKvLatent.data());
  if (shardedLatents()) {
    Buffer<T> *parts[3] = {&dQLatent, &dKvLatent, &dKey};
    const int64_t widths[3] = {s.qLora, s.kvLora, dr}, width = widths[0] + widths[1] + widths[2];
    Buffer<T> mine = transient(ops, latent * width);
    {
      Buffer<T> all = transient(ops, rows * width);
      for (int64_t i = 0, at = 0; i < 3; at += widths[i++])
        ops.copyRows(rows, widths[i], parts[i]->data(), widths[i], all.data() + at, width);
      reduceScatterSequence(ops, s, n, width, all.data(), mine.data());
    }
    for (int64_t i = 0, at = 0; i < 3; at += widths[i++]) {
      *parts[i] = transient(ops, latent * widths[i]);
      ops.copyRows(latent, widths[i], mine.data() + at, width, parts[i]->data(), widths[i]);
    }
  }
  // Through each latent's norm, on the rows the latents were computed on: its gain's gradient
  // stashed, the gradient of its input (`raw`, rank wide) into `dRaw`, `dRawStride` apart.
  auto throughNorm = [&](int64_t rank, const T *dLatent, int64_t gain, int raw, int rstd,
                         int stashGain, T *dRaw, int64_t dRawStride) {
    Buffer<T> dIn = transient(ops, latent * rank);
    g[stashGain] = ops.allocate(rank);
    ops.fill(rank, T(0), g[stashGain].data());
    ops.rmsNormBackwardWeight(latent, rank, in[raw].data(), in[rstd].data(), dLatent,
                              g[stashGain].data());
    ops.rmsNormBackwardInput(latent, rank, in[raw].data(), p + gain, in[rstd].data(), dLatent,
                             dIn.data());
    ops.copyRows(latent, rank, dIn.data(), rank, dRaw, dRawStride);
  };
  g[StashDdown] = ops.allocate(latent * downWidth());
  T *ddown = g[StashDdown].data();
  ops.copyRows(latent, dr, dKey.data(), dr, ddown + s.kvLora, downWidth());
  throughNorm(s.kvLora, dKvLatent.data(), gKv, KvRaw, KvRstd, StashDgKv, ddown, downWidth());
  if (s.qLora > 0) {
    g[StashDqRaw] = ops.allocate(latent * s.qLora);
    throughNorm(s.qLora, dQLatent.data(), gQ, QRaw, QRstd, StashDgQ, g[StashDqRaw].data(), s.qLora);
  }
  dKey.reset();
  dQLatent.reset();
  dKvLatent.reset();
  // The input gradient once the working memory is released: through both down projections (or
  // the queries' direct one). On the rank's own rows it is whole; else, over a tensor group,
  // the sum of the ranks' parts (their heads'), this rank's rows of it.
  Buffer<T> dx = ops.allocate(n * s.localSeq() * h);
  const bool partial = !shardedLatents() && s.sequenceParallel;
  Buffer<T> sum = partial ? transient(ops, rows * h) : Buffer<T>();
  T *out = partial ? sum.data() : dx.data();
  ops.gemm(false, true, latent, h, downWidth(), 1, ddown, p + wDkv, 0, out);
  if (s.qLora > 0)
    ops.gemm(false, true, latent, h, s.qLora, 1, g[StashDqRaw].data(), p + wDq, 1, out);
  else
    ops.gemm(false, true, rows, h, qWidth(), 1, dq, p + wQ, 1, out);
  if (!shardedLatents())
    reduceRows(ops, s, n, out, dx.data());
  return dx;
}

template <typename T>
void LatentAttention<T>::backwardWeight(Ops<T> &ops, const LayerCache<T> &cache, const T *x,
                                        const T *dy, T *dp) const {
  const int64_t n = cache.samples, rows = n * s.seq, latent = latentRows(n), h = s.hidden;
  const std::vector<Buffer<T>> &g = cache.stash, &kept = cache.saved;
  const T *whole = g[StashDy].empty() ? dy : g[StashDy].data();
  T *const noBias = nullptr;
  weightGradient(ops, rows, heads() * s.vHead, h, kept[Att].data(), whole, dp + wO,
                 bO >= 0 ? dp + bO : noBias);
  // The up projections read the whole sequence's normalised latents (gathered again when each
  // rank keeps its rows'); the down projections the input of the rows the latents were
  // computed on (without a query latent the whole sequence's, gathered again with sequence
  // parallelism). Their gradients and the gains' are this rank's part over a tensor group.
  const WholeLatents up = wholeLatents(ops, cache, /*withRope=*/false);
  weightGradient(ops, rows, s.kvLora, kvWidth(), up.kv, g[StashDkv].data(), dp + wUkv, noBias);
  Buffer<T> gathered;
  const T *input = shardedLatents() ? x : wholeSequence(ops, s, n, x, gathered);
  PartialGradients<T> replicated(ops, s.tensorParallel(), replicatedParams());
  ops.add(s.kvLora, g[StashDgKv].data(), replicated.at(dp + gKv, s.kvLora));
  weightGradient(ops, latent, h, downWidth(), input, g[StashDdown].data(),
                 replicated.at(dp + wDkv, h * downWidth()), noBias);
  if (s.qLora > 0) {
    weightGradient(ops, rows, s.qLora, qWidth(), up.q, g[StashDq].data(), dp + wUq, noBias);
    ops.add(s.qLora, g[StashDgQ].data(), replicated.at(dp + gQ, s.qLora));
    weightGradient(ops, latent, h, s.qLora, input, g[StashDqRaw].data(),
                   replicated.at(dp + wDq, h * s.qLora), noBias);
  } else {
    weightGradient(ops, rows, h, qWidth(), input, g[StashDq].data(), dp + wQ, noBias);
  }
  replicated.reduce();
}

template class LatentAttention<float>;
template class LatentAttention<double>;

} // namespace conduit::model
