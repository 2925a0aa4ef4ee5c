// RUN: conduit-opt %s --conduit-optimize-microbatches | FileCheck %s
// RUN: conduit-opt %s --conduit-optimize-microbatches=method=dp | FileCheck %s --check-prefix=DP
// RUN: conduit-opt %s --conduit-optimize-microbatches=method=best | FileCheck %s
//
// Three stages of different speeds under GPipe, 8 samples, with a launch overhead per layer:
// the default search (descent) cuts every stage as 3 + 3 + 2 and records the sizes; the
// greedy DP finds nothing better than the equal cut.

// CHECK: microbatch_partitions = [array<i64: 3, 3, 2>, array<i64: 3, 3, 2>, array<i64: 3, 3, 2>]
// CHECK: pipe.stage 0 layers [0, 1) rank 0 samples [0, 3, 6, 8]
// CHECK: pipe.stage 1 layers [1, 2) rank 1 samples [0, 3, 6, 8]
// CHECK: pipe.stage 2 layers [2, 3) rank 2 samples [0, 3, 6, 8]
// DP: pipe.stage 0 layers [0, 1) rank 0 samples [0, 2, 4, 6, 8]

// A model that did not ask for a search is left alone.
// RUN: sed 's/microbatch_partitions = "auto", //' %s | conduit-opt --conduit-optimize-microbatches | FileCheck %s --check-prefix=UNTOUCHED
// UNTOUCHED-NOT: microbatch_partitions
// UNTOUCHED: pipe.stage 0 layers [0, 1) rank 0 samples [0, 2, 4, 6, 8]

module {
  pipe.model @opt phase split attributes {cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 312000000000000.0, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 1, intra_node_bandwidth = 300000000000.0, inter_node_bandwidth = 2000000000.0, latency_s = 1.0e-05, launch_overhead_s = 2.0e-05, profile = "">, microbatch_partitions = "auto", parallelism = #pipe.parallelism<pipeline = 3, data = 1, stages_per_device = 1, schedule = "gpipe", group_size = 3, microbatches = 4, microbatch_size = 2, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">, source = "opt.json", training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 0.001>} {
    pipe.layer "a" custom params 1000 fwd 2000000000.0 bwd 4000000000.0 activation 1000000 checkpoint 0 output 4000000
    pipe.layer "b" custom params 3000 fwd 6000000000.0 bwd 12000000000.0 activation 1000000 checkpoint 4000000 output 2000000
    pipe.layer "c" custom params 2000 fwd 1000000000.0 bwd 2000000000.0 activation 1000000 checkpoint 2000000 output 4
    pipe.stage 0 layers [0, 1) rank 0 samples [0, 2, 4, 6, 8]
    pipe.stage 1 layers [1, 2) rank 1 samples [0, 2, 4, 6, 8]
    pipe.stage 2 layers [2, 3) rank 2 samples [0, 2, 4, 6, 8]
  }
}

