//===- Gpt.cpp - the GPT-style decoder the runtime trains -----------------===//

#include "runtime/model/Gpt.h"

#include "runtime/model/Random.h"
#include "runtime/plan/Limits.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace conduit::model {

absl::StatusOr<GptShape> GptShape::fromPlan(const runtime::Plan &plan) {
  if (!plan.transformer)
    return absl::FailedPreconditionError(
        "the plan's model is a layer list, not a transformer; conduit-run trains GPT-style "
        "and Llama-style transformers only");
  const runtime::Transformer &t = *plan.transformer;
  // readPlan bounds these; a plan built in memory may not have been read.
  const struct {
    const char *key;
    int64_t value, most;
  } dimensions[] = {{"num_layers", t.numLayers, limits::kMaxLayers},
                    {"hidden_size", t.hiddenSize, limits::kMaxHidden},
                    {"num_heads", t.numHeads, limits::kMaxHeads},
                    {"ffn_hidden_size", t.ffnHiddenSize, limits::kMaxFfn},
                    {"seq_length", t.seqLength, limits::kMaxSeqLength},
                    {"vocab_size", t.vocabSize, limits::kMaxVocab}};
  for (const auto &d : dimensions)
    if (d.value < 1 || d.value > d.most)
      return absl::InvalidArgumentError(absl::StrCat("the model's ", d.key, " is ", d.value,
                                                     "; it must lie between 1 and ", d.most));
  const struct {
    const char *key;
    uint8_t value, most;
  } kinds[] = {
      {"mlp", t.mlp, 1}, {"norm", t.norm, 1}, {"position", t.position, 1}, {"bias", t.bias, 2}};
  for (const auto &k : kinds)
    if (k.value > k.most)
      return absl::InvalidArgumentError(absl::StrCat("the model's ", k.key, " kind is ",
                                                     int(k.value), "; conduit-run knows 0 to ",
                                                     int(k.most)));
  if (t.hiddenSize % t.numHeads != 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "the hidden size ", t.hiddenSize, " is not a multiple of the head count ", t.numHeads,
        "; compile the job again with model.hidden_size a multiple of model.num_heads"));
  if (t.numKvHeads < 1 || t.numKvHeads > t.numHeads || t.numHeads % t.numKvHeads != 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "the model's ", t.numKvHeads, " key/value heads do not divide its ", t.numHeads,
        " attention heads; compile the job again with model.num_kv_heads a divisor of "
        "model.num_heads"));
  const bool rotary = t.position == 1;
  if (rotary && (t.hiddenSize / t.numHeads) % 2 != 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "rotary positions rotate pairs of dimensions, but the head dimension hidden_size / "
        "num_heads = ",
        t.hiddenSize / t.numHeads,
        " is odd; compile the job again with model.hidden_size / model.num_heads even"));
  if (rotary && !(std::isfinite(t.ropeTheta) && t.ropeTheta > 0))
    return absl::InvalidArgumentError(
        absl::StrCat("the model's rotary base is ", t.ropeTheta,
                     "; compile the job again with model.rope_theta a positive number"));
  if (!(std::isfinite(t.normEps) && t.normEps > 0))
    return absl::InvalidArgumentError(
        absl::StrCat("the model's norm epsilon is ", t.normEps,
                     "; compile the job again with model.norm_eps a positive number"));
  const int64_t tensor = plan.config.tensor;
  if (tensor < 1)
    return absl::InvalidArgumentError(
        absl::StrCat("the plan's tensor-parallel size is ", tensor, "; it must be at least 1"));
  const struct {
    const char *key;
    int64_t value;
  } split[] = {{"model.num_heads", t.numHeads},
               {"model.num_kv_heads", t.numKvHeads},
               {"model.ffn_hidden_size", t.ffnHiddenSize},
               {"model.vocab_size", t.vocabSize},
               {"model.seq_length", plan.config.sequenceParallel ? t.seqLength : tensor}};
  for (const auto &d : split)
    if (d.value % tensor != 0)
      return absl::InvalidArgumentError(
          absl::StrCat("tensor parallelism splits ", d.key, " (", d.value, ") over ", tensor,
                       " ranks; compile the job again with parallelism.tensor dividing it"));
  GptShape shape;
  shape.tensorSize = tensor;
  shape.sequenceParallel = plan.config.sequenceParallel && tensor > 1;
  shape.blocks = t.numLayers;
  shape.hidden = t.hiddenSize;
  shape.heads = t.numHeads;
  shape.kvHeads = t.numKvHeads;
  shape.ffn = t.ffnHiddenSize;
  shape.seq = t.seqLength;
  shape.vocab = t.vocabSize;
  shape.qkvBias = t.bias != 2;
  shape.otherBias = t.bias == 0;
  shape.gated = t.mlp == 1;
  shape.rmsNorm = t.norm == 1;
  shape.rotary = rotary;
  shape.tied = t.tieEmbeddings;
  shape.ropeTheta = t.ropeTheta;
  shape.normEps = t.normEps;
  return shape;
}

std::optional<int64_t> GptShape::activationElements(int64_t samples, int64_t blocks,
                                                    bool head) const {
  using limits::checkedAdd;
  using limits::checkedMul;
  // What Block::forward and Head::forward save (see their `sizes`), per sample, plus each
  // layer's input and output. Per block row: 7h (x, the two norms' outputs, the attention
  // output, the residual x2; the layer's input and output), the qkv projection, the MLP's
  // first projection (twice as wide for SwiGLU) and its activation, and the norms' 4
  // statistics (RMSNorm keeps 2; the bound counts 4).
  const std::optional<int64_t> row = checkedMul(seq, hidden),
                               attention = checkedMul(heads, seq, seq),
                               blockRows =
                                   checkedMul(seq, 7 * hidden + qkvWidth() + upWidth() + ffn + 4),
                               headRows = checkedMul(seq, 3 * hidden + 2 + 2 * vocab);
  if (!row || !attention || !blockRows || !headRows)
    return std::nullopt;
  std::optional<int64_t> block = checkedAdd(*blockRows, *attention);
  std::optional<int64_t> chain = block ? checkedMul(blocks, *block) : std::nullopt;
  if (chain && head)
    chain = checkedAdd(*chain, *headRows);
  return chain ? checkedMul(samples, *chain) : std::nullopt;
}

