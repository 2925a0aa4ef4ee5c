//===- Roofline.h - the work of transformer layers on the device -*- C++ -*-===//
//
// A transformer layer's forward and backward as a device runs them: its matrix products with
// their shapes, its attention core (eager: two batched products and the softmax over the
// s x s scores; flash: one fused kernel), and the element-wise traffic around them (norms,
// activations, residuals, the embedding lookup, the loss), on one rank of a Megatron-style
// tensor-parallel group. A product costs the longer of its compute and its bytes at the
// memory bandwidth (the roofline of Williams, Waterman and Patterson, CACM 52(4), 2009); its
// compute is the library's: output tiles in waves over the streaming multiprocessors, each
// tile a main loop over k and an epilogue that writes it (tile and wave quantization, small
// k), at the rate that reproduces the device's measured largest-GEMM ceiling (FP8 products at
// the FP8 one). A fused attention kernel runs at the FlashAttention papers' efficiency for the
// device. Element-wise traffic costs its bytes at the memory bandwidth. Formulas and sources are in
// docs/cost-model.md.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_ANALYSIS_ROOFLINE_H
#define CONDUIT_ANALYSIS_ROOFLINE_H

#include "job/Cluster.h"
#include "job/JobSpec.h"
#include "runtime/plan/Plan.h"

#include <cstdint>
#include <vector>

namespace conduit {

/// The figures of a decoder-only transformer that its work depends on (#pipe.transformer's
/// shape, its attention kernel and the training type).
struct TransformerShape {
  int64_t numLayers = 0, seqLength = 0, hiddenSize = 0, numHeads = 0, numKvHeads = 0,
          ffnHiddenSize = 0, vocabSize = 0;
  bool gated = false;       ///< SwiGLU MLP (gate and up projections), else GELU
  bool rotary = false;      ///< rotary positions on Q and K, else learned positions
  int64_t elementBytes = 2; ///< parameters and activations
  /// The attention kernel (model.attention): eager, or one fused kernel (FlashAttention-style:
  /// no s x s scores kept, the backward recomputes them, causal blocks above the diagonal
  /// skipped) priced as FusedAttention::kernel says.
  AttentionKind attention = AttentionKind::Eager;
  /// How the element-wise operations run (model.elementwise): fused kernels, or PyTorch's
  /// eager mode op by op, whose extra traffic EagerBytes counts.
  ElementwiseKind elementwise = ElementwiseKind::Fused;
  bool rmsNorm = false; ///< the norms are RMSNorms, else LayerNorms
  /// The blocks' linear layers run in FP8 (Transformer Engine's recipe: inputs cast with their
  /// scales, outputs in the element type, weight gradients accumulated in fp32).
  bool fp8 = false;
  /// Their casts take each tensor's own amax in a pass before the cast (current scaling),
  /// rather than in the cast from an amax history (delayed scaling).
  bool fp8CurrentScaling = false;
  /// Per-head width of queries, keys and values (Qwen3's head_dim); 0: hidden / heads.
  int64_t headDim = 0;
  /// An RMSNorm over each head's queries and keys (Qwen3's q/k norms).
  bool qkNorm = false;
  /// Multi-token prediction modules after the blocks (DeepSeek-V3), blocks numLayers on.
  int64_t mtpLayers = 0;
  /// Multi-head latent attention (DeepSeek-V2/V3), kvLoraRank 0 without it: queries through a
  /// rank-qLoraRank latent (0: directly), keys and values through a rank-kvLoraRank latent,
  /// per head qkNopeHeadDim + qkRopeHeadDim wide for the scores and vHeadDim for the values.
  int64_t qLoraRank = 0, kvLoraRank = 0, qkNopeHeadDim = 0, qkRopeHeadDim = 0, vHeadDim = 0;
  /// Mixture of experts (numExperts 0: none): the blocks from index denseLayers on replace the
  /// MLP by a router over numExperts experts, topK of them per token, each an MLP of
  /// expertFfnHiddenSize, beside shared experts of total width sharedFfnHiddenSize (with
  /// sharedExpertGate, their output gated per token by a product with the input). The routed
  /// experts are divided over `expert` ranks (E), and `imbalance` bounds the busiest rank's
  /// routed tokens over the mean.
  int64_t numExperts = 0, topK = 0, expertFfnHiddenSize = 0, sharedFfnHiddenSize = 0,
          denseLayers = 0, expert = 1;
  bool sharedExpertGate = false;
  double imbalance = 1;
  /// The router and routed experts priced as Megatron-LM's MoE layer runs them
  /// (ExpertKernels::Megatron: slower products, more passes over the routed tokens) rather
  /// than as grouped GEMM kernels.
  bool megatronExperts = false;

