//===- LatentAttention.h - multi-head latent attention ----------*- C++ -*-===//
//
// DeepSeek-V2/V3's attention branch (arXiv 2405.04434 §2.1): queries through a latent of rank
// rq, normalised (or projected directly when rq is 0); keys and values through one shared
// latent of rank rkv, normalised and expanded per head, beside a rotary key part shared by every
// head. With H heads, each query and key is [nope (dn) | rope (dr)] and each value dv wide:
//
//   q  = RMSNorm(x · Wdq) · Wuq          (or x · Wq)          [H × (dn + dr)] per token
//   c  = x · Wdkv = [ckv (rkv) | kr (dr)]
//   kv = RMSNorm(ckv) · Wukv                                  [H × (dn + dv)]: k nope, then v
//   k  = [k nope of the head | Rotary(kr)],  q rope rotated per head
//   y  = residual + Attention(q, k, v) · Wo + bo,  scores scaled by 1 / sqrt(dn + dr)
//
// Parameters, in this order: Wdq [h × rq], the query latent's gain [rq], Wuq [rq × H(dn + dr)]
// (or Wq [h × H(dn + dr)] without a query latent); Wdkv [h × (rkv + dr)], the key/value latent's
// gain [rkv], Wukv [rkv × H(dn + dv)] (each head's k nope columns, then its v columns); Wo
// [H·dv × h]; bo [h] (bias "all"). Every matrix is row-major [in × out]. The two latents' norms
// take DeepSeek's epsilon, 1e-6, whatever the model's (its rms_norm_eps is the blocks').
//
// The attention core is the kernel multi-head attention runs, on heads dn + dr wide: each value
// is zero-padded to that width (the runtime refuses values wider than the queries) and the
// padding of the output dropped. The forward keeps the padded q, k and v (rotated), the
// probabilities (not with selective checkpointing of the attention core: the input gradient
// computes them again with the same kernel), both latents before and after their norms with
// the norms' statistics, the shared rotary key and the output projection's input. Selective
// checkpointing of the up projections (`mla_up_proj`) drops q, k and v: recompute() computes
// them again from the latents before the input gradient (gathering again what the forward
// gathered, below). Without rotary positions (learned ones) the rope parts stay as projected.
//
// Over a tensor group of T ranks (Megatron-Core's split) each rank holds H/T of the heads: its
// columns of Wuq (or Wq) and Wukv, its rows of Wo, whose partial products the group sums. The
// down projections, the latents' gains and bo are whole on every rank; their gradients, partial
// by heads (and by rows), are summed over the group in each weight pass (bo's is whole already).
// Without sequence parallelism each rank computes the latents on the whole sequence and its
// input gradient, partial by heads, is summed as a column-parallel projection's is. With
// sequence parallelism and a query latent, as Megatron-Core does, each rank computes the
// latents and their norms on its own rows and the group gathers them (the normalised latents and
// the rotary key: rq + rkv + dr a token, where the attention gathers its input, h a token); the
// latents' gradients are reduce-scattered back to the rows, and the input gradient of the rank's
// rows follows without another sum. The forward keeps the latents of the rank's rows only: the
// weight gradient gathers the normalised ones again, as a column-parallel projection gathers its
// input. Without a query latent the queries' projection reads the whole sequence's input, which
// the rank gathers as the attention does and computes the latents from.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_MODEL_LAYERS_LATENTATTENTION_H
#define CONDUIT_RUNTIME_MODEL_LAYERS_LATENTATTENTION_H

#include "runtime/model/GptShape.h"
#include "runtime/model/layers/Branch.h"

