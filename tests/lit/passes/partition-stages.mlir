// RUN: conduit-opt %s -split-input-file --conduit-partition-stages | FileCheck %s

// The slowest stage is as fast as possible: not equal layer counts. Unit FLOP rate, so a
// layer's time per micro-batch is fwd + bwd = 3 x its fwd figure.
// CHECK-LABEL: pipe.model @m phase partitioned
// CHECK: pipe.stage 0 layers [0, 3){{$}}
// CHECK-NEXT: pipe.stage 1 layers [3, 4){{$}}
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 1.0, efficiency = 1.0, memory_bandwidth = 1.0e30, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 1.0e30, inter_node_bandwidth = 1.0e30, latency_s = 0.0, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 100 fwd 0.1 bwd 0.2 activation 8 checkpoint 4 output 4
  pipe.layer "block.0" block params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "block.1" block params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "head" head params 100 fwd 1.5 bwd 3.0 activation 8 checkpoint 4 output 4
}

// -----

// Equal layers spread evenly.
// CHECK-LABEL: pipe.model @m phase partitioned
// CHECK: pipe.stage 0 layers [0, 2)
// CHECK-NEXT: pipe.stage 1 layers [2, 4)
// CHECK-NEXT: pipe.stage 2 layers [4, 6)
// CHECK-NEXT: pipe.stage 3 layers [6, 8)
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 4, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 4, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 1.0, efficiency = 1.0, memory_bandwidth = 1.0e30, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 1.0e30, inter_node_bandwidth = 1.0e30, latency_s = 0.0, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "l0" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l1" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l2" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l3" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l4" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l5" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l6" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l7" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
}

// -----

// S = P x V stages with the looped layout in mind: 2 ranks x 2 stages.
// CHECK-LABEL: pipe.model @m phase partitioned
// CHECK-COUNT-4: pipe.stage
// CHECK-NOT: pipe.stage
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 2, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 1.0, efficiency = 1.0, memory_bandwidth = 1.0e30, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 1.0e30, inter_node_bandwidth = 1.0e30, latency_s = 0.0, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "l0" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l1" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l2" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l3" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l4" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l5" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
}

// -----

// An explicit layout from the job file wins over the search.
// CHECK-LABEL: pipe.model @m phase partitioned
// CHECK: pipe.stage 0 layers [0, 1)
// CHECK-NEXT: pipe.stage 1 layers [1, 4)
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 1.0, efficiency = 1.0, memory_bandwidth = 1.0e30, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 1.0e30, inter_node_bandwidth = 1.0e30, latency_s = 0.0, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  stage_layers = array<i64: 1, 3>} {
  pipe.layer "l0" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l1" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l2" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l3" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
}
