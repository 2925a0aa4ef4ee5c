// RUN: conduit-opt %s -split-input-file --conduit-schedule -verify-diagnostics

// expected-error @+1 {{conduit-schedule expects phase 'split', found 'placed'}}
pipe.model @m phase placed attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 1.0, efficiency = 1.0, memory_bandwidth = 1.0e30, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 1.0e30, inter_node_bandwidth = 1.0e30, latency_s = 0.0, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "l0" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l1" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.stage 0 layers [0, 1) rank 0
  pipe.stage 1 layers [1, 2) rank 1
}

// -----

// expected-error @+1 {{1f1b runs one stage per device (there are 8 stages on 4 ranks); use depth-first (interleaved 1F1B) or breadth-first for several stages per device}}
pipe.model @m phase split attributes {
  parallelism = #pipe.parallelism<pipeline = 4, data = 1, stages_per_device = 2, schedule = "1f1b", group_size = 4, microbatches = 8, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
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
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2, 3, 4, 5, 6, 7, 8]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 1, 2, 3, 4, 5, 6, 7, 8]
  pipe.stage 2 layers [2, 3) rank 2 samples [0, 1, 2, 3, 4, 5, 6, 7, 8]
  pipe.stage 3 layers [3, 4) rank 3 samples [0, 1, 2, 3, 4, 5, 6, 7, 8]
  pipe.stage 4 layers [4, 5) rank 0 samples [0, 1, 2, 3, 4, 5, 6, 7, 8]
  pipe.stage 5 layers [5, 6) rank 1 samples [0, 1, 2, 3, 4, 5, 6, 7, 8]
  pipe.stage 6 layers [6, 7) rank 2 samples [0, 1, 2, 3, 4, 5, 6, 7, 8]
  pipe.stage 7 layers [7, 8) rank 3 samples [0, 1, 2, 3, 4, 5, 6, 7, 8]
}

// -----

// expected-error @+1 {{gpipe runs one stage per device (there are 8 stages on 4 ranks); use breadth-first, which runs GPipe's order on a looped placement}}
pipe.model @m phase split attributes {
  parallelism = #pipe.parallelism<pipeline = 4, data = 1, stages_per_device = 2, schedule = "gpipe", group_size = 4, microbatches = 8, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
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
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2, 3, 4, 5, 6, 7, 8]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 1, 2, 3, 4, 5, 6, 7, 8]
  pipe.stage 2 layers [2, 3) rank 2 samples [0, 1, 2, 3, 4, 5, 6, 7, 8]
  pipe.stage 3 layers [3, 4) rank 3 samples [0, 1, 2, 3, 4, 5, 6, 7, 8]
  pipe.stage 4 layers [4, 5) rank 0 samples [0, 1, 2, 3, 4, 5, 6, 7, 8]
  pipe.stage 5 layers [5, 6) rank 1 samples [0, 1, 2, 3, 4, 5, 6, 7, 8]
  pipe.stage 6 layers [6, 7) rank 2 samples [0, 1, 2, 3, 4, 5, 6, 7, 8]
  pipe.stage 7 layers [7, 8) rank 3 samples [0, 1, 2, 3, 4, 5, 6, 7, 8]
}

// -----

// expected-error @+1 {{depth-first interleaves several stages per device (there are 4 stages on 4 ranks); with one stage per device use 1f1b}}
pipe.model @m phase split attributes {
  parallelism = #pipe.parallelism<pipeline = 4, data = 1, stages_per_device = 1, schedule = "depth-first", group_size = 4, microbatches = 8, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 1.0, efficiency = 1.0, memory_bandwidth = 1.0e30, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 1.0e30, inter_node_bandwidth = 1.0e30, latency_s = 0.0, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "l0" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l1" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l2" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l3" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2, 3, 4, 5, 6, 7, 8]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 1, 2, 3, 4, 5, 6, 7, 8]
  pipe.stage 2 layers [2, 3) rank 2 samples [0, 1, 2, 3, 4, 5, 6, 7, 8]
  pipe.stage 3 layers [3, 4) rank 3 samples [0, 1, 2, 3, 4, 5, 6, 7, 8]
}

// -----