  /// With selective checkpointing, what a block's backward recomputes first
  /// (runtime::RecomputeModule bits; LayerWork::recomputed); 0 without it.
  uint32_t recomputeModules = 0;

  /// Whether block `block` (0-based) has experts.
  bool blockHasExperts(int64_t block) const { return numExperts > 0 && block >= denseLayers; }
};

/// Which dimension of a product grows with the micro-batch's samples.
enum class Grows {
  Rows,  ///< m: tokens stacked in the rows (a forward or input-gradient GEMM)
  Inner, ///< k: tokens summed over (a weight-gradient GEMM)
  Batch, ///< the number of products (the attention core: one per sample and head)
};

/// `batch` products C[m x n] = A[m x k] · B[k x n], sized for one sample.
struct Gemm {
  double m = 0, n = 0, k = 0;
  double batch = 1;
  Grows grows = Grows::Rows;
  /// C is a weight gradient accumulated in fp32 (read and written, 4 bytes each) rather than
  /// written once in the element type.
  bool accumulates = false;
  /// A and B are FP8 (one byte each) and the product runs at the FP8 rate.
  bool fp8 = false;
  /// The kernel's time over the GEMM model's: 1 for the library's GEMMs, more for a
  /// framework's kernels measured slower (TransformerShape::megatronExperts).
  double slowdown = 1;

  /// The product for `samples` samples.
  Gemm forSamples(int64_t samples) const;
  double flops() const { return 2 * m * n * k * batch; }
  /// Bytes read and written: A and B in the element type (one byte in FP8), C written (or
  /// accumulated).
  double bytes(int64_t elementBytes) const;
};

/// A fused attention kernel over `heads` heads of one sample: s queries against s keys of
/// `headDim` dimensions, causal (the blocks above the diagonal skipped). Its forward computes
/// QKᵀ and PV; its backward recomputes QKᵀ and computes dV, dP, dQ and dK: 2.5 forwards, as
/// the FlashAttention papers count it.
struct FusedAttention {
  double heads = 0, seqLength = 0, headDim = 0;
  bool backward = false;
  /// Which fused kernel: the device's best (Flash), FlashAttention-2's generation (Flash2, at
  /// DeviceKernels::flash2Forward), or FlashAttention in Triton (FlashTriton: FlashAttention-2's
  /// rate divided by FlashAttention-2's measured speed-up over it, 1.4 forward and 2 backward).
  AttentionKind kernel = AttentionKind::Flash;

  /// The FLOPs it executes for `samples` samples: 4·s²·d per head, halved by causality,
  /// times 2.5 for the backward.
  double flops(int64_t samples = 1) const;
};

/// One pass over one sample: its products, its fused attention (if any) and its element-wise
/// traffic.
struct Work {
  std::vector<Gemm> gemms;
  FusedAttention attention;
  double memoryBytes = 0; ///< element-wise bytes read and written per sample
  /// FP8 scaling's bytes read and written per sample (the casts and their amax passes), kept
  /// apart from memoryBytes; both run at the element-wise kernels' rate
  /// (Roofline::streamBandwidth).
  double castBytes = 0;

