//===- Roofline.cpp - the work of transformer layers on the device --------===//
//
// Per sample of s tokens on one of T ranks, with h hidden, a heads of d = h/a, kv key/value
// heads (width c = kv·d), f FFN width, V vocabulary, e bytes per element. A forward GEMM
// Y[s x n] = X[s x k] · W[k x n] has the input gradient dX[s x k] = dY[s x n] · Wᵀ[n x k] and
// the weight gradient dW[k x n] = Xᵀ[k x s] · dY[s x n]: the same FLOPs in three shapes, the
// last summing over the tokens. Element-wise passes read their inputs and write their outputs
// once (what a fused kernel does); their backwards read the input and the output gradient and
// write the input gradient. Eager attention materialises the s x s scores, as the activation
// model of Korthikanti et al. assumes; flash attention is one fused kernel per pass. A
// product's compute follows the library's tiles and waves (Roofline::computeTime). PyTorch's
// eager mode adds the traffic of its op-by-op kernels (EagerBytes).
//
//===----------------------------------------------------------------------===//

#include "analysis/Roofline.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <tuple>

using namespace conduit;

Gemm Gemm::forSamples(int64_t samples) const {
  Gemm g = *this;
  const double b = static_cast<double>(samples);
  switch (grows) {
  case Grows::Rows:
    g.m *= b;
    break;
  case Grows::Inner:
    g.k *= b;
    break;
  case Grows::Batch:
    g.batch *= b;
    break;
  }
  return g;
}

double Gemm::bytes(int64_t elementBytes) const {
  const double e = static_cast<double>(elementBytes);
  const double operand = fp8 ? 1 : e;
  return batch * ((m * k + k * n) * operand + m * n * (accumulates ? 8 : e));
}

double Work::flops() const {
  double total = attention.flops();
  for (const Gemm &g : gemms)
    total += g.flops();
  return total;
}

double FusedAttention::flops(int64_t samples) const {
  // 4·s²·d per head (QKᵀ and PV), half of it under the causal mask; the backward 2.5 times.
  return static_cast<double>(samples) * heads * 2 * seqLength * seqLength * headDim *
         (backward ? 2.5 : 1);
}

namespace {

double ceilDiv(double a, double b) { return std::ceil(a / b - 1e-9); }

/// The GEMM model's compute time of `g` with output tiles of tileM x tileN on `kernels`'
/// device, whose SMs' main loops run at `smRate`: the output's tiles run in waves of one tile
/// per SM; a tile takes its main loop (k in steps of tileK) and its epilogue, which writes (or
/// accumulates) the tile while every SM does the same, at the SM's share of the bandwidth.
/// An output narrower than the tile gets a tile as narrow, at the same rate per FLOP.
/// When the tiles are fewer than the SMs the library may split k over 2, 4, ... times as many
/// (split-K): partial tiles written in fp32, summed by a reduction at the memory bandwidth;
/// the fastest choice counts. (The choices only shrink as m, n or the batch grow, and each is
/// monotone in every dimension, so the time is too.)
double tiledTime(const Gemm &g, const DeviceKernels &kernels, double smRate, double bandwidth,
                 double elementBytes, double tileM, double tileN) {
  const double sms = static_cast<double>(kernels.sms);
  const double tileK = static_cast<double>(kernels.tileK);
  // An output narrower than the tile gets a tile as narrow (in steps of 16, the tensor
  // cores' granularity) rather than a padded one.
  tileM = std::min(tileM, 16 * ceilDiv(g.m, 16));
  tileN = std::min(tileN, 16 * ceilDiv(g.n, 16));
  const double outputTiles = g.batch * ceilDiv(g.m, tileM) * ceilDiv(g.n, tileN);
  const double steps = ceilDiv(g.k, tileK);
  const double outBytes = g.accumulates ? 8 : elementBytes;
  const double stepTime = 2 * tileM * tileN * tileK / smRate;
  double best = std::numeric_limits<double>::infinity();
  for (double split = 1; split == 1 || outputTiles * split <= sms; split *= 2) {
    const double waves = kernels.streamK ? std::max(1.0, outputTiles * split / sms)
                                         : ceilDiv(outputTiles * split, sms);
    const double epilogue = tileM * tileN * (split > 1 ? 4 : outBytes) * sms / bandwidth;
    double time = waves * (ceilDiv(steps, split) * stepTime + epilogue);
    if (split > 1)
      time += g.batch * g.m * g.n * (split * 4 + outBytes) / bandwidth;
    best = std::min(best, time);
  }
  return best;
}

} // namespace

