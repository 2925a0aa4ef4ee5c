// RUN: conduit-opt %s -split-input-file -verify-diagnostics -allow-unregistered-dialect
//
// Every verifier message of the plan dialect, one case each. Messages shared with the pipe
// dialect (stage table, transfers) are covered there and sampled here.

// foreign op
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  // expected-error @+1 {{is not allowed in the body of 'plan.program'}}
  "test.op"() : () -> ()
  plan.rank 0 events 1 slots [64] {
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// order
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.rank 0 events 1 slots [64] {
  }
  plan.rank 1 events 1 slots [64] {
  }
  // expected-error @+1 {{is out of order: the program body holds layers, then stages, then ranks}}
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
}

// -----

// no layers
// expected-error @+1 {{must contain at least one plan.layer}}
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// layer name
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  // expected-error @+1 {{expects a non-empty name}}
  plan.layer "" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// layer cost
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  // expected-error @+1 {{expects a finite, non-negative fwd_flops, got -1}}
  plan.layer "a" embedding params 10 fwd -1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// tokens
// expected-error @+1 {{expects a positive tokens_per_sample, got 0}}
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 0} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// empty group
// expected-error @+1 {{group 0 has no member}}
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// group order
// expected-error @+1 {{group 0 must list distinct pipeline ranks in increasing order}}
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 1, 0>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// stage past layers
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  // expected-error @+1 {{ends at layer 3 but the program has 2 layers}}
  plan.stage 1 rank 1 layers [1, 3) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// stage params
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  // expected-error @+1 {{has 11 params but its layers have 10}}
  plan.stage 1 rank 1 layers [1, 2) params 11 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// layers not covered
// expected-error @+1 {{stages cover layers [0, 2) but the program has 3 layers}}
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "c" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// collective group
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
    // expected-error @+1 {{names group 2 but the program has 2 groups}}
    plan.all_gather stage 0 bytes 8 group 2 on 2
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// collective membership
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
    // expected-error @+1 {{runs on rank 0, which is not a member of group 1}}
    plan.all_gather stage 0 bytes 8 group 1 on 2
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// stage count
// expected-error @+1 {{expects 2 stages (pipeline 2 x stages_per_device 1), found 1}}
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.rank 0 events 1 slots [64] {
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// stage index
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  // expected-error @+1 {{has index 3 at position 1}}
  plan.stage 3 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// stage layers
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  // expected-error @+1 {{starts at layer 2 but the previous stages end at layer 1}}
  plan.stage 1 rank 1 layers [2, 3) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// stage rank
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  // expected-error @+1 {{is placed on rank 2 but the pipeline has 2 ranks}}
  plan.stage 1 rank 2 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// stage samples
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  // expected-error @+1 {{micro-batches end at sample 3 but the replica's batch has 2 samples}}
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 3]
  plan.rank 0 events 1 slots [64] {
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// rank count
// expected-error @+1 {{expects one plan.rank per pipeline rank (2), found 1}}
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 0 slots [] {
  }
}

// -----

// rank position
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  // expected-error @+1 {{has rank 1 at position 0}}
  plan.rank 1 events 0 slots [] {
  }
  plan.rank 1 events 0 slots [] {
  }
}

// -----

// stream bound
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
    // expected-error @+1 {{uses stream 8; streams are numbered below 8}}
    plan.forward stage 0 mb 0 on 8
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// event bound
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
    // expected-error @+1 {{uses event 1 but rank 0 declares 1 events}}
    plan.signal event 1 on 0
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// slot bound
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
    // expected-error @+1 {{uses slot 1 but rank 0 declares 1 slots}}
    plan.forward stage 0 mb 0 slot 1 on 0
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// stage on rank
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
    // expected-error @+1 {{runs on rank 0 but stage 1 is placed on rank 1}}
    plan.backward stage 1 mb 0 on 0
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// micro-batch
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
    // expected-error @+1 {{names micro-batch 2 but stage 0 has 2 micro-batches}}
    plan.forward stage 0 mb 2 on 0
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// transfer samples
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
  }
  plan.rank 1 events 1 slots [64] {
    // expected-error @+1 {{moves samples [0, 2) outside micro-batch 1 of stage 0 [1, 2)}}
    plan.recv activation stage 1 mb 0 from 0 stage 0 mb 1 samples [0, 2) bytes 16 slot 0 on 1
  }
}

// -----

// slot size
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
  }
  plan.rank 1 events 1 slots [64] {
    // expected-error @+1 {{moves 128 bytes through slot 0 of 64 bytes}}
    plan.recv activation stage 1 mb 0 from 0 stage 0 mb 1 samples [1, 2) bytes 128 slot 0 on 1
  }
}

// -----