// expected-error @+1 {{depth-first needs at least as many micro-batches as pipeline ranks (M = 2 < P = 4); use M >= 4, or breadth-first, which accepts any M}}
pipe.model @m phase split attributes {
  parallelism = #pipe.parallelism<pipeline = 4, data = 1, stages_per_device = 2, schedule = "depth-first", group_size = 4, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
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
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 1, 2]
  pipe.stage 2 layers [2, 3) rank 2 samples [0, 1, 2]
  pipe.stage 3 layers [3, 4) rank 3 samples [0, 1, 2]
  pipe.stage 4 layers [4, 5) rank 0 samples [0, 1, 2]
  pipe.stage 5 layers [5, 6) rank 1 samples [0, 1, 2]
  pipe.stage 6 layers [6, 7) rank 2 samples [0, 1, 2]
  pipe.stage 7 layers [7, 8) rank 3 samples [0, 1, 2]
}

// -----

// expected-error @+1 {{the depth-first group size must lie between the pipeline size 4 and the number of micro-batches 8, got 3}}
pipe.model @m phase split attributes {
  parallelism = #pipe.parallelism<pipeline = 4, data = 1, stages_per_device = 2, schedule = "depth-first", group_size = 3, microbatches = 8, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
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
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2, 3, 4, 5, 6, 7, 8]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 1, 2, 3, 4, 5, 6, 7, 8]
  pipe.stage 2 layers [2, 3) rank 2 samples [0, 1, 2, 3, 4, 5, 6, 7, 8]
  pipe.stage 3 layers [3, 4) rank 3 samples [0, 1, 2, 3, 4, 5, 6, 7, 8]
  pipe.stage 4 layers [4, 5) rank 0 samples [0, 1, 2, 3, 4, 5, 6, 7, 8]
  pipe.stage 5 layers [5, 6) rank 1 samples [0, 1, 2, 3, 4, 5, 6, 7, 8]
  pipe.stage 6 layers [6, 7) rank 2 samples [0, 1, 2, 3, 4, 5, 6, 7, 8]
  pipe.stage 7 layers [7, 8) rank 3 samples [0, 1, 2, 3, 4, 5, 6, 7, 8]
}

// -----

// expected-error @+1 {{grouping 9 micro-batches by 4 leaves a last group of 1, fewer than the 4 pipeline ranks, which stalls the pipeline (Megatron-LM rejects it too); use a group size that divides 9 or leaves at least 4}}
pipe.model @m phase split attributes {
  parallelism = #pipe.parallelism<pipeline = 4, data = 1, stages_per_device = 2, schedule = "depth-first", group_size = 4, microbatches = 9, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
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
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
  pipe.stage 2 layers [2, 3) rank 2 samples [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
  pipe.stage 3 layers [3, 4) rank 3 samples [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
  pipe.stage 4 layers [4, 5) rank 0 samples [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
  pipe.stage 5 layers [5, 6) rank 1 samples [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
  pipe.stage 6 layers [6, 7) rank 2 samples [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
  pipe.stage 7 layers [7, 8) rank 3 samples [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
}

// -----

// expected-error @+1 {{depth-first needs the same number of micro-batches on every stage (stage 0 has 2, stage 1 has 1); use gpipe, 1f1b or breadth-first with unequal partitions}}
pipe.model @m phase split attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 2, schedule = "depth-first", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 1.0, efficiency = 1.0, memory_bandwidth = 1.0e30, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 1.0e30, inter_node_bandwidth = 1.0e30, latency_s = 0.0, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "l0" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l1" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l2" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l3" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 2]
  pipe.stage 2 layers [2, 3) rank 0 samples [0, 1, 2]
  pipe.stage 3 layers [3, 4) rank 1 samples [0, 1, 2]
}

// -----

// expected-warning @+1 {{breadth-first with 2 micro-batches on 4 pipeline ranks stalls at every loop wrap; use at least 4 micro-batches}}
pipe.model @m phase split attributes {
  parallelism = #pipe.parallelism<pipeline = 4, data = 1, stages_per_device = 2, schedule = "breadth-first", group_size = 4, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
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
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 1, 2]
  pipe.stage 2 layers [2, 3) rank 2 samples [0, 1, 2]
  pipe.stage 3 layers [3, 4) rank 3 samples [0, 1, 2]
  pipe.stage 4 layers [4, 5) rank 0 samples [0, 1, 2]
  pipe.stage 5 layers [5, 6) rank 1 samples [0, 1, 2]
  pipe.stage 6 layers [6, 7) rank 2 samples [0, 1, 2]
  pipe.stage 7 layers [7, 8) rank 3 samples [0, 1, 2]
}
