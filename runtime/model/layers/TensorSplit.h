//===- TensorSplit.h - a layer's math over its tensor group -----*- C++ -*-===//
//
// The pieces every layer unit is written with, for any tensor size T: the projections split
// as Megatron-LM splits them (Shoeybi et al., arXiv:1909.08053) — column-parallel (each rank
// holds some output columns and sees the whole input) and row-parallel (each rank holds some
// input rows and the group sums the partial products) — their gradients, and the sequence
// gathers and reduce-scatters of sequence parallelism (Korthikanti et al., arXiv:2205.05198).
//
// With T = 1 there is no group to call: every collective here is skipped, and each piece makes
// exactly the kernel calls of the unsplit layer (a row-parallel projection accumulates onto a
// copy of its residual in its GEMM, where T > 1 adds the residual after the group's sum), so
// that a layer written once computes the unsplit model's bits with one rank. With T > 1 the
// collectives are issued in the order runtime/plan/TensorCollectives.h states for the layer
// that calls them.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_MODEL_LAYERS_TENSORSPLIT_H
#define CONDUIT_RUNTIME_MODEL_LAYERS_TENSORSPLIT_H

#include "runtime/model/GptShape.h"
#include "runtime/model/layers/Layer.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace conduit::model {

/// full [samples × seq × width] from every rank's sequence shard [samples × seq/T × width]:
/// the group's all-gather, whose result is rank-major, put back in sample order.
template <typename T>
void gatherSequence(Ops<T> &ops, const GptShape &s, int64_t samples, int64_t width, const T *shard,
                    T *full);
/// This rank's sequence shard of the group's sum of `full` [samples × seq × width].
template <typename T>
void reduceScatterSequence(Ops<T> &ops, const GptShape &s, int64_t samples, int64_t width,
                           const T *full, T *shard);
/// `rows` [samples × local seq × h] over the whole sequence: gathered into `scratch` with
/// sequence parallelism, else `rows` itself.
template <typename T>
const T *wholeSequence(Ops<T> &ops, const GptShape &s, int64_t samples, const T *rows,
                       Buffer<T> &scratch);
/// The whole-sequence rows of a row-parallel projection's partial sums `partial` [samples ×
/// seq × h], summed over the group into `out`: in place (out = partial) without sequence
/// parallelism, else this rank's sequence shard. Nothing with one rank.
template <typename T>
void reduceRows(Ops<T> &ops, const GptShape &s, int64_t samples, T *partial, T *out);

/// y [rows × n] = x · w (+ b), with x this rank's rows [samples × local seq × h], gathered over
/// the sequence first, and w [h × n] this rank's columns ([n × h] when `transposed`).
template <typename T>
void columnParallel(Ops<T> &ops, const GptShape &s, int64_t samples, int64_t n, const T *x,
                    const T *w, const T *b, T *y, bool transposed = false);
/// out = residual + the group's sum of in [rows × k] · w (+ b), w [k × h] this rank's rows of a
/// row-parallel projection; out and residual on this rank's rows.
template <typename T>
void rowParallel(Ops<T> &ops, const GptShape &s, int64_t samples, int64_t k, const T *in,
                 const T *w, const T *b, const T *residual, T *out);
/// out = the group's sum of in [rows × k] · w (w [k × h]; [h × k] when `transposed`: the
/// input gradient of a column-parallel projection), on this rank's rows of out.
template <typename T>
void reducedProduct(Ops<T> &ops, const GptShape &s, int64_t samples, int64_t k, const T *in,
                    const T *w, bool transposed, T *out);
/// A projection's weight gradient over `rows` rows: dw [in × out] += xᵀ · dy, and its bias's,
/// db += the rows of dy, when it has one (db not null).
template <typename T>
void weightGradient(Ops<T> &ops, int64_t rows, int64_t in, int64_t out, const T *x, const T *dy,
                    T *dw, T *db);

/// What the two halves of a backward read of an output gradient `dy` [samples × local seq × h]
/// over the whole sequence: gathered into a buffer of its own with sequence parallelism; else
/// `dy` itself where the caller keeps it until the weight gradient (`kept`: then the buffer
/// is empty), or a copy. The result's data, or dy where it is empty, is the whole gradient.
template <typename T>
Buffer<T> outputGradient(Ops<T> &ops, const GptShape &s, int64_t samples, const T *dy, bool kept);

