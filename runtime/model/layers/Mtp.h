//===- Mtp.h - a multi-token prediction module ------------------*- C++ -*-===//
//
// Module k of DeepSeek-V3's multi-token prediction (arXiv 2412.19437, §2.2; depth k + 1 there),
// a layer of the chain between the blocks and the head, on the head's stage. At position i it
// takes the previous depth's hidden state h (the main model's for k = 0) and the embedding e of
// the token k + 1 ahead, and predicts the token k + 2 ahead:
//
//   u = [ENorm(e) | HNorm(h)] · M      (M [2h × h]: the embedding's rows first, as DeepSeek's
//                                      released eh_proj and Megatron-Core order them)
//   b = Block(u)                       (a block of the model's kind, with experts where the
//                                      model's blocks have them; layers/Block.h)
//   logits = HeadNorm(b) · W           (W the output head's matrix, shared with the head)
//
// and adds the cross-entropy of the positions that have such a token (the first seq − k − 1 of
// each sample; the others' loss is not counted, and the last k, past the sample's end, embed
// token 0; all of them still run through the block, routed to experts as any token, as
// Megatron-Core's zero-filled shift runs them), times the
// batch's loss scale and λ / D, to the training loss. The modules' mean cross-entropy goes to
// the Ops's multi-token prediction loss, apart from the language model's.
//
// Parameters, in local order: the token table's copy [vocab × h] (the first module only, and
// only with an untied head: tied, the head's matrix is that copy), ENorm, HNorm, M, HeadNorm,
// then the block's, whose routed experts thus come last. The other modules read the first's
// table, and every module the head's matrix, where the chain says they lie (placeShared); their
// gradients go there too, where the head's and the table's own accumulate.
//
// Between the layers a module passes on the main hidden state and, unless it is the last, its
// own b (the next module's h): two activations per sample (outputWidth). Its input gradient
// returns the main state's gradient with HNorm's added (the first), or both apart.
//
// Over a tensor group the module is split as the layers it borrows from are: the table's copy
// and the head's matrix by vocabulary rows (the lookup summed over the group, the cross-entropy
// vocabulary-parallel, as the embedding and the head compute them), the block as a block; the
// norms and M are whole on every rank and computed on its rows (its sequence shard with
// sequence parallelism, whose partial gradients the group sums once per weight pass). The
// collectives are runtime/plan/TensorCollectives.h's. The modules embed the tokens only,
// without a learned position table.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_MODEL_LAYERS_MTP_H
#define CONDUIT_RUNTIME_MODEL_LAYERS_MTP_H

#include "runtime/model/GptShape.h"
#include "runtime/model/layers/Block.h"
#include "runtime/model/layers/Layer.h"
#include "runtime/model/layers/Norm.h"

namespace conduit::model {

template <typename T> class Mtp final : public Layer<T> {
public:
  /// Module `depth` (0 for the first); `recomputed` and `experts` as its block's (Block.h).
  Mtp(const GptShape &s, int64_t depth, uint32_t recomputed, bool experts);

  CONDUIT_LAYER_OVERRIDES(T)
  int64_t expertParams() const override { return block.expertParams(); }
  void placeExperts(int64_t at) override { block.placeExperts(at - this->at[Blk]); }
  void placeExpertsApart(const T *params, T *grads) override {
    block.placeExpertsApart(params, grads);
  }
  int64_t loadBalancedBias() const override {
    const int64_t bias = block.loadBalancedBias();
    return bias < 0 ? -1 : at[Blk] + bias;
  }
  void placeShared(int64_t tokenTable, int64_t headMatrix) override {
    tableAt = tokenTable;
    headAt = headMatrix;
  }
  int64_t outputWidth() const override { return last() ? 1 : 2; }
  /// Whether this module keeps the token table's copy among its parameters.
  bool ownsTable() const { return depth == 0 && !s.tied; }

private:
  /// The units' parameters, in this order; at[Blk] + the block's: all.
  enum Part { Table, ENorm, HNorm, Proj, HeadNorm, Blk, NumParts };
  bool last() const { return depth + 1 == s.mtpLayers; }
  /// Positions of a sample whose token k + 2 ahead exists: the rows the loss counts.
  int64_t counted() const { return std::max<int64_t>(s.seq - depth - 1, 0); }

  GptShape s;
  int64_t depth = 0;
  bool experts = false; ///< the block's
  Norm<T> enorm, hnorm, headNorm;
  Block<T> block;
  int64_t at[NumParts + 1] = {};
  /// The shared token table and head matrix, as offsets from the layer's parameters.
  int64_t tableAt = 0, headAt = 0;
};

} // namespace conduit::model

#endif // CONDUIT_RUNTIME_MODEL_LAYERS_MTP_H