Roofline Roofline::of(const Cluster &cluster, int64_t elementBytes) {
  Roofline r;
  r.flopRate = cluster.peakFlops * cluster.efficiency;
  r.memoryBandwidth = cluster.memoryBandwidth;
  r.elementBytes = elementBytes;
  r.peakFlops = cluster.peakFlops;
  const DeviceKernels &k = cluster.kernels;
  if (k.sms <= 0 || k.tileM <= 0 || k.tileN <= 0 || k.tileK <= 0 || !(k.ceilingM > 0) ||
      !(k.ceilingN > 0) || !(k.ceilingK > 0) || !(cluster.memoryBandwidth > 0))
    return r;
  // The main loop's rate that makes the model's time of the measured shape (BF16, the
  // library's tile in its better orientation) equal its FLOPs at the ceiling: each
  // orientation's time is a/rate + epilogue, so the slowest rate that reaches the target.
  const Gemm measured{k.ceilingM, k.ceilingN, k.ceilingK, 1, Grows::Rows, false};
  const double target = measured.flops() / r.flopRate;
  const double inf = std::numeric_limits<double>::infinity();
  double rate = inf;
  for (auto [tm, tn] : {std::pair{k.tileM, k.tileN}, std::pair{k.tileN, k.tileM}}) {
    const double atUnitRate = tiledTime(measured, k, 1.0, inf, 2, tm, tn);
    const double epilogue = tiledTime(measured, k, inf, r.memoryBandwidth, 2, tm, tn);
    if (target > epilogue)
      rate = std::min(rate, atUnitRate / (target - epilogue));
  }
  if (rate == inf)
    return r;
  r.kernels = k;
  r.smRate = rate;
  // FP8: the same tiles, the main loop faster by the ratio of the FP8 ceiling to the BF16 one.
  if (k.fp8PeakFlops > 0 && k.fp8Efficiency > 0)
    r.smRateFp8 = rate * k.fp8PeakFlops * k.fp8Efficiency / r.flopRate;
  return r;
}