namespace {

constexpr double kInitStd = 0.02;

/// `n` elements that live only while one layer computes (counted as working memory).
template <typename T> Buffer<T> transient(Ops<T> &ops, int64_t n) {
  MemoryScope scope(ops.memory(), MemoryUse::Working);
  return ops.allocate(n);
}

/// The tensor group of `ops`, which a tensor-parallel layer needs.
template <typename T> TensorGroup<T> &group(Ops<T> &ops) { return *ops.tensorGroup(); }

/// full [samples × seq × width] from every rank's sequence shard [samples × seq/T × width]:
/// the group's all-gather, whose result is rank-major, put back in sample order.
template <typename T>
void gatherSequence(Ops<T> &ops, const GptShape &s, int64_t samples, int64_t width, const T *shard,
                    T *full) {
  const int64_t chunk = s.localSeq() * width, ranks = s.tensorSize;
  if (samples == 1) {
    group(ops).allGather(chunk, shard, full);
    return;
  }
  Buffer<T> byRank = transient(ops, ranks * samples * chunk);
  group(ops).allGather(samples * chunk, shard, byRank.data());
  for (int64_t r = 0; r < ranks; ++r)
    for (int64_t n = 0; n < samples; ++n)
      ops.copy(chunk, byRank.data() + (r * samples + n) * chunk, full + (n * ranks + r) * chunk);
}

/// This rank's sequence shard of the group's sum of `full` [samples × seq × width].
template <typename T>
void reduceScatterSequence(Ops<T> &ops, const GptShape &s, int64_t samples, int64_t width,
                           const T *full, T *shard) {
  const int64_t chunk = s.localSeq() * width, ranks = s.tensorSize;
  if (samples == 1) {
    group(ops).reduceScatter(chunk, full, shard);
    return;
  }
  Buffer<T> byRank = transient(ops, ranks * samples * chunk);
  for (int64_t r = 0; r < ranks; ++r)
    for (int64_t n = 0; n < samples; ++n)
      ops.copy(chunk, full + (n * ranks + r) * chunk, byRank.data() + (r * samples + n) * chunk);
  group(ops).reduceScatter(samples * chunk, byRank.data(), shard);
}

/// The whole-sequence rows of a row-parallel projection's partial sums `partial` [samples ×
/// seq × h], summed over the group into `out`: in place (out = partial) without sequence
/// parallelism, else this rank's sequence shard.
template <typename T>
void reduceRows(Ops<T> &ops, const GptShape &s, int64_t samples, T *partial, T *out) {
  if (s.sequenceParallel) {
    reduceScatterSequence(ops, s, samples, s.hidden, partial, out);
  } else {
    group(ops).allReduce(samples * s.seq * s.hidden, partial);
    if (partial != out)
      ops.copy(samples * s.seq * s.hidden, partial, out);
  }
}

/// Host token ids mapped to this rank's vocabulary rows: id − first, or −1 for another rank's.
std::vector<int32_t> localTokens(const GptShape &s, const int32_t *tokens, int64_t n) {
  const int64_t first = s.tensorRank * s.localVocab(), end = first + s.localVocab();
  std::vector<int32_t> out(n);
  for (int64_t i = 0; i < n; ++i)
    out[i] = tokens[i] >= first && tokens[i] < end ? static_cast<int32_t>(tokens[i] - first) : -1;
  return out;
}

template <typename T> void fillNormal(T *p, int64_t n, Random &random) {
  for (int64_t i = 0; i < n; ++i)
    p[i] = static_cast<T>(kInitStd * random.normal());
}

//===----------------------------------------------------------------------===//
// The norm of blocks and head: LayerNorm (gain, then bias) or RMSNorm (gain), as the shape says
//===----------------------------------------------------------------------===//

/// y = Norm(x) with the norm's parameters at `p`; `mean` is LayerNorm's only.
template <typename T>
void normForward(Ops<T> &ops, const GptShape &s, int64_t rows, const T *x, const T *p, T *y,
                 T *mean, T *rstd) {
  if (s.rmsNorm)
    ops.rmsNormForward(rows, s.hidden, x, p, s.normEps, y, rstd);
  else
    ops.layerNormForward(rows, s.hidden, x, p, p + s.hidden, s.normEps, y, mean, rstd);
}

template <typename T>
void normBackwardInput(Ops<T> &ops, const GptShape &s, int64_t rows, const T *x, const T *p,
                       const T *mean, const T *rstd, const T *dy, T *dx) {
  if (s.rmsNorm)
    ops.rmsNormBackwardInput(rows, s.hidden, x, p, rstd, dy, dx);
  else
    ops.layerNormBackwardInput(rows, s.hidden, x, p, mean, rstd, dy, dx);
}

/// Accumulates the norm's parameter gradients at `dp` (the layout of its parameters).
template <typename T>
void normBackwardWeight(Ops<T> &ops, const GptShape &s, int64_t rows, const T *x, const T *mean,
                        const T *rstd, const T *dy, T *dp) {
  if (s.rmsNorm)
    ops.rmsNormBackwardWeight(rows, s.hidden, x, rstd, dy, dp);
  else
    ops.layerNormBackwardWeight(rows, s.hidden, x, mean, rstd, dy, dp, dp + s.hidden);
}

/// Gains 1, LayerNorm biases 0.
template <typename T> void normInitialise(const GptShape &s, T *p) {
  std::fill(p, p + s.hidden, T(1));
  std::fill(p + s.hidden, p + s.normParams(), T(0));
}

//===----------------------------------------------------------------------===//
// Embedding: token table [vocab × h], then (learned positions only) position table [seq × h]
//===----------------------------------------------------------------------===//

template <typename T> class Embedding final : public Layer<T> {
public:
  explicit Embedding(const GptShape &s) : s(s) {}
  int64_t numParams() const override {
    return (s.localVocab() + (s.rotary ? 0 : s.seq)) * s.hidden;
  }

  // The token table is the first vocab × h normals of Random({seed, 0}), since the embedding
  // is always layer 0; a tied head starts from the same values.
  void initialise(T *params, uint64_t seed, int64_t layer) const override {
    Random random({seed, static_cast<uint64_t>(layer)});
    fillNormal(params, numParams(), random);
  }

  void forward(Ops<T> &ops, const T *params, const T *, const Tokens &batch, T *y,
               LayerCache<T> &cache) const override {
    const int64_t tokens = batch.samples * s.seq;
    cache.samples = batch.samples;
    if (!s.tensorParallel()) {
      ops.embeddingForward(batch.samples, s.seq, s.hidden, batch.tokens, params, positions(params),
                           y);
      cache.tokens.assign(batch.tokens, batch.tokens + tokens);
      return;
    }
    // Vocabulary-parallel: each rank looks up its rows (zero for the others'), the group
    // sums, and the positions are added once, after the sum.
    cache.tokens = localTokens(s, batch.tokens, tokens);
    Buffer<T> partial;
    T *sum = y;
    if (s.sequenceParallel) {
      partial = transient(ops, tokens * s.hidden);
      sum = partial.data();
    }
    ops.embeddingForward(batch.samples, s.seq, s.hidden, cache.tokens.data(), params, nullptr, sum);
    reduceRows(ops, s, batch.samples, sum, y);
    if (const T *wpe = positions(params)) {
      const int64_t width = s.localSeq() * s.hidden;
      const T *mine = wpe + (s.sequenceParallel ? s.tensorRank * width : 0);
      for (int64_t n = 0; n < batch.samples; ++n)
        ops.add(width, mine, y + n * width);
    }
  }

  // The embedding has no input gradient; W needs the output gradient only (of the whole
  // sequence: with sequence parallelism it is gathered here).
  void backwardInput(Ops<T> &ops, const T *, LayerCache<T> &cache, const T *dy,
                     T *) const override {
    const int64_t n = cache.samples * s.seq * s.hidden;
    cache.stash.clear();
    cache.stash.push_back(ops.allocate(n));
    if (s.sequenceParallel)
      gatherSequence(ops, s, cache.samples, s.hidden, dy, cache.stash[0].data());
    else
      ops.copy(n, dy, cache.stash[0].data());
  }

  void backwardWeight(Ops<T> &ops, const LayerCache<T> &cache, T *dparams) const override {
    ops.embeddingBackward(cache.samples, s.seq, s.hidden, cache.tokens.data(),
                          cache.stash[0].data(), dparams, positions(dparams));
  }

private:
  /// The position table within `params` (or its gradient), null with rotary positions.
  template <typename P> P *positions(P *params) const {
    return s.rotary ? nullptr : params + s.localVocab() * s.hidden;
  }

  GptShape s;
};

//===----------------------------------------------------------------------===//
// Block: x + Attention(Norm1(x)), then + MLP(Norm2(.)); parameters in this order:
// norm1 [h or 2h]; Wqkv [h × (h + 2·kvd)]; bqkv [h + 2·kvd]; Wo [h × h]; bo [h]; norm2;
// W1 [h × f] (GELU) or [h × 2f] (SwiGLU: gate, then up); b1 [f or 2f]; W2 [f × h]; b2 [h]
// (biases as the shape says). kvd = kvHeads · headDim; Wqkv's columns are the q heads, then
// the k heads, then the v heads.
//===----------------------------------------------------------------------===//

template <typename T> class Block final : public Layer<T> {
  struct Offsets {
    int64_t norm1, wqkv, bqkv, wo, bo, norm2, w1, b1, w2, b2, total;
  };

public:
  /// With `recomputeAttention` (selective checkpointing) the forward does not keep the
  /// attention probabilities: the backward computes them again.
  Block(const GptShape &s, bool recomputeAttention) : s(s), recomputeAttention(recomputeAttention) {
    // This tensor rank's widths (the whole ones without tensor parallelism).
    const int64_t h = s.hidden, f = s.localFfn(), qkv = s.localQkvWidth(), up = s.localUpWidth(),
                  attention = s.localHeads() * s.headDim();
    int64_t at = 0;
    auto take = [&](int64_t n, bool present = true) {
      int64_t here = present ? at : -1;
      at += present ? n : 0;
      return here;
    };
    o.norm1 = take(s.normParams());
    o.wqkv = take(h * qkv);
    o.bqkv = take(qkv, s.qkvBias);
    o.wo = take(attention * h);
    o.bo = take(h, s.otherBias);
    o.norm2 = take(s.normParams());
    o.w1 = take(h * up);
    o.b1 = take(up, s.otherBias);
    o.w2 = take(f * h);
    o.b2 = take(h, s.otherBias);
    o.total = at;
  }

  int64_t numParams() const override { return o.total; }
  /// Where each parameter starts (−1: absent), for tensorSlice.
  const Offsets &offsets() const { return o; }

  void initialise(T *params, uint64_t seed, int64_t layer) const override {
    Random random({seed, static_cast<uint64_t>(layer)});
    std::fill(params, params + o.total, T(0));
    const int64_t h = s.hidden, f = s.ffn;
    normInitialise(s, params + o.norm1);
    normInitialise(s, params + o.norm2);
    fillNormal(params + o.wqkv, h * s.qkvWidth(), random);
    fillNormal(params + o.wo, h * h, random);
    fillNormal(params + o.w1, h * s.upWidth(), random);
    fillNormal(params + o.w2, f * h, random);
  }

  // Saved buffers, by index. U is the MLP's first projection, G its activation.
  enum { X, H1, Mean1, Rstd1, Qkv, Probs, Att, X2, H2, Mean2, Rstd2, U, G, NumSaved };

  void forward(Ops<T> &ops, const T *p, const T *x, const Tokens &batch, T *y,
               LayerCache<T> &cache) const override {
    if (s.tensorParallel())
      return forwardParallel(ops, p, x, batch, y, cache);
    const int64_t n = batch.samples, rows = n * s.seq, h = s.hidden, f = s.ffn, qkv = s.qkvWidth(),
                  up = s.upWidth();
    std::vector<Buffer<T>> &v = cache.saved;
    v.clear();
    v.resize(NumSaved);
    cache.samples = n;
    const int64_t means = s.rmsNorm ? 0 : rows;
    const int64_t sizes[NumSaved] = {
        rows * h, rows * h, means,    rows,  rows * qkv, recomputeAttention ? 0 : probsSize(n),
        rows * h, rows * h, rows * h, means, rows,       rows * up,
        rows * f};
    for (int i = 0; i < NumSaved; ++i)
      v[i] = ops.allocate(sizes[i]);
    Buffer<T> probs = recomputeAttention ? transient(ops, probsSize(n)) : Buffer<T>();
    ops.copy(rows * h, x, v[X].data());
    normForward(ops, s, rows, x, p + o.norm1, v[H1].data(), v[Mean1].data(), v[Rstd1].data());
    ops.gemm(false, false, rows, qkv, h, 1, v[H1].data(), p + o.wqkv, 0, v[Qkv].data());
    if (o.bqkv >= 0)
      ops.addBias(rows, qkv, p + o.bqkv, v[Qkv].data());
    if (s.rotary)
      ops.rotaryForward(n, s.seq, s.heads, s.numKvHeads(), s.headDim(), s.ropeTheta, v[Qkv].data());
    ops.attentionForward(n, s.seq, s.heads, s.numKvHeads(), s.headDim(), v[Qkv].data(),
                         recomputeAttention ? probs.data() : v[Probs].data(), v[Att].data());
    probs.reset();
    ops.copy(rows * h, x, v[X2].data());
    ops.gemm(false, false, rows, h, h, 1, v[Att].data(), p + o.wo, 1, v[X2].data());
    if (o.bo >= 0)
      ops.addBias(rows, h, p + o.bo, v[X2].data());
    normForward(ops, s, rows, v[X2].data(), p + o.norm2, v[H2].data(), v[Mean2].data(),
                v[Rstd2].data());
    ops.gemm(false, false, rows, up, h, 1, v[H2].data(), p + o.w1, 0, v[U].data());
    if (o.b1 >= 0)
      ops.addBias(rows, up, p + o.b1, v[U].data());
    if (s.gated)
      ops.swigluForward(rows, f, v[U].data(), v[G].data());
    else
      ops.geluForward(rows * f, v[U].data(), v[G].data());
    ops.copy(rows * h, v[X2].data(), y);
    ops.gemm(false, false, rows, h, f, 1, v[G].data(), p + o.w2, 1, y);
    if (o.b2 >= 0)
      ops.addBias(rows, h, p + o.b2, y);
  }

  // Stashed by backwardInput, by index: the output gradients of W2 (the block's dy), W1 (du),
  // norm2 (dh2), Wo (dx2), Wqkv (dqkv, before the rotation) and norm1 (dh1); with sequence
  // parallelism dy is gathered over the whole sequence, dh2, dx2 and dh1 are the rank's shard
  // and Wo's output gradient over the whole sequence is dx2Full.
  enum { DY, DU, DH2, DX2, DQKV, DH1, DX2Full, NumStashed };

  void backwardInput(Ops<T> &ops, const T *p, LayerCache<T> &cache, const T *dy,
                     T *dx) const override {
    if (s.tensorParallel())
      return backwardInputParallel(ops, p, cache, dy, dx);
    const int64_t n = cache.samples, rows = n * s.seq, h = s.hidden, f = s.ffn, qkv = s.qkvWidth(),
                  up = s.upWidth();
    std::vector<Buffer<T>> &v = cache.saved;
    std::vector<Buffer<T>> &g = cache.stash;
    g.clear();
    g.resize(NumStashed);
    g[DY] = ops.allocate(rows * h);
    ops.copy(rows * h, dy, g[DY].data());
    // MLP branch: y = x2 + W2 act(W1 Norm2(x2) + b1) + b2.
    Buffer<T> dg = transient(ops, rows * f);
    g[DU] = ops.allocate(rows * up);
    ops.gemm(false, true, rows, f, h, 1, dy, p + o.w2, 0, dg.data());
    if (s.gated)
      ops.swigluBackward(rows, f, v[U].data(), dg.data(), g[DU].data());
    else
      ops.geluBackward(rows * f, v[U].data(), dg.data(), g[DU].data());
    dg.reset();
    g[DH2] = ops.allocate(rows * h);
    g[DX2] = ops.allocate(rows * h);
    ops.gemm(false, true, rows, h, up, 1, g[DU].data(), p + o.w1, 0, g[DH2].data());
    normBackwardInput(ops, s, rows, v[X2].data(), p + o.norm2, v[Mean2].data(), v[Rstd2].data(),
                      g[DH2].data(), g[DX2].data());
    ops.add(rows * h, dy, g[DX2].data());
    // Attention branch: x2 = x + Wo Attn(Rotary(Wqkv Norm1(x) + bqkv)) + bo.
    Buffer<T> datt = transient(ops, rows * h);
    g[DQKV] = ops.allocate(rows * qkv);
    ops.gemm(false, true, rows, h, h, 1, g[DX2].data(), p + o.wo, 0, datt.data());
    Buffer<T> probs;
    ops.attentionBackward(n, s.seq, s.heads, s.numKvHeads(), s.headDim(), v[Qkv].data(),
                          probabilities(ops, cache, probs), datt.data(), g[DQKV].data());
    probs.reset();
    datt.reset();
    if (s.rotary)
      ops.rotaryBackward(n, s.seq, s.heads, s.numKvHeads(), s.headDim(), s.ropeTheta,
                         g[DQKV].data());
    g[DH1] = ops.allocate(rows * h);
    ops.gemm(false, true, rows, h, qkv, 1, g[DQKV].data(), p + o.wqkv, 0, g[DH1].data());
    normBackwardInput(ops, s, rows, v[X].data(), p + o.norm1, v[Mean1].data(), v[Rstd1].data(),
                      g[DH1].data(), dx);
    ops.add(rows * h, g[DX2].data(), dx);
    // The weight gradients read neither the attention's inputs nor the activation's.
    for (int only : {Qkv, Probs, U})
      v[only].reset();
  }

  void backwardWeight(Ops<T> &ops, const LayerCache<T> &cache, T *dp) const override {
    if (s.tensorParallel())
      return backwardWeightParallel(ops, cache, dp);
    const int64_t rows = cache.samples * s.seq, h = s.hidden, f = s.ffn, qkv = s.qkvWidth(),
                  up = s.upWidth();
    const std::vector<Buffer<T>> &v = cache.saved;
    const std::vector<Buffer<T>> &g = cache.stash;
    ops.gemm(true, false, f, h, rows, 1, v[G].data(), g[DY].data(), 1, dp + o.w2);
    if (o.b2 >= 0)
      ops.sumRows(rows, h, g[DY].data(), dp + o.b2);
    ops.gemm(true, false, h, up, rows, 1, v[H2].data(), g[DU].data(), 1, dp + o.w1);
    if (o.b1 >= 0)
      ops.sumRows(rows, up, g[DU].data(), dp + o.b1);
    normBackwardWeight(ops, s, rows, v[X2].data(), v[Mean2].data(), v[Rstd2].data(), g[DH2].data(),
                       dp + o.norm2);
    ops.gemm(true, false, h, h, rows, 1, v[Att].data(), g[DX2].data(), 1, dp + o.wo);
    if (o.bo >= 0)
      ops.sumRows(rows, h, g[DX2].data(), dp + o.bo);
    ops.gemm(true, false, h, qkv, rows, 1, v[H1].data(), g[DQKV].data(), 1, dp + o.wqkv);
    if (o.bqkv >= 0)
      ops.sumRows(rows, qkv, g[DQKV].data(), dp + o.bqkv);
    normBackwardWeight(ops, s, rows, v[X].data(), v[Mean1].data(), v[Rstd1].data(), g[DH1].data(),
                       dp + o.norm1);
  }

private:
  int64_t probsSize(int64_t samples) const { return samples * s.localHeads() * s.seq * s.seq; }

  /// The attention probabilities the backward reads: the forward's or, recomputed from the
  /// saved (rotated) q, k and v, the same bits in `scratch`.
  const T *probabilities(Ops<T> &ops, const LayerCache<T> &cache, Buffer<T> &scratch) const {
    const std::vector<Buffer<T>> &v = cache.saved;
    if (!recomputeAttention)
      return v[Probs].data();
    const int64_t n = cache.samples;
    scratch = transient(ops, probsSize(n));
    // v[Att] again, not needed
    Buffer<T> out = transient(ops, n * s.seq * s.localHeads() * s.headDim());
    ops.attentionForward(n, s.seq, s.localHeads(), s.localKvHeads(), s.headDim(), v[Qkv].data(),
                         scratch.data(), out.data());
    return scratch.data();
  }

  // Tensor parallelism: this rank's heads and FFN columns over the whole sequence; with
  // sequence parallelism the block's input, norms and residuals on the rank's sequence shard
  // (`local` rows), gathered before the column-parallel projections and reduce-scattered
  // after the row-parallel ones. The saved buffers and stash keep the enums' meaning.

  void forwardParallel(Ops<T> &ops, const T *p, const T *x, const Tokens &batch, T *y,
                       LayerCache<T> &cache) const {
    const int64_t n = batch.samples, rows = n * s.seq, local = n * s.localSeq(), h = s.hidden,
                  f = s.localFfn(), qkv = s.localQkvWidth(), up = s.localUpWidth(),
                  attention = s.localHeads() * s.headDim();
    std::vector<Buffer<T>> &v = cache.saved;
    v.clear();
    v.resize(NumSaved);
    cache.samples = n;
    const int64_t means = s.rmsNorm ? 0 : local;
    const int64_t sizes[NumSaved] = {local * h,
                                     local * h,
                                     means,
                                     local,
                                     rows * qkv,
                                     recomputeAttention ? 0 : probsSize(n),
                                     rows * attention,
                                     local * h,
                                     local * h,
                                     means,
                                     local,
                                     rows * up,
                                     rows * f};
    for (int i = 0; i < NumSaved; ++i)
      v[i] = ops.allocate(sizes[i]);
    ops.copy(local * h, x, v[X].data());
    normForward(ops, s, local, x, p + o.norm1, v[H1].data(), v[Mean1].data(), v[Rstd1].data());
    {
      Buffer<T> gathered;
      ops.gemm(false, false, rows, qkv, h, 1, wholeSequence(ops, n, v[H1].data(), gathered),
               p + o.wqkv, 0, v[Qkv].data());
    }
    if (o.bqkv >= 0)
      ops.addBias(rows, qkv, p + o.bqkv, v[Qkv].data());
    if (s.rotary)
      ops.rotaryForward(n, s.seq, s.localHeads(), s.localKvHeads(), s.headDim(), s.ropeTheta,
                        v[Qkv].data());
    {
      Buffer<T> probs = recomputeAttention ? transient(ops, probsSize(n)) : Buffer<T>();
      ops.attentionForward(n, s.seq, s.localHeads(), s.localKvHeads(), s.headDim(), v[Qkv].data(),
                           recomputeAttention ? probs.data() : v[Probs].data(), v[Att].data());
    }
    rowParallel(ops, n, attention, v[Att].data(), p + o.wo, v[X2].data());
    ops.add(local * h, x, v[X2].data());
    if (o.bo >= 0)
      ops.addBias(local, h, p + o.bo, v[X2].data());
    normForward(ops, s, local, v[X2].data(), p + o.norm2, v[H2].data(), v[Mean2].data(),
                v[Rstd2].data());
    {
      Buffer<T> gathered;
      ops.gemm(false, false, rows, up, h, 1, wholeSequence(ops, n, v[H2].data(), gathered),
               p + o.w1, 0, v[U].data());
    }
    if (o.b1 >= 0)
      ops.addBias(rows, up, p + o.b1, v[U].data());
    if (s.gated)
      ops.swigluForward(rows, f, v[U].data(), v[G].data());
    else
      ops.geluForward(rows * f, v[U].data(), v[G].data());
    rowParallel(ops, n, f, v[G].data(), p + o.w2, y);
    ops.add(local * h, v[X2].data(), y);
    if (o.b2 >= 0)
      ops.addBias(local, h, p + o.b2, y);
  }

  /// `rows` [samples × local seq × h] over the whole sequence: gathered into `scratch` with
  /// sequence parallelism, else `rows` itself.
  const T *wholeSequence(Ops<T> &ops, int64_t samples, const T *rows, Buffer<T> &scratch) const {
    if (!s.sequenceParallel)
      return rows;
    scratch = transient(ops, samples * s.seq * s.hidden);
    gatherSequence(ops, s, samples, s.hidden, rows, scratch.data());
    return scratch.data();
  }

  /// out = the group's sum of in [rows × k] · w (w [k × h] when `transposed` is false: this
  /// rank's rows of a row-parallel projection; w [h × k] when true: this rank's columns of a
  /// column-parallel one, whose input gradient this is), on this rank's rows of out.
  void reducedProduct(Ops<T> &ops, int64_t samples, int64_t k, const T *in, const T *w,
                      bool transposed, T *out) const {
    const int64_t rows = samples * s.seq;
    Buffer<T> partial;
    T *sum = out;
    if (s.sequenceParallel) {
      partial = transient(ops, rows * s.hidden);
      sum = partial.data();
    }
    ops.gemm(false, transposed, rows, s.hidden, k, 1, in, w, 0, sum);
    reduceRows(ops, s, samples, sum, out);
  }
  void rowParallel(Ops<T> &ops, int64_t samples, int64_t k, const T *in, const T *w, T *out) const {
    reducedProduct(ops, samples, k, in, w, /*transposed=*/false, out);
  }

  void backwardInputParallel(Ops<T> &ops, const T *p, LayerCache<T> &cache, const T *dy,
                             T *dx) const {
    const int64_t n = cache.samples, rows = n * s.seq, local = n * s.localSeq(), h = s.hidden,
                  f = s.localFfn(), qkv = s.localQkvWidth(), up = s.localUpWidth(),
                  attention = s.localHeads() * s.headDim();
    const bool sp = s.sequenceParallel;
    std::vector<Buffer<T>> &v = cache.saved;
    std::vector<Buffer<T>> &g = cache.stash;
    g.clear();
    g.resize(NumStashed);
    g[DY] = ops.allocate(rows * h);
    if (sp)
      gatherSequence(ops, s, n, h, dy, g[DY].data());
    else
      ops.copy(rows * h, dy, g[DY].data());
    // MLP branch: y = x2 + Σ_ranks W2 act(W1 Norm2(x2) + b1) + b2.
    Buffer<T> dg = transient(ops, rows * f);
    g[DU] = ops.allocate(rows * up);
    ops.gemm(false, true, rows, f, h, 1, g[DY].data(), p + o.w2, 0, dg.data());
    if (s.gated)
      ops.swigluBackward(rows, f, v[U].data(), dg.data(), g[DU].data());
    else
      ops.geluBackward(rows * f, v[U].data(), dg.data(), g[DU].data());
    dg.reset();
    g[DH2] = ops.allocate(local * h);
    g[DX2] = ops.allocate(local * h);
    reducedProduct(ops, n, up, g[DU].data(), p + o.w1, /*transposed=*/true, g[DH2].data());
    normBackwardInput(ops, s, local, v[X2].data(), p + o.norm2, v[Mean2].data(), v[Rstd2].data(),
                      g[DH2].data(), g[DX2].data());
    ops.add(local * h, dy, g[DX2].data());
    // Attention branch: x2 = x + Σ_ranks Wo Attn(Rotary(Wqkv Norm1(x) + bqkv)) + bo.
    const T *dx2 = g[DX2].data();
    if (sp) {
      g[DX2Full] = ops.allocate(rows * h);
      gatherSequence(ops, s, n, h, dx2, g[DX2Full].data());
      dx2 = g[DX2Full].data();
    }
    Buffer<T> datt = transient(ops, rows * attention);
    g[DQKV] = ops.allocate(rows * qkv);
    ops.gemm(false, true, rows, attention, h, 1, dx2, p + o.wo, 0, datt.data());
    {
      Buffer<T> probs;
      ops.attentionBackward(n, s.seq, s.localHeads(), s.localKvHeads(), s.headDim(), v[Qkv].data(),
                            probabilities(ops, cache, probs), datt.data(), g[DQKV].data());
    }
    datt.reset();
    if (s.rotary)
      ops.rotaryBackward(n, s.seq, s.localHeads(), s.localKvHeads(), s.headDim(), s.ropeTheta,
                         g[DQKV].data());
    g[DH1] = ops.allocate(local * h);
    reducedProduct(ops, n, qkv, g[DQKV].data(), p + o.wqkv, /*transposed=*/true, g[DH1].data());
    normBackwardInput(ops, s, local, v[X].data(), p + o.norm1, v[Mean1].data(), v[Rstd1].data(),
                      g[DH1].data(), dx);
    ops.add(local * h, g[DX2].data(), dx);
    for (int only : {Qkv, Probs, U})
      v[only].reset();
  }

  void backwardWeightParallel(Ops<T> &ops, const LayerCache<T> &cache, T *dp) const {
    const int64_t n = cache.samples, rows = n * s.seq, local = n * s.localSeq(), h = s.hidden,
                  f = s.localFfn(), qkv = s.localQkvWidth(), up = s.localUpWidth(),
                  attention = s.localHeads() * s.headDim(), norm = s.normParams();
    const bool sp = s.sequenceParallel;
    const std::vector<Buffer<T>> &v = cache.saved;
    const std::vector<Buffer<T>> &g = cache.stash;
    // With sequence parallelism each rank's norm gradients cover its shard of the sequence:
    // both norms' are summed over the group at the end.
    Buffer<T> norms;
    if (sp)
      norms = transient(ops, 2 * norm);
    T *dnorm2 = sp ? norms.data() : dp + o.norm2;
    T *dnorm1 = sp ? norms.data() + norm : dp + o.norm1;
    // A linear layer's weight gradient over the micro-batch's rows (input `x` of width `in`,
    // output gradient `dy` of width `out`), and its bias's when it has one.
    auto linear = [&](int64_t in, int64_t out, const T *x, const T *dy, auto w, auto b) {
      ops.gemm(true, false, in, out, rows, 1, x, dy, 1, dp + w);
      if (b >= 0)
        ops.sumRows(rows, out, dy, dp + b);
    };
    linear(f, h, v[G].data(), g[DY].data(), o.w2, o.b2);
    {
      Buffer<T> gathered;
      linear(h, up, wholeSequence(ops, n, v[H2].data(), gathered), g[DU].data(), o.w1, o.b1);
    }
    normBackwardWeight(ops, s, local, v[X2].data(), v[Mean2].data(), v[Rstd2].data(), g[DH2].data(),
                       dnorm2);
    const T *dx2 = sp ? g[DX2Full].data() : g[DX2].data();
    linear(attention, h, v[Att].data(), dx2, o.wo, o.bo);
    {
      Buffer<T> gathered;
      linear(h, qkv, wholeSequence(ops, n, v[H1].data(), gathered), g[DQKV].data(), o.wqkv, o.bqkv);
    }
    normBackwardWeight(ops, s, local, v[X].data(), v[Mean1].data(), v[Rstd1].data(), g[DH1].data(),
                       dnorm1);
    if (sp) {
      group(ops).allReduce(2 * norm, norms.data());
      ops.add(norm, norms.data(), dp + o.norm2);
      ops.add(norm, norms.data() + norm, dp + o.norm1);
    }
  }

  GptShape s;
  Offsets o;
  bool recomputeAttention = false;
};

//===----------------------------------------------------------------------===//
// Head: the final norm [h or 2h], then the LM head W, then cross-entropy. W is [h × vocab]
// (logits = z · W), or, tied, [vocab × h] as the token table (logits = z · Wᵀ), starting from
// the token table's values.
//===----------------------------------------------------------------------===//

template <typename T> class Head final : public Layer<T> {
public:
  explicit Head(const GptShape &s) : s(s) {}
  int64_t numParams() const override { return s.normParams() + s.hidden * s.localVocab(); }

  void initialise(T *params, uint64_t seed, int64_t layer) const override {
    normInitialise(s, params);
    // Tied: the embedding's draws (layer 0), so that both copies start identical.
    Random random({seed, static_cast<uint64_t>(s.tied ? 0 : layer)});
    fillNormal(params + s.normParams(), s.hidden * s.vocab, random);
  }

  enum { X, Z, Mean, Rstd, DLogits, NumSaved };

  void forward(Ops<T> &ops, const T *p, const T *x, const Tokens &batch, T *,
               LayerCache<T> &cache) const override {
    if (s.tensorParallel())
      return forwardParallel(ops, p, x, batch, cache);
    const int64_t rows = batch.samples * s.seq, h = s.hidden;
    std::vector<Buffer<T>> &v = cache.saved;
    v.clear();
    v.resize(NumSaved);
    cache.samples = batch.samples;
    const int64_t sizes[NumSaved] = {rows * h, rows * h, s.rmsNorm ? 0 : rows, rows,
                                     rows * s.vocab};
    for (int i = 0; i < NumSaved; ++i)
      v[i] = ops.allocate(sizes[i]);
    ops.copy(rows * h, x, v[X].data());
    normForward(ops, s, rows, x, p, v[Z].data(), v[Mean].data(), v[Rstd].data());
    Buffer<T> logits = transient(ops, rows * s.vocab);
    ops.gemm(false, s.tied, rows, s.vocab, h, 1, v[Z].data(), p + s.normParams(), 0, logits.data());
    ops.crossEntropy(rows, s.vocab, logits.data(), batch.targets, static_cast<T>(batch.lossScale),
                     v[DLogits].data());
  }

  // The LM head's output gradient is the forward's DLogits; the stash holds the final norm's.
  void backwardInput(Ops<T> &ops, const T *p, LayerCache<T> &cache, const T *,
                     T *dx) const override {
    if (s.tensorParallel())
      return backwardInputParallel(ops, p, cache, dx);
    const int64_t rows = cache.samples * s.seq, h = s.hidden;
    const std::vector<Buffer<T>> &v = cache.saved;
    cache.stash.clear();
    cache.stash.push_back(ops.allocate(rows * h));
    T *dz = cache.stash[0].data();
    ops.gemm(false, !s.tied, rows, h, s.vocab, 1, v[DLogits].data(), p + s.normParams(), 0, dz);
    normBackwardInput(ops, s, rows, v[X].data(), p, v[Mean].data(), v[Rstd].data(), dz, dx);
  }

  void backwardWeight(Ops<T> &ops, const LayerCache<T> &cache, T *dp) const override {
    if (s.tensorParallel())
      return backwardWeightParallel(ops, cache, dp);
    const int64_t rows = cache.samples * s.seq, h = s.hidden;
    const std::vector<Buffer<T>> &v = cache.saved;
    if (s.tied) // dW = dlogitsᵀ · z, [vocab × h]
      ops.gemm(true, false, s.vocab, h, rows, 1, v[DLogits].data(), v[Z].data(), 1,
               dp + s.normParams());
    else // dW = zᵀ · dlogits, [h × vocab]
      ops.gemm(true, false, h, s.vocab, rows, 1, v[Z].data(), v[DLogits].data(), 1,
               dp + s.normParams());
    normBackwardWeight(ops, s, rows, v[X].data(), v[Mean].data(), v[Rstd].data(),
                       cache.stash[0].data(), dp);
  }

private:
  // Tensor parallelism: the LM head's columns of this rank's vocabulary, over the whole
  // sequence; the final norm on the rank's sequence shard with sequence parallelism. The
  // cross-entropy is Megatron-LM's vocabulary-parallel one: each row's maximum, sum of
  // exponentials and target logit summed over the group; tensor rank 0 counts the loss.

  void forwardParallel(Ops<T> &ops, const T *p, const T *x, const Tokens &batch,
                       LayerCache<T> &cache) const {
    const int64_t n = batch.samples, rows = n * s.seq, local = n * s.localSeq(), h = s.hidden,
                  vocab = s.localVocab();
    std::vector<Buffer<T>> &v = cache.saved;
    v.clear();
    v.resize(NumSaved);
    cache.samples = n;
    const int64_t sizes[NumSaved] = {local * h, local * h, s.rmsNorm ? 0 : local, local,
                                     rows * vocab};
    for (int i = 0; i < NumSaved; ++i)
      v[i] = ops.allocate(sizes[i]);
    ops.copy(local * h, x, v[X].data());
    normForward(ops, s, local, x, p, v[Z].data(), v[Mean].data(), v[Rstd].data());
    Buffer<T> logits = transient(ops, rows * vocab);
    {
      Buffer<T> gathered;
      ops.gemm(false, s.tied, rows, vocab, h, 1, wholeSequence(ops, n, v[Z].data(), gathered),
               p + s.normParams(), 0, logits.data());
    }
    const std::vector<int32_t> targets = localTokens(s, batch.targets, rows);
    Buffer<T> max = transient(ops, rows), sums = transient(ops, rows),
              picked = transient(ops, rows);
    TensorGroup<T> &tensor = group(ops);
    ops.rowMax(rows, vocab, logits.data(), max.data());
    tensor.allReduce(rows, max.data(), Reduction::Max);
    ops.crossEntropyPartials(rows, vocab, logits.data(), targets.data(), max.data(), sums.data(),
                             picked.data());
    tensor.allReduce(rows, sums.data());
    tensor.allReduce(rows, picked.data());
    ops.crossEntropyFromPartials(rows, vocab, logits.data(), targets.data(), max.data(),
                                 sums.data(), picked.data(), static_cast<T>(batch.lossScale),
                                 /*countLoss=*/s.tensorRank == 0, v[DLogits].data());
  }

  const T *wholeSequence(Ops<T> &ops, int64_t samples, const T *rows, Buffer<T> &scratch) const {
    if (!s.sequenceParallel)
      return rows;
    scratch = transient(ops, samples * s.seq * s.hidden);
    gatherSequence(ops, s, samples, s.hidden, rows, scratch.data());
    return scratch.data();
  }

  void backwardInputParallel(Ops<T> &ops, const T *p, LayerCache<T> &cache, T *dx) const {
    const int64_t n = cache.samples, rows = n * s.seq, local = n * s.localSeq(), h = s.hidden;
    const std::vector<Buffer<T>> &v = cache.saved;
    cache.stash.clear();
    cache.stash.push_back(ops.allocate(local * h));
    T *dz = cache.stash[0].data();
    Buffer<T> partial;
    T *sum = dz;
    if (s.sequenceParallel) {
      partial = transient(ops, rows * h);
      sum = partial.data();
    }
    ops.gemm(false, !s.tied, rows, h, s.localVocab(), 1, v[DLogits].data(), p + s.normParams(), 0,
             sum);
    reduceRows(ops, s, n, sum, dz);
    normBackwardInput(ops, s, local, v[X].data(), p, v[Mean].data(), v[Rstd].data(), dz, dx);
  }

  void backwardWeightParallel(Ops<T> &ops, const LayerCache<T> &cache, T *dp) const {
    const int64_t n = cache.samples, rows = n * s.seq, local = n * s.localSeq(), h = s.hidden,
                  vocab = s.localVocab();
    const std::vector<Buffer<T>> &v = cache.saved;
    {
      Buffer<T> gathered;
      const T *z = wholeSequence(ops, n, v[Z].data(), gathered);
      if (s.tied)
        ops.gemm(true, false, vocab, h, rows, 1, v[DLogits].data(), z, 1, dp + s.normParams());
      else
        ops.gemm(true, false, h, vocab, rows, 1, z, v[DLogits].data(), 1, dp + s.normParams());
    }
    if (!s.sequenceParallel) {
      normBackwardWeight(ops, s, local, v[X].data(), v[Mean].data(), v[Rstd].data(),
                         cache.stash[0].data(), dp);
      return;
    }
    // Each rank's norm gradient covers its shard of the sequence: summed over the group.
    Buffer<T> norm = transient(ops, s.normParams());
    normBackwardWeight(ops, s, local, v[X].data(), v[Mean].data(), v[Rstd].data(),
                       cache.stash[0].data(), norm.data());
    group(ops).allReduce(s.normParams(), norm.data());
    ops.add(s.normParams(), norm.data(), dp);
  }

  GptShape s;
};

} // namespace