namespace conduit::model {

template <typename T> class LatentAttention final : public Branch<T> {
public:
  /// With `recomputeAttention` (selective checkpointing of the attention core) the forward
  /// does not keep the attention probabilities; with `recomputeHeads` (of the latent up
  /// projections, Megatron-Core's `mla_up_proj`) it does not keep q, k and v: recompute()
  /// computes them again from the kept latents before the input gradient.
  LatentAttention(const GptShape &s, bool recomputeAttention, bool recomputeHeads);

  int64_t numParams() const override { return total; }
  void slice(int64_t wholeAt, int64_t localAt, std::vector<ParameterRun> &runs) const override;
  void initialise(T *params, Random &random) const override;
  void keep(Ops<T> &ops, int64_t samples, LayerCache<T> &cache) const override;
  void forward(Ops<T> &ops, const T *params, const T *x, const T *residual, T *y,
               LayerCache<T> &cache) const override;
  void recompute(Ops<T> &ops, const T *params, const T *x, LayerCache<T> &cache) const override;
  Buffer<T> backwardInput(Ops<T> &ops, const T *params, LayerCache<T> &cache, const T *dy,
                          bool dyKept) const override;
  void backwardWeight(Ops<T> &ops, const LayerCache<T> &cache, const T *x, const T *dy,
                      T *dparams) const override;

private:
  /// This rank's heads, each head's query/key width (the core's head width), and the widths
  /// of q and of the expanded key/value latent per token on this rank.
  int64_t heads() const { return s.localHeads(); }
  int64_t d() const { return s.qkHead(); }
  int64_t qWidth() const { return heads() * d(); }
  int64_t kvWidth() const { return heads() * (s.qkNope + s.vHead); }
  /// The kv down projection's output per token: the latent and the shared rotary key.
  int64_t downWidth() const { return s.kvLora + s.qkRope; }
  /// Whether each rank computes the latents of its own rows only (sequence parallelism with a
  /// query latent), and the rows of `samples` samples it computes them on.
  bool shardedLatents() const { return s.sequenceParallel && s.qLora > 0; }
  int64_t latentRows(int64_t samples) const {
    return samples * (shardedLatents() ? s.localSeq() : s.seq);
  }
  /// The normalised latents (and, `withRope`, the shared rotary key) of every row of the
  /// sequence: the kept ones, or gathered from every rank's rows (one all-gather).
  struct WholeLatents {
    const T *q = nullptr, *kv = nullptr, *rope = nullptr;
    Buffer<T> gathered[3];
  };
  WholeLatents wholeLatents(Ops<T> &ops, const LayerCache<T> &cache, bool withRope) const;
  /// The parameters whole on every rank of a tensor group: the down projections and the
  /// latents' gains (bo aside: its gradient is whole on every rank).
  int64_t replicatedParams() const {
    return (s.qLora > 0 ? s.hidden * s.qLora + s.qLora : 0) + s.hidden * downWidth() + s.kvLora;
  }
  /// The rotary parts laid out as the rotary kernel takes them (the rank's query heads, one key
  /// head and an unused value head, each dr wide), per token.
  int64_t ropeWidth() const { return (heads() + 2) * s.qkRope; }
  int64_t probsSize(int64_t samples) const { return samples * heads() * s.seq * s.seq; }
  /// The latents of the forward's input x (its latentRows()), normalised, and the shared
  /// rotary key, into the cache; then the kernel's q, k and v from the whole sequence's latents
  /// (and from x, the whole sequence's, without a query latent) into qkv, which the forward and
  /// recompute() share.
  void latents(Ops<T> &ops, const T *p, const T *x, LayerCache<T> &cache) const;
  void queriesKeysValues(Ops<T> &ops, const T *p, const T *x, const WholeLatents &latent,
                         int64_t samples, T *qkv) const;
  /// The kernel's q, k and v heads from q, the expanded latent kv and the rotated rope parts,
  /// into qkv (zero-padded values), and the inverse for their gradients (the shared key's
  /// gradient summed over the heads into the rope gradient's key part).
  void assemble(Ops<T> &ops, int64_t rows, const T *q, const T *kv, const T *rope, T *qkv) const;
  void disassemble(Ops<T> &ops, int64_t rows, const T *dqkv, T *dq, T *dkv, T *drope) const;

  GptShape s;
  bool recomputeAttention = false, recomputeHeads = false;
  /// Where each parameter starts in the branch's (−1: absent), and all of them.
  int64_t wDq = -1, gQ = -1, wUq = -1, wQ = -1, wDkv = -1, gKv = -1, wUkv = -1, wO = -1, bO = -1,
          total = 0;
};

} // namespace conduit::model

#endif // CONDUIT_RUNTIME_MODEL_LAYERS_LATENTATTENTION_H