namespace {

/// Megatron-LM's MoE layer on an H100 against the cost model's grouped kernels, the
/// least-squares fit to the Megatron-LM bars of SonicMoE's Figure 14 (arXiv 2512.14080;
/// testdata/measured/sonicmoe-h100-moe-layers.json, `tests/bench/moe_layer_check.py --fit
/// megatron`): its router and grouped GEMMs take kMegatronExpertSlowdown times the model's
/// time, and its forward and backward read and write each routed token's hidden + expert-FFN
/// elements kMegatronExpertPasses more times (the unfused permutation, activation, weighting
/// and their gradients). Within 13% of each of the twelve layers' measured passes.
constexpr double kMegatronExpertSlowdown = 1.37;
constexpr double kMegatronExpertPasses[2] = {6.1, 13.3}; // forward, backward

/// A token GEMM of the forward, Y[s x n] = X[s x k] · W[k x n], and its two gradients.
/// In FP8, its three GEMMs take FP8 operands.
struct Linear {
  double s, k, n;
  bool fp8 = false;
  double slowdown = 1; ///< Gemm::slowdown
  Gemm forward() const { return {s, n, k, 1, Grows::Rows, false, fp8, slowdown}; }
  Gemm inputGradient() const { return {s, k, n, 1, Grows::Rows, false, fp8, slowdown}; }
  Gemm weightGradient() const { return {k, n, s, 1, Grows::Inner, true, fp8, slowdown}; }
};

void addLinear(LayerWork &work, const Linear &linear) {
  work.forward.gemms.push_back(linear.forward());
  work.inputGradient.gemms.push_back(linear.inputGradient());
  work.weightGradient.gemms.push_back(linear.weightGradient());
}

/// PyTorch's eager mode (ElementwiseKind): the bytes per element that its kernels read and
/// write beyond the fused kernels' (which read each input and write each output once), op by
/// op as the reference Llama code runs them. A cast between the element type and fp32 reads e
/// and writes 4 bytes (none in fp32). All zero for fused element-wise operations.
struct EagerBytes {
  /// An RMSNorm in fp32 tensor ops, per normed element. Forward: cast up, square, mean (a
  /// read), scale, cast down, weight (for the fused kernel's one pass). Backward,
  /// autograd's 13 passes: the weight's product and gradient and its sum over the tokens, the
  /// two casts, the scale's two products and sum, the mean's expansion, the square's three
  /// passes and the sum of x's two gradients (the fused kernel's: read x and dy, write dx).
  double normForward = 0, normBackward = 0;
  /// Rotary positions on one element of Q or K, each way: cast up, a complex product with the
  /// angles, cast down (the fused kernel reads and writes e).
  double rotary = 0;
  /// SwiGLU per element of the hidden width: SiLU and the product two kernels (forward 2e
  /// more), and their gradients three (backward 4e more).
  double swigluForward = 0, swigluBackward = 0;
  /// The loss per logit: the logits cast to fp32 and a log-softmax that writes its output
  /// (forward), the negative log-likelihood's zero-filled gradient, the log-softmax's gradient
  /// and the cast back (backward), against the fused loss's (e + 4) bytes each way.
  double lossForward = 0, lossBackward = 0;
};

EagerBytes eagerBytes(const TransformerShape &x, double e) {
  EagerBytes b;
  if (x.elementwise == ElementwiseKind::Fused)
    return b;
  const double cast = e < 4 ? e + 4 : 0;
  if (x.rmsNorm && x.elementwise == ElementwiseKind::Eager) {
    b.normForward = 2 * cast + 20;          // square 8, mean 4, scale 8; the weight 2e as fused
    b.normBackward = 3 * e + 2 * cast + 68; // 6e + 2 casts + 68 fp32 bytes, less fused 3e
  }
  b.rotary = 2 * cast + 8 - 2 * e;
  b.swigluForward = 2 * e;
  b.swigluBackward = 4 * e;
  b.lossForward = cast + 8 - (e + 4);
  b.lossBackward = 12 + cast - e;
  return b;
}

/// FP8's scaling, per element cast: read e bytes and write one byte twice (the operand and
/// its transpose, which the other GEMM of the backward reads), the amax taken in the same pass
/// (delayed scaling), or read once more before it for the tensor's own amax (current
/// scaling).
double castBytesPerElement(const TransformerShape &x, double e) {
  return (x.fp8CurrentScaling ? 2 * e : e) + 2;
}

/// FP8's scaling, per sample: the forward casts each linear layer's input X (s x k) and the
/// backward its output gradient dY (s x n). Weights are cast once per step, which this leaves
/// out; Transformer Engine fuses some delayed-scaling casts into the norms, so this is an
/// upper bound there.
void addScaling(Work &forward, Work &inputGradient, const Linear &linear, double perElement) {
  forward.castBytes += perElement * linear.s * linear.k;
  inputGradient.castBytes += perElement * linear.s * linear.n;
}

/// A product of the mixture-of-experts layer: its forward, input-gradient and weight-gradient
/// GEMMs in the block's passes and in the layer's own (LayerWork::expertsForward, ...).
void addExpertsGemms(LayerWork &work, const Gemm &forward, const Gemm &input, const Gemm &weight) {
  for (auto [all, experts, gemm] :
       {std::tuple{&work.forward, &work.expertsForward, forward},
        std::tuple{&work.inputGradient, &work.expertsInputGradient, input},
        std::tuple{&work.weightGradient, &work.expertsWeightGradient, weight}}) {
    all->gemms.push_back(gemm);
    experts->gemms.push_back(gemm);
  }
}

/// Grouped products: `batch` experts' products of `rows` rows each (per sample), one kernel
/// whose tiles of all experts fill the waves together (each expert's rows padded to whole
/// tiles: the grouped GEMM's loss to small or uneven groups).
void addGrouped(LayerWork &work, double rows, double k, double n, double batch, bool fp8,
                double slowdown) {
  addExpertsGemms(work, {rows, n, k, batch, Grows::Rows, false, fp8, slowdown},
                  {rows, k, n, batch, Grows::Rows, false, fp8, slowdown},
                  {k, n, rows, batch, Grows::Inner, true, fp8, slowdown});
}

LayerWork blockWork(const TransformerShape &x, double t, bool sequenceParallel, bool experts) {
  const double e = static_cast<double>(x.elementBytes);
  const double s = static_cast<double>(x.seqLength), h = static_cast<double>(x.hiddenSize);
  const double heads = static_cast<double>(x.numHeads) / t;
  const bool latent = x.kvLoraRank > 0;
  const double d =
      x.headDim > 0 ? static_cast<double>(x.headDim) : h / static_cast<double>(x.numHeads);
  const double q = x.headDim > 0 ? d * static_cast<double>(x.numHeads) : h; // query width
  const double c = d * static_cast<double>(x.numKvHeads);
  const double f = static_cast<double>(x.ffnHiddenSize) / t;
  const double up = x.gated ? 2 * f : f;
  // Norm and residual elements: the whole sequence on every rank, or its T-th part.
  const double hs = sequenceParallel ? s * h / t : s * h;
  // Latent attention's widths: scores over nope + rope, values of v per head.
  const double rope = static_cast<double>(x.qkRopeHeadDim);
  const double qk = latent ? static_cast<double>(x.qkNopeHeadDim) + rope : d;
  const double dv = latent ? static_cast<double>(x.vHeadDim) : d;

  LayerWork work;
  std::vector<Linear> linears;
  // What selective checkpointing repeats before the backward, besides the attention core
  // (TransformerShape::recomputeModules): the linears it recomputes, and element-wise bytes.
  std::vector<Linear> recomputedLinears;
  const auto recomputes = [&](uint32_t module) { return (x.recomputeModules & module) != 0; };
  if (!latent) {
    linears.push_back({s, h, (q + 2 * c) / t, x.fp8}); // QKV, column-parallel
    linears.push_back({s, q / t, h, x.fp8});           // attention output, row-parallel
    // op: torchtitan's products in its order (wq, wk, wv, wo, w1, w3, w2), every second one
    // recomputed: wk and wo here, w3 (or a GELU MLP's down projection) below.
    if (recomputes(runtime::kRecomputeOp))
      recomputedLinears.insert(recomputedLinears.end(), {{s, h, c / t, x.fp8}, linears.back()});
  } else {
    // The down projections to the latents (whole on every rank, on the whole sequence, or on
    // the rank's rows with sequence parallelism and a query latent), the up projections per
    // head (column-parallel), the output (row-parallel).
    const double ql = static_cast<double>(x.qLoraRank), kvl = static_cast<double>(x.kvLoraRank);
    const double down = sequenceParallel && ql > 0 ? s / t : s;
    const Linear queryUp{s, ql > 0 ? ql : h, heads * qk, x.fp8};
    const Linear keyValueUp{s, kvl, heads * (qk - rope + dv), x.fp8};
    if (ql > 0)
      linears.push_back({down, h, ql, x.fp8});
    linears.push_back(queryUp);
    linears.push_back({down, h, kvl + rope, x.fp8});
    linears.push_back(keyValueUp);
    linears.push_back({s, heads * dv, h, x.fp8});
    // mla_up_proj: the per-head queries, keys and values again from the latents.
    if (recomputes(runtime::kRecomputeLatentUpProjection))
      recomputedLinears.insert(recomputedLinears.end(), {queryUp, keyValueUp});
  }
  // The MLP's element-wise elements of the forward and of the backward (the activation's).
  double mlpForward = (x.gated ? 3 : 2) * s * f, mlpBackward = (x.gated ? 5 : 3) * s * f;
  double routedRows = 0, localExperts = 0, routedTokens = 0;
  // The router, whole on every rank and never cast to FP8 (a block with experts).
  std::optional<Linear> router;
  // Megatron-LM's MoE layer: slower products, more passes over the routed tokens (all of the
  // backward's with the input gradient).
  const bool megatron = experts && x.megatronExperts;
  const double expertSlowdown = megatron ? kMegatronExpertSlowdown : 1;
  if (!experts) {
    linears.push_back({s, h, up, x.fp8});   // MLP up (and gate), column-parallel
    linears.push_back({s, f, h, x.fp8});    // MLP down, row-parallel
    if (recomputes(runtime::kRecomputeMlp)) // the whole MLP's forward again
      recomputedLinears.insert(recomputedLinears.end(), linears.end() - 2, linears.end());
    if (recomputes(runtime::kRecomputeOp))
      recomputedLinears.push_back(x.gated ? Linear{s, h, f, x.fp8} : linears.back());
  } else {
    // Shared experts split as the dense MLP; the router on this rank's T-th of the tokens.
    const double fs = static_cast<double>(x.sharedFfnHiddenSize) / t;
    const double tokens = s / t, n = static_cast<double>(x.numExperts);
    if (fs > 0) {
      linears.push_back({s, h, x.gated ? 2 * fs : fs, x.fp8});
      linears.push_back({s, fs, h, x.fp8});
    }
    // A shared experts' gate is one column more of the router's product (priced on the routed
    // tokens, as its weight gradient is computed).
    const double gate = x.sharedExpertGate ? 1 : 0;
    router = Linear{tokens, h, n + gate, false, expertSlowdown};
    // The busiest rank's experts: N / E of them, each with imbalance x top-k x E x tokens / N
    // rows per sample (its share of the expert group's routed tokens).
    const double ranks = static_cast<double>(std::max<int64_t>(x.expert, 1));
    localExperts = n / ranks;
    routedRows = std::max(1.0, x.imbalance) * static_cast<double>(x.topK) * ranks * tokens / n;
    routedTokens = routedRows * localExperts;
    const double fe = static_cast<double>(x.expertFfnHiddenSize);
    // Activations of the shared and the routed experts; the routed tokens permuted before the
    // dispatch and back after the combine (read and write, twice); the router's softmax.
    const double forwardPasses = megatron ? kMegatronExpertPasses[0] : 0;
    const double backwardPasses = megatron ? kMegatronExpertPasses[1] : 0;
    const double routedForward = (x.gated ? 3 : 2) * routedTokens * fe + 4 * routedTokens * h +
                                 2 * tokens * n + forwardPasses * routedTokens * (h + fe);
    const double routedBackward = (x.gated ? 5 : 3) * routedTokens * fe + 4 * routedTokens * h +
                                  3 * tokens * n + backwardPasses * routedTokens * (h + fe);
    // The gate scales the shared experts' output (read, write); its backward reads that output
    // and the output gradient for the gate's gradient, and scales the output gradient.
    mlpForward = (x.gated ? 3 : 2) * s * fs + 2 * gate * s * h + routedForward;
    mlpBackward = (x.gated ? 5 : 3) * s * fs + 4 * gate * s * h + routedBackward;
    work.expertsForward.memoryBytes = e * routedForward;
    work.expertsInputGradient.memoryBytes = e * routedBackward;
    // moe_act: the routed experts' activation again (it reads its inputs, writes its output).
    if (recomputes(runtime::kRecomputeMoeActivation))
      work.recomputed.memoryBytes += e * (x.gated ? 3 : 2) * routedTokens * fe;
  }
  for (const Linear &linear : linears)
    addLinear(work, linear);
  // The routed experts' grouped products, as token GEMMs of this rank's routed tokens (for
  // their FP8 casts).
  std::vector<Linear> groupedLinears;
  if (experts) {
    addExpertsGemms(work, router->forward(), router->inputGradient(), router->weightGradient());
    const double fe = static_cast<double>(x.expertFfnHiddenSize);
    groupedLinears = {{routedTokens, h, x.gated ? 2 * fe : fe, x.fp8}, // up (and gate)
                      {routedTokens, fe, h, x.fp8}};                   // down
    for (const Linear &linear : groupedLinears)
      addGrouped(work, routedRows, linear.k, linear.n, localExperts, x.fp8, expertSlowdown);
  }

  // Element-wise: two norms (read x, write y), two residual adds (read two, write one), the
  // activation (GELU: read one, write one; SwiGLU: read gate and up, write one), rotary
  // positions on Q and K (read and write), and Q and K's own norms where the model has them
  // (read and write).
  const double rotary = !x.rotary ? 0
                        : latent  ? 2 * s * (heads * rope + rope)
                                  : 2 * s * (q + c) / t;
  const double qkNorms = x.qkNorm && !latent ? s * (q + c) / t : 0;
  work.forward.memoryBytes = e * (2 * 2 * hs + 2 * 3 * hs + mlpForward + rotary + 2 * qkNorms);
  // Their backwards: each norm reads x and dy and writes dx (its weights' gradient summed in
  // the same pass), each residual adds two gradients, the activation reads its inputs and dy
  // and writes their gradients.
  work.inputGradient.memoryBytes =
      e * (2 * 3 * hs + 2 * 3 * hs + mlpBackward + rotary + 3 * qkNorms);
  // Eager: the two norms' and the q/k norms' extra passes, rotary's through fp32, the dense
  // MLP's (or the shared experts') SwiGLU as two kernels, grouped keys and values repeated
  // (read c, write q per key or value element, forward; summed back, backward), and the
  // backward's sums of a norm output's gradients where it feeds separate products, one add
  // per extra consumer: Llama's wq, wk and wv (two; the rotary models', as GPT-2's code
  // projects Q, K and V in one product) and SwiGLU's w1 and w3 (one). A block with experts
  // leaves its routed experts as they are.
  const EagerBytes eager = eagerBytes(x, e);
  const bool opByOp = x.elementwise != ElementwiseKind::Fused;
  const double eagerMlp = !x.gated  ? 0
                          : experts ? static_cast<double>(x.sharedFfnHiddenSize) / t
                                    : f;
  const double repeated =
      opByOp && !latent && x.numKvHeads < x.numHeads ? 2 * e * s * (q + c) / t : 0;
  const double fanOut = opByOp ? (x.rotary && !latent ? 2 : 0) + (eagerMlp > 0 ? 1 : 0) : 0;
  work.forward.memoryBytes += (2 * hs + qkNorms) * eager.normForward + rotary / 2 * eager.rotary +
                              eagerMlp * s * eager.swigluForward + repeated;
  work.inputGradient.memoryBytes +=
      (2 * hs + qkNorms) * eager.normBackward + rotary / 2 * eager.rotary +
      eagerMlp * s * eager.swigluBackward + repeated + fanOut * 3 * e * hs;
  const double elementwise = work.forward.memoryBytes; // before the FP8 casts
  // FP8 casts: every linear's, and the routed experts' (each expert's tokens cast before its
  // grouped product, their output gradients before its backward), which the layer's own
  // passes count as well. The router is not among them.
  if (x.fp8) {
    const double perElement = castBytesPerElement(x, e);
    for (const Linear &linear : linears)
      addScaling(work.forward, work.inputGradient, linear, perElement);
    for (const Linear &linear : groupedLinears) {
      addScaling(work.forward, work.inputGradient, linear, perElement);
      addScaling(work.expertsForward, work.expertsInputGradient, linear, perElement);
    }
  }
  // The recomputed linears' forward GEMMs (and FP8 casts), the dense MLP's activation, the
  // latent attention's rotary part, and the two norms (layernorm).
  for (const Linear &linear : recomputedLinears) {
    work.recomputed.gemms.push_back(linear.forward());
    if (x.fp8)
      work.recomputed.castBytes += castBytesPerElement(x, e) * linear.s * linear.k;
  }
  if (!experts && recomputes(runtime::kRecomputeMlp))
    work.recomputed.memoryBytes += e * mlpForward;
  if (latent && recomputes(runtime::kRecomputeLatentUpProjection))
    work.recomputed.memoryBytes += e * rotary;
  if (recomputes(runtime::kRecomputeLayerNorm))
    work.recomputed.memoryBytes += (e * 2 + eager.normForward) * 2 * hs;
  // op: every element-wise pass of the forward again (norms, residuals, rotary, activation).
  if (recomputes(runtime::kRecomputeOp))
    work.recomputed.memoryBytes += elementwise;

  if (fusedAttention(x.attention)) {
    // One fused kernel per pass over this rank's heads: the scores stay on chip, the forward
    // keeps the softmax statistics only, the backward recomputes the scores. Latent
    // attention's two widths count as their mean (the FLOPs are 2 s^2 (qk + v) per head).
    work.attentionCore.attention = {heads, s, (qk + dv) / 2, false, x.attention};
    work.inputGradient.attention = {heads, s, (qk + dv) / 2, true, x.attention};
    return work;
  }

  // Eager attention, per sample and head of this rank: S = QKᵀ, P = softmax(S) (read S,
  // write P), O = PV. Backward: dP = dO·Vᵀ, dV = Pᵀ·dO, dS = softmax'(P, dP) (read P and dP,
  // write dS), dQ = dS·K, dK = dSᵀ·Q.
  const double scores = heads * s * s;
  const Gemm scoreShape{s, s, qk, heads, Grows::Batch, false}; // s x d times d x s
  const Gemm valueShape{s, dv, s, heads, Grows::Batch, false}; // s x s times s x d
  work.attentionCore.gemms = {scoreShape, valueShape};
  work.attentionCore.memoryBytes = e * 2 * scores;
  // Eager, op recomputes the core too (batched products and softmax are not on its save list).
  if (recomputes(runtime::kRecomputeCoreAttention) || recomputes(runtime::kRecomputeOp)) {
    work.recomputed.gemms.insert(work.recomputed.gemms.end(), {scoreShape, valueShape});
    work.recomputed.memoryBytes += work.attentionCore.memoryBytes;
  }
  work.inputGradient.gemms.insert(work.inputGradient.gemms.end(),
                                  {scoreShape, valueShape, valueShape, valueShape});
  work.inputGradient.memoryBytes += e * 3 * scores;
  return work;
}

} // namespace