template <typename T>
std::unique_ptr<Layer<T>> makeLayer(runtime::LayerKind kind, const GptShape &shape,
                                    Checkpointing checkpointing) {
  switch (kind) {
  case runtime::LayerKind::Embedding:
    return std::make_unique<Embedding<T>>(shape);
  case runtime::LayerKind::Block:
    return std::make_unique<Block<T>>(shape, checkpointing == Checkpointing::Selective);
  case runtime::LayerKind::Head:
    return std::make_unique<Head<T>>(shape);
  case runtime::LayerKind::Custom:
    return nullptr;
  }
  return nullptr;
}

std::vector<ParameterRun> tensorSlice(runtime::LayerKind kind, const GptShape &s) {
  const GptShape w = s.whole();
  std::vector<ParameterRun> runs;
  auto run = [&](int64_t whole, int64_t local, int64_t length) {
    if (length > 0)
      runs.push_back({whole, local, length});
  };
  const int64_t r = s.tensorRank, h = s.hidden;
  switch (kind) {
  case runtime::LayerKind::Embedding: {
    const int64_t rows = s.localVocab() * h;
    run(r * rows, 0, rows);                           // the token table's rows
    run(w.vocab * h, rows, s.rotary ? 0 : s.seq * h); // the position table, whole
    break;
  }
  case runtime::LayerKind::Head: {
    const int64_t norm = s.normParams(), vocab = s.localVocab();
    run(0, 0, norm);
    if (s.tied) // [vocab × h]: this rank's rows
      run(norm + r * vocab * h, norm, vocab * h);
    else // [h × vocab]: this rank's columns of each row
      for (int64_t i = 0; i < h; ++i)
        run(norm + i * w.vocab + r * vocab, norm + i * vocab, vocab);
    break;
  }
  case runtime::LayerKind::Block: {
    const Block<float> whole(w, false), local(s, false);
    const auto &W = whole.offsets(), &L = local.offsets();
    const int64_t d = s.headDim(), q = s.localHeads() * d, kv = s.localKvHeads() * d,
                  wideQkv = w.qkvWidth(), qkv = s.localQkvWidth(), f = s.localFfn(),
                  wideUp = w.upWidth(), up = s.localUpWidth();
    // Column-parallel: this rank's q heads, then its key and value heads, of each row.
    auto qkvColumns = [&](int64_t wholeAt, int64_t localAt, int64_t rows) {
      for (int64_t i = 0; i < rows; ++i) {
        run(wholeAt + i * wideQkv + r * q, localAt + i * qkv, q);
        run(wholeAt + i * wideQkv + h + r * kv, localAt + i * qkv + q, kv);
        run(wholeAt + i * wideQkv + h + w.kvWidth() + r * kv, localAt + i * qkv + q + kv, kv);
      }
    };
    // Column-parallel: this rank's FFN columns (of the gate and of the up projection).
    auto upColumns = [&](int64_t wholeAt, int64_t localAt, int64_t rows) {
      for (int64_t i = 0; i < rows; ++i) {
        run(wholeAt + i * wideUp + r * f, localAt + i * up, f);
        if (s.gated)
          run(wholeAt + i * wideUp + w.ffn + r * f, localAt + i * up + f, f);
      }
    };
    run(W.norm1, L.norm1, s.normParams());
    qkvColumns(W.wqkv, L.wqkv, h);
    if (L.bqkv >= 0)
      qkvColumns(W.bqkv, L.bqkv, 1);
    run(W.wo + r * q * h, L.wo, q * h); // row-parallel: this rank's rows
    if (L.bo >= 0)
      run(W.bo, L.bo, h);
    run(W.norm2, L.norm2, s.normParams());
    upColumns(W.w1, L.w1, h);
    if (L.b1 >= 0)
      upColumns(W.b1, L.b1, 1);
    run(W.w2 + r * f * h, L.w2, f * h);
    if (L.b2 >= 0)
      run(W.b2, L.b2, h);
    break;
  }
  case runtime::LayerKind::Custom:
    break;
  }
  return runs;
}