// collective stage
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
    // expected-error @+1 {{runs on rank 0 but stage 1 is placed on rank 1}}
    plan.all_gather stage 1 bytes 8 group 0 on 2
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// stage negative
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  // expected-error @+1 {{expects a non-negative index and rank, got index 0 rank -1}}
  plan.stage 0 rank -1 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// stage range
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  // expected-error @+1 {{expects a non-empty layer range, got [0, 0)}}
  plan.stage 0 rank 0 layers [0, 0) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// stage negative params
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  // expected-error @+1 {{expects non-negative params, got -10}}
  plan.stage 0 rank 0 layers [0, 1) params -10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// stage boundaries
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  // expected-error @+1 {{micro-batch boundaries must increase strictly, got 1 after 2}}
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 2, 1]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// rank negative events
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  // expected-error @+1 {{expects a non-negative rank and event count, got rank 0 events -1}}
  plan.rank 0 events -1 slots [] {
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// slot size negative
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  // expected-error @+1 {{declares slot 1 with negative size -8}}
  plan.rank 0 events 0 slots [8, -8] {
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// foreign op in rank
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
    // expected-error @+1 {{is not allowed in the body of 'plan.rank'}}
    "test.op"() : () -> ()
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// negative stream
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
    // expected-error @+1 {{expects a non-negative stream, got -1}}
    plan.free stage 0 on -1
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// compute negative mb
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
    // expected-error @+1 {{expects a non-negative stage and micro-batch, got stage 0 mb -1}}
    plan.forward stage 0 mb -1 on 0
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// compute slot
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
    // expected-error @+1 {{expects slot -1 (none) or a slot id, got -2}}
    plan.backward stage 0 mb 0 slot -2 on 0
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// send slot
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
    // expected-error @+1 {{expects slot -1 (none) or a slot id, got -4}}
    plan.send activation stage 0 mb 0 to 1 stage 1 mb 0 samples [0, 1) bytes 8 slot -4 on 1
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// recv without slot
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
  }
  plan.rank 1 events 1 slots [64] {
    // expected-error @+1 {{expects a slot to receive into}}
    plan.recv activation stage 1 mb 0 from 0 stage 0 mb 0 samples [0, 1) bytes 8 on 1
  }
}

// -----

// transfer direction
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
    // expected-error @+1 {{moves gradients between stage 0 and stage -1, got peer stage 1}}
    plan.send gradient stage 0 mb 0 to 1 stage 1 mb 0 samples [0, 1) bytes 8 on 1
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// transfer range
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
    // expected-error @+1 {{expects a non-empty sample range, got [1, 0)}}
    plan.send activation stage 0 mb 0 to 1 stage 1 mb 0 samples [1, 0) bytes 8 on 1
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// collective bytes
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
    // expected-error @+1 {{expects non-negative bytes, got -1}}
    plan.reduce_scatter stage 0 bytes -1 group 0 on 2
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// all_reduce stage
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
    // expected-error @+1 {{expects a non-negative stage, got -1}}
    plan.all_reduce stage -1 bytes 1 group 0 on 2
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// optimizer stage
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
    // expected-error @+1 {{expects a non-negative stage, got -1}}
    plan.optimizer_step stage -1 on 0
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// event negative
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
    // expected-error @+1 {{expects a non-negative event, got -1}}
    plan.wait event -1 on 0
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// tie_grads: the other copy's stage is not on the peer rank
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
    // expected-error @+1 {{ties with stage 1 on rank 0, but the stage is placed on rank 1}}
    plan.tie_grads stage 0 with 0 stage 1 bytes 40 on 1
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// tie_grads: negative peer
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
    // expected-error @+1 {{expects a non-negative peer rank, got -1}}
    plan.tie_grads stage 0 with -1 stage 1 bytes 40 on 1
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// expert all-to-all: half a partner
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
    plan.forward stage 0 mb 0 on 0
    // expected-error @+1 {{hides behind stage 0 micro-batch -1; expected a stage and a micro-batch, or -1 -1 for none}}
    plan.expert_dispatch stage 0 mb 0 bytes 64 group 0 behind 0 -1 on 0
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// expert all-to-all: group
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
    plan.forward stage 0 mb 0 on 0
    // expected-error @+1 {{names group 2 but the program has 2 groups}}
    plan.expert_combine stage 0 mb 0 bytes 64 group 2 behind -1 -1 on 0
  }
  plan.rank 1 events 1 slots [64] {
  }
}

// -----

// expert all-to-all: behind a compute of another rank
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
    plan.forward stage 0 mb 0 on 0
    // expected-error @+1 {{runs on rank 0 but stage 1 is placed on rank 1}}
    plan.expert_combine stage 0 mb 0 bytes 64 group 0 behind 1 0 on 0
  }
  plan.rank 1 events 1 slots [64] {
  }
}