LayerWork conduit::transformerWork(const TransformerShape &x, TransformerLayer layer,
                                   int64_t tensor, bool sequenceParallel, int64_t block) {
  const double t = static_cast<double>(std::max<int64_t>(tensor, 1));
  const double e = static_cast<double>(x.elementBytes);
  const double s = static_cast<double>(x.seqLength), h = static_cast<double>(x.hiddenSize);
  const double v = static_cast<double>(x.vocabSize) / t;
  const double hs = sequenceParallel ? s * h / t : s * h;
  LayerWork work;
  switch (layer) {
  case TransformerLayer::Block:
    return blockWork(x, t, sequenceParallel, x.blockHasExperts(block));
  case TransformerLayer::Mtp: {
    // Block `block` and, around it: the embedding rows of the tokens one ahead read (their
    // gradient accumulated into the shared table), the norms of the two inputs and their
    // concatenation, the projection 2h -> h (in FP8 with its casts, as the block's linears),
    // and the shared head's work. The projection is whole on every tensor rank, as conduit-run
    // keeps it, and runs on the rank's rows: with sequence parallelism its T-th of them, the
    // products of Megatron-Core's column-parallel split; without, all of them.
    work = blockWork(x, t, sequenceParallel, x.blockHasExperts(block));
    const Linear projection{sequenceParallel ? s / t : s, 2 * h, h, x.fp8};
    addLinear(work, projection);
    if (x.fp8)
      addScaling(work.forward, work.inputGradient, projection, castBytesPerElement(x, e));
    const EagerBytes eager = eagerBytes(x, e);
    work.forward.memoryBytes += e * s * h + (e * 2 * 2 + 2 * eager.normForward) * hs + e * 4 * hs;
    work.inputGradient.memoryBytes += (e * 2 * 3 + 2 * eager.normBackward) * hs + e * 4 * hs;
    work.weightGradient.memoryBytes += e * s * h + 8 * s * h / t;
    const LayerWork head = transformerWork(x, TransformerLayer::Head, tensor, sequenceParallel);
    for (auto [into, from] : {std::pair{&work.forward, &head.forward},
                              std::pair{&work.inputGradient, &head.inputGradient},
                              std::pair{&work.weightGradient, &head.weightGradient}}) {
      into->gemms.insert(into->gemms.end(), from->gemms.begin(), from->gemms.end());
      into->memoryBytes += from->memoryBytes;
      into->castBytes += from->castBytes;
    }
    return work;
  }
  case TransformerLayer::Embedding:
    // Vocabulary-parallel lookup: each rank reads the rows in its part of the vocabulary (a
    // T-th of the tokens, on average) and writes the whole output, zeros elsewhere, for the
    // group's reduction; learned positions add a replicated table's rows. The backward is all
    // weight gradient: the output gradient read, the rows accumulated in fp32.
    work.forward.memoryBytes = e * (s * h / t + s * h) + (x.rotary ? 0 : e * s * h);
    work.weightGradient.memoryBytes = e * s * h + 8 * s * h / t + (x.rotary ? 0 : 8 * s * h);
    return work;
  case TransformerLayer::Head:
    // Final norm, the LM head's vocabulary-parallel GEMM, and the parallel cross-entropy:
    // read the logits, keep fp32 probabilities for the backward (the activation model's 4·s·V
    // bytes), which reads them and writes the logits' gradient.
    addLinear(work, {s, h, v});
    work.forward.memoryBytes = e * 2 * hs + (e + 4) * s * v;
    work.inputGradient.memoryBytes = e * 3 * hs + (4 + e) * s * v;
    // Eager: the final norm's extra passes and the fp32 loss's (EagerBytes; none fused).
    const EagerBytes eager = eagerBytes(x, e);
    work.forward.memoryBytes += hs * eager.normForward + s * v * eager.lossForward;
    work.inputGradient.memoryBytes += hs * eager.normBackward + s * v * eager.lossBackward;
    return work;
  }
  return work;
}