int64_t tensorParams(const runtime::Plan &plan, const GptShape &shape, int64_t first, int64_t end) {
  int64_t n = 0;
  for (int64_t l = first; l < end; ++l)
    n += shape.tensorParallel()
             ? makeLayer<float>(plan.layers[l].kind, shape, Checkpointing::None)->numParams()
             : plan.layers[l].params;
  return n;
}

namespace {

/// Calls f(offset in the whole layers, offset in the part, length) for each run of tensor rank
/// shape.tensorRank's part of the parameters of layers [first, end).
template <typename F>
void forEachTensorRun(const runtime::Plan &plan, const GptShape &shape, int64_t first, int64_t end,
                      F f) {
  int64_t wholeAt = 0, localAt = 0;
  for (int64_t l = first; l < end; ++l) {
    for (const ParameterRun &run : tensorSlice(plan.layers[l].kind, shape))
      f(wholeAt + run.whole, localAt + run.local, run.length);
    wholeAt += plan.layers[l].params;
    localAt += tensorParams(plan, shape, l, l + 1);
  }
}

} // namespace

std::vector<float> tensorPart(const runtime::Plan &plan, const GptShape &shape, int64_t first,
                              int64_t end, const float *whole) {
  std::vector<float> part(tensorParams(plan, shape, first, end));
  forEachTensorRun(plan, shape, first, end, [&](int64_t at, int64_t localAt, int64_t n) {
    std::copy(whole + at, whole + at + n, part.begin() + localAt);
  });
  return part;
}