/// The parameters of a branch that is a column-parallel in-projection, then a row-parallel
/// out-projection (Megatron-LM's split of the attention and of the MLP), on a shape's tensor
/// rank, in this order: Win [h × in] (this rank's `in` columns), bin [in], Wout [out × h] (this
/// rank's `out` rows), bout [h] (replicated, added once after the group's sum); each bias where
/// the shape has it. What lies between the two projections is the branch's own; these are the
/// pieces around it, and the cache slots they use: the branch keeps Wout's input at SavedOutIn
/// of its saved buffers, and its stash holds the output gradient over the whole sequence at
/// StashDy and Win's output gradient at StashDin.
class Projections {
public:
  Projections(const GptShape &s, int64_t in, bool inBias, int64_t out, bool outBias);

  enum { SavedOutIn = 0 };
  enum { StashDy, StashDin, NumStashed };

  /// Where each parameter starts in the branch's (−1: absent), and all of them.
  int64_t wIn = -1, bIn = -1, wOut = -1, bOut = -1, total = 0;
  /// The biases within `params` (or their gradients), null where absent.
  template <typename P> P *inBias(P *params) const { return bIn >= 0 ? params + bIn : nullptr; }
  template <typename P> P *outBias(P *params) const { return bOut >= 0 ? params + bOut : nullptr; }

  /// Where this rank's parameters lie in the whole branch's (`whole`: the unsplit shape's
  /// layout): runs appended to `runs`, offset by wholeAt and localAt. `columns` are the runs of
  /// Win's whole columns (first, count) that this rank holds, in its local order.
  void slice(const Projections &whole, const std::vector<std::pair<int64_t, int64_t>> &columns,
             int64_t wholeAt, int64_t localAt, std::vector<ParameterRun> &runs) const;

  /// The input gradient's first step, from the output gradient dy: stashes in cache.stash what
  /// the weight gradient reads of dy (outputGradient) and Win's output gradient, still to be
  /// computed, [rows × in]; returns Wout's input gradient dy · Woutᵀ [rows × out] in working
  /// memory.
  template <typename T>
  Buffer<T> backwardOut(Ops<T> &ops, const T *params, LayerCache<T> &cache, const T *dy,
                        bool dyKept) const;
  /// The input gradient's last step: dx [this rank's rows × h] from Win's stashed output
  /// gradient.
  template <typename T>
  Buffer<T> backwardIn(Ops<T> &ops, const T *params, const LayerCache<T> &cache) const;
  /// Both projections' weight gradients, into dparams: Wout's from its kept input, Win's from x
  /// (the branch's input) and its stashed output gradient.
  template <typename T>
  void backwardWeight(Ops<T> &ops, const LayerCache<T> &cache, const T *x, const T *dy,
                      T *dparams) const;

private:
  GptShape s;
  int64_t in = 0, out = 0;
};

/// Host token ids mapped to this rank's vocabulary rows: id − first, or −1 for another rank's
/// (with one rank, the ids themselves).
std::vector<int32_t> localTokens(const GptShape &s, const int32_t *tokens, int64_t n);

/// The gradients of replicated parameters of which each rank of the tensor group computes a
/// part (`partial`): the norms' over its own shard of the sequence (sequence parallelism),
/// latent attention's down projections' and latents' gains from its own heads. Collected in
/// one buffer of working memory and summed over the group with one all-reduce; where they are
/// whole on every rank they go straight to where they belong.
template <typename T> class PartialGradients {
public:
  /// Room for `n` elements of such gradients.
  PartialGradients(Ops<T> &ops, bool partial, int64_t n);
  /// Where to accumulate the `n` gradients that belong at `dp`: dp itself, or the buffer's
  /// next n elements.
  T *at(T *dp, int64_t n);
  /// Sums the buffer over the group and adds each part to where it belongs, in the order they
  /// were asked for.
  void reduce();

private:
  Ops<T> &ops;
  bool partial = false;
  Buffer<T> buffer;
  int64_t used = 0;
  std::vector<std::pair<T *, int64_t>> targets;
};

} // namespace conduit::model

#endif // CONDUIT_RUNTIME_MODEL_LAYERS_TENSORSPLIT_H