double Roofline::computeTime(const Gemm &g) const {
  const double rate = g.fp8 ? smRateFp8 : smRate;
  // FP8 products at the FP8 ceiling when the device has one.
  const double ceiling =
      g.fp8 && kernels.fp8PeakFlops > 0 ? kernels.fp8PeakFlops * kernels.fp8Efficiency : flopRate;
  if (!(rate > 0))
    return g.flops() / ceiling;
  const double e = static_cast<double>(elementBytes);
  const double tm = static_cast<double>(kernels.tileM), tn = static_cast<double>(kernels.tileN);
  // The library orients its tile to the output; nothing runs faster than the ceiling.
  return std::max(std::min(tiledTime(g, kernels, rate, memoryBandwidth, e, tm, tn),
                           tiledTime(g, kernels, rate, memoryBandwidth, e, tn, tm)),
                  g.flops() / ceiling);
}

double Roofline::time(const Gemm &gemm, int64_t samples) const {
  const Gemm g = gemm.forSamples(samples);
  return g.slowdown * std::max(computeTime(g), g.bytes(elementBytes) / memoryBandwidth);
}

double Roofline::time(const FusedAttention &a, int64_t samples) const {
  if (a.heads <= 0)
    return 0;
  const double flops = a.flops(samples);
  const bool triton = a.kernel == AttentionKind::FlashTriton;
  const bool flash2 = (a.kernel == AttentionKind::Flash2 || triton) && kernels.flash2Forward > 0;
  // FlashAttention-2 runs 1.3-1.5 times as fast as FlashAttention in Triton forward and about
  // twice as fast backward (Dao, arXiv 2307.08691, section 4.1, A100): the midpoints.
  const double tritonSlowdown = !triton ? 1.0 : a.backward ? 2.0 : 1.4;
  const double efficiency =
      (flash2 ? (a.backward ? kernels.flash2Backward : kernels.flash2Forward)
              : (a.backward ? kernels.attentionBackward : kernels.attentionForward)) /
      tritonSlowdown;
  if (!(efficiency > 0) || kernels.sms <= 0 || !(peakFlops > 0) ||
      !(kernels.attentionSeqLength > 0))
    return flops / flopRate;
  // A thread block per 128 queries of a head, in waves over the SMs; each walks the keys its
  // queries see (s/2 on average under the causal mask) in blocks of 128, plus a fixed cost of
  // prologue and epilogue: one block's worth in the forward (load Q, write O and the softmax
  // statistics), three in the backward (load K and V, write dK and dV, and accumulate dQ),
  // as the H200's FlashAttention-2 and cuDNN kernels measure from 1k to 16k tokens. The
  // papers' efficiency holds at their sequence length.
  constexpr double kBlock = 128;
  const double fixedCost = (a.backward ? 3 : 1) * kBlock;
  auto lengthFactor = [&](double s) { return s / 2 / (s / 2 + fixedCost); };
  const double blocks = static_cast<double>(samples) * a.heads * ceilDiv(a.seqLength, kBlock);
  const double sms = static_cast<double>(kernels.sms);
  const double waveFill = blocks / (ceilDiv(blocks, sms) * sms);
  const double rate = peakFlops * efficiency * waveFill * lengthFactor(a.seqLength) /
                      lengthFactor(kernels.attentionSeqLength);
  return flops / rate;
}

double Roofline::gemmTime(const Work &work, int64_t samples) const {
  double total = time(work.attention, samples);
  for (const Gemm &g : work.gemms)
    total += time(g, samples);
  return total;
}

double Roofline::streamBandwidth() const { return memoryBandwidth * kernels.streamShare(); }

double Roofline::time(const Work &work, int64_t samples) const {
  return gemmTime(work, samples) +
         (work.memoryBytes + work.castBytes) * static_cast<double>(samples) / streamBandwidth();
}