std::vector<float> wholeFromTensorParts(const runtime::Plan &plan, const GptShape &shape,
                                        int64_t first, int64_t end, const float *parts) {
  int64_t n = 0;
  for (int64_t l = first; l < end; ++l)
    n += plan.layers[l].params;
  std::vector<float> whole(n);
  const int64_t partSize = tensorParams(plan, shape, first, end);
  for (int64_t r = 0; r < shape.tensorSize; ++r) {
    GptShape rank = shape;
    rank.tensorRank = r;
    const float *part = parts + r * partSize;
    forEachTensorRun(plan, rank, first, end, [&](int64_t at, int64_t localAt, int64_t n) {
      std::copy(part + localAt, part + localAt + n, whole.begin() + at);
    });
  }
  return whole;
}

template <typename T>
void initialiseLayer(runtime::LayerKind kind, const GptShape &shape, T *params, uint64_t seed,
                     int64_t layer) {
  if (!shape.tensorParallel()) {
    makeLayer<T>(kind, shape, Checkpointing::None)->initialise(params, seed, layer);
    return;
  }
  std::unique_ptr<Layer<T>> whole = makeLayer<T>(kind, shape.whole(), Checkpointing::None);
  std::vector<T> all(whole->numParams());
  whole->initialise(all.data(), seed, layer);
  for (const ParameterRun &run : tensorSlice(kind, shape))
    std::copy(all.begin() + run.whole, all.begin() + run.whole + run.length, params + run.local);
}

