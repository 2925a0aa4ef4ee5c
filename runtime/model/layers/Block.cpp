//===- Block.cpp - a pre-norm transformer block ----------------------------===//
//
// The order in which the block runs its units forward and backward, the tensors it keeps
// between them, and the one all-reduce of its norms' gradients with sequence parallelism.
//
//===----------------------------------------------------------------------===//

#include "runtime/model/layers/Block.h"

#include "runtime/model/layers/Attention.h"
#include "runtime/model/layers/LatentAttention.h"
#include "runtime/model/layers/Mlp.h"
#include "runtime/model/layers/Moe.h"
#include "runtime/model/layers/TensorSplit.h"

namespace conduit::model {

namespace {
// What the block keeps from its forward, by index: its input x, norm1's output h1 (the
// attention's input), the residual stream x2 and norm2's output h2 (the MLP's input), all on
// this rank's rows.
enum { X, H1, X2, H2, NumSaved };
// What its input gradient stashes between the units: the MLP's input gradient dh2 (norm2's
// output gradient), x2's gradient dx2 (the attention's output gradient) and the attention's
// input gradient dh1 (norm1's output gradient).
enum { DH2, DX2, DH1, NumStashed };
} // namespace

template <typename T>
Block<T>::Block(const GptShape &s, uint32_t recomputed, bool experts)
    : s(s), experts(experts), recomputeNorms(recomputed & runtime::kRecomputeLayerNorm), norm1(s),
      norm2(s),
      attention(s.latent() ? std::unique_ptr<Branch<T>>(std::make_unique<LatentAttention<T>>(
                                 s, recomputed & runtime::kRecomputeCoreAttention,
                                 recomputed & runtime::kRecomputeLatentUpProjection))
                           : std::make_unique<Attention<T>>(
                                 s, recomputed & runtime::kRecomputeCoreAttention)) {
  // The block's MLP: dense, or a mixture of experts.
  if (experts)
    mlp = std::make_unique<Moe<T>>(s, recomputed & runtime::kRecomputeMoeActivation);
  else
    mlp = std::make_unique<Mlp<T>>(s, recomputed & runtime::kRecomputeMlp);
  const int64_t sizes[NumParts] = {norm1.numParams(), attention->numParams(), norm2.numParams(),
                                   mlp->numParams()};
  for (int i = 0; i < NumParts; ++i)
    at[i + 1] = at[i] + sizes[i];
}

template <typename T> int64_t Block<T>::numParams() const { return at[NumParts]; }

template <typename T> std::vector<ParameterRun> Block<T>::slice() const {
  const Block whole(s.whole(), /*recomputed=*/0, experts); // what it recomputes moves nothing
  std::vector<ParameterRun> runs;
  norm1.slice(whole.at[Norm1], at[Norm1], runs);
  attention->slice(whole.at[Attend], at[Attend], runs);
  norm2.slice(whole.at[Norm2], at[Norm2], runs);
  mlp->slice(whole.at[FeedForward], at[FeedForward], runs);
  return runs;
}

template <typename T> void Block<T>::initialise(T *params, uint64_t seed, int64_t layer) const {
  Random random({seed, static_cast<uint64_t>(layer)});
  norm1.initialise(params + at[Norm1]);
  attention->initialise(params + at[Attend], random);
  norm2.initialise(params + at[Norm2]);
  mlp->initialise(params + at[FeedForward], random);
}

template <typename T>
void Block<T>::forward(Ops<T> &ops, const T *p, const T *x, const Tokens &batch, T *y,
                       LayerCache<T> &cache) const {
  const int64_t n = batch.samples, local = n * s.localSeq() * s.hidden;
  std::vector<Buffer<T>> &v = cache.saved;
  std::vector<LayerCache<T>> &c = cache.parts;
  cache.samples = n;
  v.clear();
  v.resize(NumSaved);
  c.clear();
  c.resize(NumParts);
  // Everything the block keeps first, in the units' order, then the compute. Recomputed norms
  // keep no output: each is working memory until the unit after it has read it.
  v[X] = ops.allocate(local);
  if (!recomputeNorms)
    v[H1] = ops.allocate(local);
  norm1.keep(ops, n, c[Norm1]);
  attention->keep(ops, n, c[Attend]);
  v[X2] = ops.allocate(local);
  if (!recomputeNorms)
    v[H2] = ops.allocate(local);
  norm2.keep(ops, n, c[Norm2]);
  mlp->keep(ops, n, c[FeedForward]);
  c[FeedForward].lossScale = batch.lossScale;
  ops.copy(local, x, v[X].data());
  if (recomputeNorms)
    v[H1] = transient(ops, local);
  norm1.forward(ops, p + at[Norm1], x, v[H1].data(), c[Norm1]);
  attention->forward(ops, p + at[Attend], v[H1].data(), x, v[X2].data(), c[Attend]);
  if (recomputeNorms) {
    v[H1].reset();
    v[H2] = transient(ops, local);
  }
  norm2.forward(ops, p + at[Norm2], v[X2].data(), v[H2].data(), c[Norm2]);
  mlp->forward(ops, p + at[FeedForward], v[H2].data(), v[X2].data(), y, c[FeedForward]);
  if (recomputeNorms)
    v[H2].reset();
}

template <typename T>
void Block<T>::recomputeNormOutputs(Ops<T> &ops, const T *p, LayerCache<T> &cache) const {
  // The forward's kernels on the kept inputs: the same outputs, bit for bit (and the same
  // statistics in the norms' caches). They live until the weight gradient reads them.
  const int64_t local = cache.samples * s.localSeq() * s.hidden;
  std::vector<Buffer<T>> &v = cache.saved;
  v[H1] = ops.allocate(local);
  norm1.forward(ops, p + at[Norm1], v[X].data(), v[H1].data(), cache.parts[Norm1]);
  v[H2] = ops.allocate(local);
  norm2.forward(ops, p + at[Norm2], v[X2].data(), v[H2].data(), cache.parts[Norm2]);
}

template <typename T>
void Block<T>::backwardInput(Ops<T> &ops, const T *p, LayerCache<T> &cache, const T *dy,
                             T *dx) const {
  const int64_t local = cache.samples * s.localSeq() * s.hidden;
  if (recomputeNorms)
    recomputeNormOutputs(ops, p, cache);
  const std::vector<Buffer<T>> &v = cache.saved;
  std::vector<LayerCache<T>> &c = cache.parts;
  std::vector<Buffer<T>> &g = cache.stash;
  g.clear();
  g.resize(NumStashed);
  // y = x2 + MLP(Norm2(x2)); the buffer dy came in is reused before the weight gradient.
  mlp->recompute(ops, p + at[FeedForward], v[H2].data(), c[FeedForward]);
  g[DH2] = mlp->backwardInput(ops, p + at[FeedForward], c[FeedForward], dy, /*dyKept=*/false);
  g[DX2] = ops.allocate(local);
  norm2.backwardInput(ops, p + at[Norm2], v[X2].data(), c[Norm2], g[DH2].data(), g[DX2].data());
  ops.add(local, dy, g[DX2].data());
  // x2 = x + Attention(Norm1(x)); the block keeps dx2 until its weight gradient.
  attention->recompute(ops, p + at[Attend], v[H1].data(), c[Attend]);
  g[DH1] = attention->backwardInput(ops, p + at[Attend], c[Attend], g[DX2].data(),
                                    /*dyKept=*/true);
  norm1.backwardInput(ops, p + at[Norm1], v[X].data(), c[Norm1], g[DH1].data(), dx);
  ops.add(local, g[DX2].data(), dx);
  // The weight gradients read neither the attention's inputs nor the activation's.
  for (LayerCache<T> &part : c)
    part.inputOnly.clear();
}

template <typename T>
void Block<T>::backwardWeight(Ops<T> &ops, const LayerCache<T> &cache, T *dp) const {
  const std::vector<Buffer<T>> &v = cache.saved;
  const std::vector<LayerCache<T>> &c = cache.parts;
  const std::vector<Buffer<T>> &g = cache.stash;
  const int64_t norm = s.normParams();
  PartialGradients<T> norms(ops, s.sequenceParallel, 2 * norm);
  mlp->backwardWeight(ops, c[FeedForward], v[H2].data(), /*dy: not kept*/ nullptr,
                      dp + at[FeedForward]);
  norm2.backwardWeight(ops, v[X2].data(), c[Norm2], g[DH2].data(), norms.at(dp + at[Norm2], norm));
  attention->backwardWeight(ops, c[Attend], v[H1].data(), g[DX2].data(), dp + at[Attend]);
  norm1.backwardWeight(ops, v[X].data(), c[Norm1], g[DH1].data(), norms.at(dp + at[Norm1], norm));
  norms.reduce();
}

template class Block<float>;
template class Block<double>;

} // namespace conduit::model