  /// The FLOPs of its products and of its fused attention (as executed: causal halved).
  double flops() const;
};

/// A layer's passes on one tensor-parallel rank. The forward is `forward` and then
/// `attentionCore` (blocks only: QKᵀ, softmax, AV, or the fused kernel). `recomputed` is what
/// selective checkpointing repeats before the backward (TransformerShape::recomputeModules):
/// the eager attention core, the norms, the dense MLP, the routed experts' activation, latent
/// attention's up projections; a fused attention kernel keeps nothing it could repeat.
struct LayerWork {
  Work forward, attentionCore, recomputed, inputGradient, weightGradient;
  /// Of forward, inputGradient and weightGradient, a block with experts' mixture-of-experts
  /// layer without its shared experts: the router's product and softmax, and the busiest
  /// expert rank's grouped GEMMs, activation and permutation of the tokens routed to it.
  /// tests/bench/moe_layer_check.py holds them against measured MoE layers.
  Work expertsForward, expertsInputGradient, expertsWeightGradient;
};

/// A multi-token prediction module (TransformerShape::mtpLayers) is a block with, around it,
/// its inputs' norms and projection and the shared head's work.
enum class TransformerLayer { Embedding, Block, Head, Mtp };

/// The work of `layer` on one of `tensor` ranks, partitioned as Megatron-LM partitions it
/// (Shoeybi et al., arXiv 1909.08053): the QKV and MLP up/gate projections split their
/// columns (n / T), the attention output and MLP down projections their rows (k / T), the
/// attention core its heads, the embedding and the LM head their vocabulary. Norms and
/// residuals are replicated on every rank unless `sequenceParallel`, which splits them along
/// the sequence (Korthikanti et al., arXiv 2205.05198). `tensor` must divide the heads,
/// key/value heads, FFN width and vocabulary for the shapes to be exact. A block with experts
/// (`block`, 0-based, from shape.denseLayers on) routes this rank's T-th of the tokens: the
/// router (kept whole on every rank), the shared experts split as the dense MLP, and the
/// routed experts as one grouped GEMM per projection (LayerWork::expertsForward, ...).
LayerWork transformerWork(const TransformerShape &shape, TransformerLayer layer, int64_t tensor,
                          bool sequenceParallel, int64_t block = 0);

/// A device as the cost model prices kernels on it.
struct Roofline {
  double flopRate = 1; ///< BF16 peak times the efficiency: the largest GEMMs' rate
  double memoryBandwidth = 1;
  int64_t elementBytes = 2;
  /// The device's kernels; without them (`sms` 0) a product takes the longer of its FLOPs at
  /// `flopRate` and its bytes, and a fused attention its FLOPs at `flopRate`.
  DeviceKernels kernels{};
  double peakFlops = 0; ///< BF16 peak, of which the fused attention's efficiencies are parts

  /// The roofline of `cluster` for elements of `elementBytes` bytes.
  static Roofline of(const Cluster &cluster, int64_t elementBytes);

  /// The longer of the product's compute and its bytes at the memory bandwidth, for `samples`
  /// samples.
  double time(const Gemm &gemm, int64_t samples) const;
  /// The product's compute alone: its tiles in waves over the SMs (each a main loop over k at
  /// the calibrated rate and an epilogue writing the tile at the SM's share of the bandwidth),
  /// or its FLOPs at the rate without the device's kernels. For `samples` = 1, of `gemm` as is.
  double computeTime(const Gemm &gemm) const;
  /// A fused attention's time for `samples` samples.
  double time(const FusedAttention &attention, int64_t samples) const;
  /// The products', the fused attention's and the element-wise bytes' times.
  double time(const Work &work, int64_t samples) const;
  /// The bytes/s an element-wise kernel streams: the memory bandwidth times the device's
  /// DeviceKernels::streamEfficiency (all of it without the device's kernels).
  double streamBandwidth() const;
  /// The products' and the fused attention's times alone.
  double gemmTime(const Work &work, int64_t samples) const;

  /// FLOP/s of one SM's main loop, BF16 and FP8: what reproduces the measured ceilings (set
  /// by `of`; 0: the plain roofline).
  double smRate = 0, smRateFp8 = 0;
};

} // namespace conduit

#endif // CONDUIT_ANALYSIS_ROOFLINE_H