template <typename T>
absl::StatusOr<LayerChain<T>> LayerChain<T>::build(const runtime::Plan &plan, const GptShape &shape,
                                                   int64_t first, int64_t end, Ops<T> &ops,
                                                   Checkpointing checkpointing) {
  LayerChain chain;
  chain.shape = shape;
  chain.firstLayer = first;
  chain.ops = &ops;
  chain.keepInputs = checkpointing == Checkpointing::Full;
  for (int64_t l = first; l < end; ++l) {
    const runtime::Layer &spec = plan.layers[l];
    std::unique_ptr<Layer<T>> layer = makeLayer<T>(spec.kind, shape, checkpointing);
    if (!layer)
      return absl::FailedPreconditionError(
          absl::StrCat("layer ", spec.name,
                       " is a custom layer; conduit-run trains the "
                       "layers of a transformer only"));
    const int64_t whole = shape.tensorParallel()
                              ? makeLayer<T>(spec.kind, shape.whole(), checkpointing)->numParams()
                              : layer->numParams();
    if (whole != spec.params)
      return absl::FailedPreconditionError(absl::StrCat(
          "layer ", spec.name, ": the plan counts ", spec.params, " parameters, the model has ",
          whole, "; the plan was compiled for a different architecture"));
    const bool isEmbedding = spec.kind == runtime::LayerKind::Embedding;
    const bool isHead = spec.kind == runtime::LayerKind::Head;
    if ((isEmbedding && l != 0) || (isHead && l != static_cast<int64_t>(plan.layers.size()) - 1))
      return absl::FailedPreconditionError(
          absl::StrCat("layer ", spec.name, " is out of place in the chain"));
    chain.embedding = chain.embedding || isEmbedding;
    chain.head = chain.head || isHead;
    std::optional<int64_t> end = limits::checkedAdd(chain.offsets.back(), layer->numParams());
    if (!end || *end > limits::kMaxExact)
      return absl::FailedPreconditionError(absl::StrCat(
          "layers ", first, " to ", l, " have more than ", limits::kMaxExact, " parameters"));
    chain.offsets.push_back(*end);
    chain.layers.push_back(std::move(layer));
    chain.names.push_back(spec.name);
    chain.kinds.push_back(spec.kind);
  }
  return chain;
}

template <typename T> void LayerChain<T>::initialise(T *params, uint64_t seed) const {
  std::vector<T> host(numParams());
  for (size_t i = 0; i < layers.size(); ++i)
    initialiseLayer(kinds[i], shape, host.data() + offsets[i], seed,
                    firstLayer + static_cast<int64_t>(i));
  ops->upload(host.data(), numParams(), params);
}

namespace {
double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// The buffer one piece's parameter gradients are computed in before they are added to the
/// double accumulators: it stands for the plan's float gradients with them, so it counts for
/// nothing of its own (MemoryCounter.h).
template <typename T> Buffer<T> pieceGradients(Ops<T> &ops, int64_t n) {
  MemoryScope scope(ops.memory(), MemoryUse::Gradients, /*countedWidth=*/0);
  return ops.allocate(n);
}

/// Adds one piece's per-layer seconds to the micro-batch's (when it keeps them).
void addSeconds(const std::vector<double> &piece, std::vector<double> *total) {
  if (!total)
    return;
  total->resize(piece.size(), 0);
  for (size_t i = 0; i < piece.size(); ++i)
    (*total)[i] += piece[i];
}
} // namespace

template <typename T>
void LayerChain<T>::forward(const T *params, const T *x, const Tokens &batch, T *y, Cache &cache,
                            std::vector<double> *seconds) const {
  const int64_t activation = batch.samples * sampleSize();
  cache.layers.clear();
  cache.layers.resize(layers.size());
  cache.samples = batch.samples;
  cache.inputs.clear();
  if (keepInputs) {
    // What the recomputation needs: each layer's input, kept from here on, and the tokens.
    cache.inputs.resize(layers.size());
    if (x) {
      cache.inputs[0] = ops->allocate(activation);
      ops->copy(activation, x, cache.inputs[0].data());
    }
    const int64_t tokens = batch.samples * shape.seq;
    cache.tokens.assign(batch.tokens, batch.tokens + (embedding ? tokens : 0));
    cache.targets.assign(batch.targets, batch.targets + (head ? tokens : 0));
    cache.lossScale = batch.lossScale;
  }
  // Between two layers, the output of one is the input of the next, which keeps its own copy
  // of it: it is released once the next layer's forward has run (or, with full
  // checkpointing, kept as that layer's input, while the layer's cache goes).
  Buffer<T> input, output;
  const T *in = x;
  for (size_t i = 0; i < layers.size(); ++i) {
    const bool last = i + 1 == layers.size();
    T *out = y;
    if (!last) {
      output = ops->allocate(activation);
      out = output.data();
    }
    if (seconds)
      ops->synchronize();
    const auto start = std::chrono::steady_clock::now();
    {
      std::optional<MemoryScope> recomputed; // the cache lives only while the layer runs
      if (keepInputs)
        recomputed.emplace(ops->memory(), MemoryUse::Working);
      layers[i]->forward(*ops, params + offsets[i], in, batch, out, cache.layers[i]);
    }
    if (seconds) {
      ops->synchronize();
      seconds->push_back(secondsSince(start));
    }
    if (keepInputs) {
      cache.layers[i] = LayerCache<T>();
      if (!last)
        cache.inputs[i + 1] = std::move(output);
    } else {
      input = std::move(output);
    }
    in = out;
  }
}

template <typename T> void LayerChain<T>::recompute(size_t k, const T *params, Cache &cache) const {
  MemoryScope working(ops->memory(), MemoryUse::Working);
  const Tokens batch{cache.tokens.data(), cache.targets.data(), cache.samples, cache.lossScale};
  Buffer<T> output; // the next layer's input, which it kept
  if (!(head && k + 1 == layers.size()))
    output = ops->allocate(cache.samples * sampleSize());
  ops->countLoss(false);
  layers[k]->forward(*ops, params + offsets[k], cache.inputs[k].data(), batch, output.data(),
                     cache.layers[k]);
  ops->countLoss(true);
}

template <typename T>
void LayerChain<T>::inputPass(const T *params, Cache &cache, const T *dy, T *dx, T *dparams,
                              std::vector<double> *seconds) const {
  if (seconds)
    seconds->assign(layers.size(), 0);
  Buffer<T> grad, next;
  const T *upstream = dy;
  for (size_t k = layers.size(); k-- > 0;) {
    const bool first = k == 0;
    T *down = dx;
    if (!first) {
      next = transient(*ops, cache.samples * sampleSize());
      down = next.data();
    }
    if (seconds)
      ops->synchronize();
    const auto start = std::chrono::steady_clock::now();
    if (keepInputs)
      recompute(k, params, cache);
    layers[k]->backwardInput(*ops, params + offsets[k], cache.layers[k], upstream, down);
    if (dparams) {
      layers[k]->backwardWeight(*ops, cache.layers[k], dparams + offsets[k]);
      cache.layers[k] = LayerCache<T>();
    }
    if (keepInputs)
      cache.inputs[k].reset();
    if (seconds) {
      ops->synchronize();
      (*seconds)[k] = secondsSince(start);
    }
    if (!first) {
      grad = std::move(next);
      upstream = grad.data();
    }
  }
}

template <typename T>
void LayerChain<T>::backward(const T *params, Cache &cache, const T *dy, T *dparams, T *dx,
                             std::vector<double> *seconds) const {
  inputPass(params, cache, dy, dx, dparams, seconds);
  cache.layers.clear();
}

template <typename T>
void LayerChain<T>::backwardInput(const T *params, Cache &cache, const T *dy, T *dx,
                                  std::vector<double> *seconds) const {
  inputPass(params, cache, dy, dx, /*dparams=*/nullptr, seconds);
}

template <typename T>
void LayerChain<T>::backwardWeight(Cache &cache, T *dparams, std::vector<double> *seconds) const {
  if (seconds)
    seconds->assign(layers.size(), 0);
  for (size_t k = layers.size(); k-- > 0;) {
    if (seconds)
      ops->synchronize();
    const auto start = std::chrono::steady_clock::now();
    layers[k]->backwardWeight(*ops, cache.layers[k], dparams + offsets[k]);
    cache.layers[k] = LayerCache<T>();
    if (seconds) {
      ops->synchronize();
      (*seconds)[k] = secondsSince(start);
    }
  }
  cache.layers.clear();
}

template <typename T>
void LayerChain<T>::forwardSamples(const T *params, const T *x, const Tokens &batch, T *y,
                                   std::vector<Cache> &caches, std::vector<double> *seconds) const {
  const int64_t row = sampleSize();
  const int64_t step = ops->perSample() ? 1 : batch.samples;
  caches.clear();
  caches.resize((batch.samples + step - 1) / step);
  std::vector<double> one;
  for (int64_t n = 0, k = 0; n < batch.samples; n += step, ++k) {
    Tokens piece = batch;
    piece.tokens = batch.tokens + n * shape.seq;
    piece.targets = batch.targets + n * shape.seq;
    piece.samples = std::min(step, batch.samples - n);
    one.clear();
    forward(params, x ? x + n * row : nullptr, piece, y ? y + n * row : nullptr, caches[k],
            seconds ? &one : nullptr);
    addSeconds(one, seconds);
  }
}

template <typename T>
void LayerChain<T>::backwardSamples(const T *params, std::vector<Cache> &caches, const T *dy,
                                    double *grads, T *dx, std::vector<double> *seconds) const {
  const int64_t row = sampleSize();
  Buffer<T> dparams = pieceGradients(*ops, numParams());
  std::vector<double> one;
  int64_t at = 0; // the first sample of the piece
  for (Cache &cache : caches) {
    const int64_t samples = cache.samples;
    ops->fill(numParams(), T(0), dparams.data());
    backward(params, cache, dy ? dy + at * row : nullptr, dparams.data(),
             dx ? dx + at * row : nullptr, seconds ? &one : nullptr);
    ops->accumulate(numParams(), dparams.data(), grads);
    addSeconds(one, seconds);
    at += samples;
  }
}

template <typename T>
void LayerChain<T>::backwardInputSamples(const T *params, std::vector<Cache> &caches, const T *dy,
                                         T *dx, std::vector<double> *seconds) const {
  const int64_t row = sampleSize();
  std::vector<double> one;
  int64_t at = 0;
  for (Cache &cache : caches) {
    backwardInput(params, cache, dy ? dy + at * row : nullptr, dx ? dx + at * row : nullptr,
                  seconds ? &one : nullptr);
    addSeconds(one, seconds);
    at += cache.samples;
  }
}

template <typename T>
void LayerChain<T>::backwardWeightSamples(std::vector<Cache> &caches, double *grads,
                                          std::vector<double> *seconds) const {
  Buffer<T> dparams = pieceGradients(*ops, numParams());
  std::vector<double> one;
  for (Cache &cache : caches) {
    ops->fill(numParams(), T(0), dparams.data());
    backwardWeight(cache, dparams.data(), seconds ? &one : nullptr);
    ops->accumulate(numParams(), dparams.data(), grads);
    addSeconds(one, seconds);
  }
}

template void initialiseLayer<float>(runtime::LayerKind, const GptShape &, float *, uint64_t,
                                     int64_t);
template void initialiseLayer<double>(runtime::LayerKind, const GptShape &, double *, uint64_t,
                                      int64_t);
template class LayerChain<float>;
template class LayerChain<double>;
template std::unique_ptr<Layer<float>> makeLayer<float>(runtime::LayerKind, const GptShape &,
                                                        Checkpointing);
template std::unique_ptr<Layer<double>> makeLayer<double>(runtime::LayerKind, const GptShape &,
                                                          Checkpointing);

} // namespace conduit::model
