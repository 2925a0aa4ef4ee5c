// RUN: conduit-opt %s -split-input-file -verify-diagnostics -allow-unregistered-dialect
//
// Every verifier message of the pipe dialect (attributes, ops, and the phase checks of the
// model body), one case each.

// parallelism.pipeline must be positive
pipe.model @m phase model attributes {
  // expected-error @+1 {{pipeline must be positive, got 0}}
  parallelism = #pipe.parallelism<pipeline = 0, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// parallelism.data must be positive
pipe.model @m phase model attributes {
  // expected-error @+1 {{data must be positive, got 0}}
  parallelism = #pipe.parallelism<pipeline = 2, data = 0, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// parallelism.stages_per_device must be positive
pipe.model @m phase model attributes {
  // expected-error @+1 {{stages_per_device must be positive, got 0}}
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 0, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// parallelism.group_size must be positive
pipe.model @m phase model attributes {
  // expected-error @+1 {{group_size must be positive, got 0}}
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 0, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// parallelism.microbatches must be positive
pipe.model @m phase model attributes {
  // expected-error @+1 {{microbatches must be positive, got 0}}
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 0, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// parallelism.microbatch_size must be positive
pipe.model @m phase model attributes {
  // expected-error @+1 {{microbatch_size must be positive, got 0}}
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 0, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// parallelism.fsdp_window must be positive
pipe.model @m phase model attributes {
  // expected-error @+1 {{fsdp_window must be positive, got 0}}
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 0, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// parallelism.gradient_reduction "run" needs sharded gradients
pipe.model @m phase model attributes {
  // expected-error @+1 {{gradient_reduction "run" needs sharded gradients (sharding "gradients" or "full"), got sharding "optimizer"}}
  parallelism = #pipe.parallelism<pipeline = 2, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "optimizer", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner", gradient_reduction = "run">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// parallelism.recompute_modules: known names only
pipe.model @m phase model attributes {
  // expected-error @+2 {{unknown recompute module "rope"}}
  // expected-error @+1 {{failed to parse Pipe_ParallelismAttr parameter 'recompute_modules'}}
  parallelism = #pipe.parallelism<pipeline = 2, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "selective", fsdp_window = 2, rank_order = "data-inner", recompute_modules = ["layernorm", "rope"]>,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// parallelism.recompute_modules: at least one
pipe.model @m phase model attributes {
  // expected-error @+1 {{recompute_modules must name at least one module}}
  parallelism = #pipe.parallelism<pipeline = 2, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "selective", fsdp_window = 2, rank_order = "data-inner", recompute_modules = []>,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// cluster.peak_flops
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  // expected-error @+1 {{peak_flops must be positive, got}}
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 0.0, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// cluster.efficiency
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  // expected-error @+1 {{efficiency must be in (0, 1], got}}
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 1.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// cluster.memory_bytes
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  // expected-error @+1 {{memory_bytes must be positive, got}}
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 0, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// cluster.gpus_per_node
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  // expected-error @+1 {{gpus_per_node must be positive, got}}
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 0, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// cluster.intra_node_bandwidth
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  // expected-error @+1 {{intra_node_bandwidth must be positive, got}}
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = -1.0, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// cluster.inter_node_bandwidth
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  // expected-error @+1 {{inter_node_bandwidth must be positive, got}}
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 0.0, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// cluster.memory_bandwidth
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  // expected-error @+1 {{memory_bandwidth must be positive, got}}
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 0.0, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// cluster.latency_s
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  // expected-error @+1 {{latency_s must be non-negative, got}}
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = -1.0, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// cluster.launch_overhead_s
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  // expected-error @+1 {{launch_overhead_s must be non-negative, got}}
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = -1.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// training.seed
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  // expected-error @+1 {{seed must be non-negative, got -1}}
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = -1, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// training.learning_rate
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  // expected-error @+1 {{learning_rate must be positive, got 0}}
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 0.0>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// transformer.num_layers
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+1 {{num_layers must be positive, got 0}}
  architecture = #pipe.transformer<num_layers = 0, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "gelu", norm = "layernorm", position = "learned", tie_embeddings = false, bias = "all">} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// transformer.hidden_size
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+1 {{hidden_size must be positive, got 0}}
  architecture = #pipe.transformer<num_layers = 1, hidden_size = 0, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "gelu", norm = "layernorm", position = "learned", tie_embeddings = false, bias = "all">} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// transformer.num_heads
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+1 {{num_heads must be positive, got 0}}
  architecture = #pipe.transformer<num_layers = 1, hidden_size = 8, num_heads = 0, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "gelu", norm = "layernorm", position = "learned", tie_embeddings = false, bias = "all">} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// transformer.num_kv_heads
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+1 {{num_kv_heads must be positive, got 0}}
  architecture = #pipe.transformer<num_layers = 1, hidden_size = 8, num_heads = 2, num_kv_heads = 0, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "gelu", norm = "layernorm", position = "learned", tie_embeddings = false, bias = "all">} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// transformer.ffn_hidden_size
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+1 {{ffn_hidden_size must be positive, got 0}}
  architecture = #pipe.transformer<num_layers = 1, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 0, seq_length = 4, vocab_size = 16, mlp = "gelu", norm = "layernorm", position = "learned", tie_embeddings = false, bias = "all">} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// transformer.seq_length
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+1 {{seq_length must be positive, got 0}}
  architecture = #pipe.transformer<num_layers = 1, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 0, vocab_size = 16, mlp = "gelu", norm = "layernorm", position = "learned", tie_embeddings = false, bias = "all">} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// transformer.vocab_size
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+1 {{vocab_size must be positive, got 0}}
  architecture = #pipe.transformer<num_layers = 1, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 0, mlp = "gelu", norm = "layernorm", position = "learned", tie_embeddings = false, bias = "all">} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// transformer heads divide hidden
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+1 {{hidden_size 8 is not divisible by num_heads 3}}
  architecture = #pipe.transformer<num_layers = 1, hidden_size = 8, num_heads = 3, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "gelu", norm = "layernorm", position = "learned", tie_embeddings = false, bias = "all">} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// transformer kv heads divide heads
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+1 {{num_heads 4 is not divisible by num_kv_heads 3}}
  architecture = #pipe.transformer<num_layers = 1, hidden_size = 8, num_heads = 4, num_kv_heads = 3, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "gelu", norm = "layernorm", position = "learned", tie_embeddings = false, bias = "all">} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// layer name
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  // expected-error @+1 {{expects a non-empty name}}
  pipe.layer "" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// layer params
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  // expected-error @+1 {{expects a finite, non-negative params, got -1}}
  pipe.layer "embedding" embedding params -1 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// layer activation_bytes
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  // expected-error @+1 {{expects a finite, non-negative activation_bytes, got -1}}
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation -1 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// layer selective_bytes: a part of its activations
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "selective", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  // expected-error @+1 {{expects selective_bytes between 0 and activation_bytes (8), got 9}}
  pipe.layer "block.0" block params 10 fwd 1.0 bwd 2.0 activation 8 checkpoint 2 output 2 selective 9
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// layer checkpoint_bytes
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  // expected-error @+1 {{expects a finite, non-negative checkpoint_bytes, got -1}}
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint -1 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// layer output_bytes
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  // expected-error @+1 {{expects a finite, non-negative output_bytes, got -1}}
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output -1
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// layer fwd_flops
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  // expected-error @+1 {{expects a finite, non-negative fwd_flops, got -1}}
  pipe.layer "embedding" embedding params 10 fwd -1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// layer bwd_flops
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  // expected-error @+1 {{expects a finite, non-negative bwd_flops, got -1}}
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd -1.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// foreign op in model body
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  // expected-error @+1 {{is not allowed in the body of 'pipe.model'}}
  "test.op"() : () -> ()
}

// -----

// order
pipe.model @m phase partitioned attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1)
  // expected-error @+1 {{is out of order: the model body holds layers, then stages, then ranks}}
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 1 layers [1, 2)
}

// -----

// no layers
// expected-error @+1 {{must contain at least one pipe.layer}}
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
}

// -----

// stage before partitioned
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  // expected-error @+1 {{is not allowed before phase 'partitioned' (the model is in phase 'model')}}
  pipe.stage 0 layers [0, 1)
  pipe.stage 1 layers [1, 2)
}

// -----

// stage count
// expected-error @+1 {{expects 2 stages (pipeline 2 x stages_per_device 1) in phase 'partitioned', found 1}}
pipe.model @m phase partitioned attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1)
}

// -----

// stage index
pipe.model @m phase partitioned attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1)
  // expected-error @+1 {{has index 2 at position 1}}
  pipe.stage 2 layers [1, 2)
}

// -----

// stage gap
pipe.model @m phase partitioned attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1)
  // expected-error @+1 {{starts at layer 0 but the previous stages end at layer 1}}
  pipe.stage 1 layers [0, 2)
}

// -----

// stage past end
pipe.model @m phase partitioned attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1)
  // expected-error @+1 {{ends at layer 3 but the model has 2 layers}}
  pipe.stage 1 layers [1, 3)
}

// -----

// stages do not cover
// expected-error @+1 {{stages cover layers [0, 2) but the model has 3 layers}}
pipe.model @m phase partitioned attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "mid" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1)
  pipe.stage 1 layers [1, 2)
}

// -----

// rank before placed
pipe.model @m phase partitioned attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  // expected-error @+1 {{has a rank before phase 'placed'}}
  pipe.stage 0 layers [0, 1) rank 0
  pipe.stage 1 layers [1, 2)
}

// -----

// no rank when placed
pipe.model @m phase placed attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1) rank 0
  // expected-error @+1 {{has no rank in phase 'placed'}}
  pipe.stage 1 layers [1, 2)
}

// -----

// rank out of pipeline
pipe.model @m phase placed attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1) rank 0
  // expected-error @+1 {{is placed on rank 2 but the pipeline has 2 ranks}}
  pipe.stage 1 layers [1, 2) rank 2
}

// -----

// samples before split
pipe.model @m phase placed attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1) rank 0
  // expected-error @+1 {{has micro-batches before phase 'split'}}
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 2]
}

// -----

// no samples when split
pipe.model @m phase split attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  // expected-error @+1 {{has no micro-batches in phase 'split'}}
  pipe.stage 1 layers [1, 2) rank 1
}

// -----

// samples end
pipe.model @m phase split attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  // expected-error @+1 {{micro-batches end at sample 3 but the replica's batch has 2 samples}}
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 3]
}

// -----

// rank before scheduled
pipe.model @m phase split attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 2]
  // expected-error @+1 {{is not allowed before phase 'scheduled' (the model is in phase 'split')}}
  pipe.rank 0 {
  }
  pipe.rank 1 {
  }
}

// -----

// rank count
// expected-error @+1 {{expects one pipe.rank per pipeline rank (2) in phase 'scheduled', found 1}}
pipe.model @m phase scheduled attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 2]
  pipe.rank 0 {
  }
}

// -----

// rank position
pipe.model @m phase scheduled attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 2]
  pipe.rank 0 {
  }
  // expected-error @+1 {{has rank 0 at position 1}}
  pipe.rank 0 {
  }
}

// -----

// comm before communicating
pipe.model @m phase scheduled attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 2]
  pipe.rank 0 {
    // expected-error @+1 {{is not allowed before phase 'communicating' (the model is in phase 'scheduled')}}
    pipe.reshard stage 0
  }
  pipe.rank 1 {
  }
}

// -----

// unknown stage
pipe.model @m phase scheduled attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 2]
  pipe.rank 0 {
    // expected-error @+1 {{names stage 2 but the model has 2 stages}}
    pipe.forward stage 2 mb 0
  }
  pipe.rank 1 {
  }
}

// -----

// stage on other rank
pipe.model @m phase scheduled attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 2]
  pipe.rank 0 {
    // expected-error @+1 {{runs on rank 0 but stage 1 is placed on rank 1}}
    pipe.forward stage 1 mb 0
  }
  pipe.rank 1 {
  }
}

// -----

// micro-batch out of range
pipe.model @m phase scheduled attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 2]
  pipe.rank 0 {
  }
  pipe.rank 1 {
    // expected-error @+1 {{names micro-batch 1 but stage 1 has 1 micro-batches}}
    pipe.backward stage 1 mb 1
  }
}

// -----

// peer rank out of range
pipe.model @m phase communicating attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 2]
  pipe.rank 0 {
    // expected-error @+1 {{names peer rank 2 but the pipeline has 2 ranks}}
    pipe.send activation stage 0 mb 0 to 2 stage 1 mb 0 samples [0, 1) bytes 8
  }
  pipe.rank 1 {
  }
}

// -----

// send to self
pipe.model @m phase communicating attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 2]
  pipe.rank 0 {
    // expected-error @+1 {{transfers to its own rank 0; stages on one rank share memory}}
    pipe.send activation stage 0 mb 0 to 0 stage 1 mb 0 samples [0, 1) bytes 8
  }
  pipe.rank 1 {
  }
}

// -----

// peer stage on other rank
pipe.model @m phase communicating attributes {
  parallelism = #pipe.parallelism<pipeline = 3, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "mid" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 2]
  pipe.stage 2 layers [2, 3) rank 0 samples [0, 2]
  pipe.rank 0 {
  }
  pipe.rank 1 {
    // expected-error @+1 {{transfers to its own rank 1; stages on one rank share memory}}
    pipe.send activation stage 1 mb 0 to 1 stage 2 mb 0 samples [0, 1) bytes 8
  }
  pipe.rank 2 {
  }
}

// -----

// peer stage placement
pipe.model @m phase communicating attributes {
  parallelism = #pipe.parallelism<pipeline = 3, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "mid" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 2]
  pipe.stage 2 layers [2, 3) rank 2 samples [0, 2]
  pipe.rank 0 {
  }
  pipe.rank 1 {
    // expected-error @+1 {{names peer stage 2 on rank 0 but that stage is placed on rank 2}}
    pipe.send activation stage 1 mb 0 to 0 stage 2 mb 0 samples [0, 1) bytes 8
  }
  pipe.rank 2 {
  }
}

// -----

// peer stage out of range
pipe.model @m phase communicating attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 2]
  pipe.rank 0 {
  }
  pipe.rank 1 {
    // expected-error @+1 {{names peer stage 2 but the model has 2 stages}}
    pipe.send activation stage 1 mb 0 to 0 stage 2 mb 0 samples [0, 1) bytes 8
  }
}

// -----

// peer micro-batch
pipe.model @m phase communicating attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 2]
  pipe.rank 0 {
  }
  pipe.rank 1 {
    // expected-error @+1 {{names micro-batch 2 but stage 0 has 2 micro-batches}}
    pipe.recv activation stage 1 mb 0 from 0 stage 0 mb 2 samples [0, 1) bytes 8
  }
}

// -----

// samples outside micro-batch
pipe.model @m phase communicating attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 2]
  pipe.rank 0 {
    // expected-error @+1 {{moves samples [0, 2) outside micro-batch 0 of stage 0 [0, 1)}}
    pipe.send activation stage 0 mb 0 to 1 stage 1 mb 0 samples [0, 2) bytes 8
  }
  pipe.rank 1 {
  }
}

// -----

// stage index negative
pipe.model @m phase partitioned attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  // expected-error @+1 {{expects a non-negative index, got -1}}
  pipe.stage -1 layers [0, 1)
  pipe.stage 1 layers [1, 2)
}

// -----

// stage empty range
pipe.model @m phase partitioned attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  // expected-error @+1 {{expects a non-empty layer range, got [1, 1)}}
  pipe.stage 0 layers [1, 1)
  pipe.stage 1 layers [1, 2)
}

// -----

// stage negative rank
pipe.model @m phase placed attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  // expected-error @+1 {{expects a non-negative rank, got -1}}
  pipe.stage 0 layers [0, 1) rank -1
  pipe.stage 1 layers [1, 2) rank 1
}

// -----

// one boundary
pipe.model @m phase split attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  // expected-error @+1 {{expects at least one micro-batch (two sample boundaries)}}
  pipe.stage 0 layers [0, 1) rank 0 samples [2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 2]
}

// -----

// boundaries start at 0
pipe.model @m phase split attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  // expected-error @+1 {{micro-batch boundaries must start at sample 0, got 1}}
  pipe.stage 0 layers [0, 1) rank 0 samples [1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 2]
}

// -----

// boundaries increase
pipe.model @m phase split attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  // expected-error @+1 {{micro-batch boundaries must increase strictly, got 1 after 1}}
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 2]
}

// -----

// rank negative
pipe.model @m phase scheduled attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 2]
  // expected-error @+1 {{expects a non-negative rank, got -1}}
  pipe.rank -1 {
  }
  pipe.rank 1 {
  }
}

// -----

// foreign op in rank
pipe.model @m phase scheduled attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 2]
  pipe.rank 0 {
    // expected-error @+1 {{is not allowed in the body of 'pipe.rank'}}
    "test.op"() : () -> ()
  }
  pipe.rank 1 {
  }
}

// -----

// forward negative
pipe.model @m phase scheduled attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 2]
  pipe.rank 0 {
    // expected-error @+1 {{expects a non-negative stage and micro-batch, got stage 0 mb -1}}
    pipe.forward stage 0 mb -1
  }
  pipe.rank 1 {
  }
}

// -----

// backward negative
pipe.model @m phase scheduled attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 2]
  pipe.rank 0 {
    // expected-error @+1 {{expects a non-negative stage and micro-batch, got stage -2 mb 0}}
    pipe.backward stage -2 mb 0
  }
  pipe.rank 1 {
  }
}

// -----

// transfer negative peer
pipe.model @m phase communicating attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 2]
  pipe.rank 0 {
    // expected-error @+1 {{expects a non-negative peer rank, stage and micro-batch}}
    pipe.send activation stage 0 mb 0 to -1 stage 1 mb 0 samples [0, 1) bytes 8
  }
  pipe.rank 1 {
  }
}

// -----

// transfer empty range
pipe.model @m phase communicating attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 2]
  pipe.rank 0 {
    // expected-error @+1 {{expects a non-empty sample range, got [1, 1)}}
    pipe.send activation stage 0 mb 0 to 1 stage 1 mb 0 samples [1, 1) bytes 8
  }
  pipe.rank 1 {
  }
}

// -----

// transfer negative bytes
pipe.model @m phase communicating attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 2]
  pipe.rank 0 {
    // expected-error @+1 {{expects non-negative bytes, got -8}}
    pipe.send activation stage 0 mb 0 to 1 stage 1 mb 0 samples [0, 1) bytes -8
  }
  pipe.rank 1 {
  }
}

// -----

// transfer bad batch
pipe.model @m phase communicating attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 2]
  pipe.rank 0 {
    // expected-error @+1 {{expects batch -1 (none) or a batch id, got -3}}
    pipe.send activation stage 0 mb 0 to 1 stage 1 mb 0 samples [0, 1) bytes 8 batch -3
  }
  pipe.rank 1 {
  }
}

// -----

// transfer direction
pipe.model @m phase communicating attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 2]
  pipe.rank 0 {
    // expected-error @+1 {{moves gradients between stage 0 and stage -1, got peer stage 1}}
    pipe.send gradient stage 0 mb 0 to 1 stage 1 mb 0 samples [0, 1) bytes 8
  }
  pipe.rank 1 {
  }
}

// -----

// recv direction
pipe.model @m phase communicating attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 2]
  pipe.rank 0 {
    // expected-error @+1 {{moves activations between stage 0 and stage -1, got peer stage 1}}
    pipe.recv activation stage 0 mb 0 from 1 stage 1 mb 0 samples [0, 1) bytes 8
  }
  pipe.rank 1 {
  }
}

// -----

// unshard negative stage
pipe.model @m phase communicating attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 2]
  pipe.rank 0 {
    // expected-error @+1 {{expects a non-negative stage, got -1}}
    pipe.unshard stage -1 bytes 8
  }
  pipe.rank 1 {
  }
}

// -----

// reduce_grad negative bytes
pipe.model @m phase communicating attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 2]
  pipe.rank 0 {
    // expected-error @+1 {{expects non-negative bytes, got -8}}
    pipe.reduce_grad stage 0 bytes -8 all_reduce
  }
  pipe.rank 1 {
  }
}

// -----

// gather_params negative bytes
pipe.model @m phase communicating attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 2]
  pipe.rank 0 {
    // expected-error @+1 {{expects non-negative bytes, got -1}}
    pipe.gather_params stage 0 bytes -1
  }
  pipe.rank 1 {
  }
}

// -----

// optimizer_step negative stage
pipe.model @m phase communicating attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 2]
  pipe.rank 0 {
    // expected-error @+1 {{expects a non-negative stage, got -1}}
    pipe.optimizer_step stage -1
  }
  pipe.rank 1 {
  }
}

// -----

// collective stage on other rank
pipe.model @m phase communicating attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 2]
  pipe.rank 0 {
    // expected-error @+1 {{runs on rank 0 but stage 1 is placed on rank 1}}
    pipe.unshard stage 1 bytes 8
  }
  pipe.rank 1 {
  }
}

// -----

// moe.num_experts
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+2 {{num_experts must be positive, got 0}}
  // expected-error @+1 {{failed to parse Pipe_TransformerAttr parameter 'moe' which is to be a `MoeAttr`}}
  architecture = #pipe.transformer<num_layers = 2, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "gelu", norm = "layernorm", position = "learned", tie_embeddings = false, bias = "all", moe = #pipe.moe<num_experts = 0, top_k = 1, expert_ffn_hidden_size = 8>>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// moe.top_k
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+2 {{top_k must be between 1 and num_experts, got 5}}
  // expected-error @+1 {{failed to parse Pipe_TransformerAttr parameter 'moe' which is to be a `MoeAttr`}}
  architecture = #pipe.transformer<num_layers = 2, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "gelu", norm = "layernorm", position = "learned", tie_embeddings = false, bias = "all", moe = #pipe.moe<num_experts = 4, top_k = 5, expert_ffn_hidden_size = 8>>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// moe.expert_ffn_hidden_size
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+2 {{expert_ffn_hidden_size must be positive, got 0}}
  // expected-error @+1 {{failed to parse Pipe_TransformerAttr parameter 'moe' which is to be a `MoeAttr`}}
  architecture = #pipe.transformer<num_layers = 2, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "gelu", norm = "layernorm", position = "learned", tie_embeddings = false, bias = "all", moe = #pipe.moe<num_experts = 4, top_k = 2, expert_ffn_hidden_size = 0>>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// moe.aux_loss_coefficient
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+2 {{aux_loss_coefficient must be non-negative, got -1}}
  // expected-error @+1 {{failed to parse Pipe_TransformerAttr parameter 'moe' which is to be a `MoeAttr`}}
  architecture = #pipe.transformer<num_layers = 2, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "gelu", norm = "layernorm", position = "learned", tie_embeddings = false, bias = "all", moe = #pipe.moe<num_experts = 4, top_k = 2, expert_ffn_hidden_size = 8, aux_loss_coefficient = -1.0>>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// moe.z_loss_coefficient
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+2 {{z_loss_coefficient must be non-negative, got -1}}
  // expected-error @+1 {{failed to parse Pipe_TransformerAttr parameter 'moe' which is to be a `MoeAttr`}}
  architecture = #pipe.transformer<num_layers = 2, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "gelu", norm = "layernorm", position = "learned", tie_embeddings = false, bias = "all", moe = #pipe.moe<num_experts = 4, top_k = 2, expert_ffn_hidden_size = 8, z_loss_coefficient = -1.0>>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// moe.drop_policy: only with a capacity
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+2 {{drop_policy says which assignments a capacity drops, and capacity_factor is 0 (dropless)}}
  // expected-error @+1 {{failed to parse Pipe_TransformerAttr parameter 'moe' which is to be a `MoeAttr`}}
  architecture = #pipe.transformer<num_layers = 2, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "gelu", norm = "layernorm", position = "learned", tie_embeddings = false, bias = "all", moe = #pipe.moe<num_experts = 4, top_k = 2, expert_ffn_hidden_size = 8, drop_policy = "probs">>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// moe.bias_update_rate: only the sigmoid router has a bias to move
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+2 {{bias_update_rate moves the sigmoid router's bias, and the router is softmax}}
  // expected-error @+1 {{failed to parse Pipe_TransformerAttr parameter 'moe' which is to be a `MoeAttr`}}
  architecture = #pipe.transformer<num_layers = 2, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "gelu", norm = "layernorm", position = "learned", tie_embeddings = false, bias = "all", moe = #pipe.moe<num_experts = 4, top_k = 2, expert_ffn_hidden_size = 8, bias_update_rate = 1.0e-3>>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// moe.shared_experts
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+2 {{shared_experts must be non-negative, got -1}}
  // expected-error @+1 {{failed to parse Pipe_TransformerAttr parameter 'moe' which is to be a `MoeAttr`}}
  architecture = #pipe.transformer<num_layers = 2, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "gelu", norm = "layernorm", position = "learned", tie_embeddings = false, bias = "all", moe = #pipe.moe<num_experts = 4, top_k = 2, expert_ffn_hidden_size = 8, shared_experts = -1>>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// moe.shared_ffn_hidden_size
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+2 {{shared_ffn_hidden_size must be non-negative, got -1}}
  // expected-error @+1 {{failed to parse Pipe_TransformerAttr parameter 'moe' which is to be a `MoeAttr`}}
  architecture = #pipe.transformer<num_layers = 2, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "gelu", norm = "layernorm", position = "learned", tie_embeddings = false, bias = "all", moe = #pipe.moe<num_experts = 4, top_k = 2, expert_ffn_hidden_size = 8, shared_ffn_hidden_size = -1>>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// moe.shared_experts without a width
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+2 {{shared_experts 1 and shared_ffn_hidden_size 0: both are 0 or both positive}}
  // expected-error @+1 {{failed to parse Pipe_TransformerAttr parameter 'moe' which is to be a `MoeAttr`}}
  architecture = #pipe.transformer<num_layers = 2, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "gelu", norm = "layernorm", position = "learned", tie_embeddings = false, bias = "all", moe = #pipe.moe<num_experts = 4, top_k = 2, expert_ffn_hidden_size = 8, shared_experts = 1>>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// moe.dense_layers
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+2 {{dense_layers must be non-negative, got -1}}
  // expected-error @+1 {{failed to parse Pipe_TransformerAttr parameter 'moe' which is to be a `MoeAttr`}}
  architecture = #pipe.transformer<num_layers = 2, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "gelu", norm = "layernorm", position = "learned", tie_embeddings = false, bias = "all", moe = #pipe.moe<num_experts = 4, top_k = 2, expert_ffn_hidden_size = 8, dense_layers = -1>>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// moe.capacity_factor
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+2 {{capacity_factor must be non-negative (0: dropless), got -1}}
  // expected-error @+1 {{failed to parse Pipe_TransformerAttr parameter 'moe' which is to be a `MoeAttr`}}
  architecture = #pipe.transformer<num_layers = 2, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "gelu", norm = "layernorm", position = "learned", tie_embeddings = false, bias = "all", moe = #pipe.moe<num_experts = 4, top_k = 2, expert_ffn_hidden_size = 8, capacity_factor = -1.0>>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// moe.imbalance
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+2 {{imbalance must be at least 1, got 5.000000e-01}}
  // expected-error @+1 {{failed to parse Pipe_TransformerAttr parameter 'moe' which is to be a `MoeAttr`}}
  architecture = #pipe.transformer<num_layers = 2, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "gelu", norm = "layernorm", position = "learned", tie_embeddings = false, bias = "all", moe = #pipe.moe<num_experts = 4, top_k = 2, expert_ffn_hidden_size = 8, imbalance = 0.5>>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// transformer.moe dense_layers above num_layers
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+1 {{moe's dense_layers 3 exceed num_layers 2}}
  architecture = #pipe.transformer<num_layers = 2, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "gelu", norm = "layernorm", position = "learned", tie_embeddings = false, bias = "all", moe = #pipe.moe<num_experts = 4, top_k = 2, expert_ffn_hidden_size = 8, dense_layers = 3>>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// transformer.head_dim
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+1 {{head_dim must be non-negative, got -2}}
  architecture = #pipe.transformer<num_layers = 2, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "gelu", norm = "layernorm", position = "learned", tie_embeddings = false, bias = "all", head_dim = -2>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// transformer.head_dim with latent attention
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+1 {{head_dim is set with latent_attention, whose head widths are its own}}
  architecture = #pipe.transformer<num_layers = 2, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "gelu", norm = "layernorm", position = "learned", tie_embeddings = false, bias = "all", head_dim = 4, latent_attention = #pipe.latent_attention<q_lora_rank = 0, kv_lora_rank = 4, qk_nope_head_dim = 4, qk_rope_head_dim = 2, v_head_dim = 4>>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// latent_attention.q_lora_rank
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+2 {{q_lora_rank must be non-negative, got -1}}
  // expected-error @+1 {{failed to parse Pipe_TransformerAttr parameter 'latent_attention' which is to be a `LatentAttentionAttr`}}
  architecture = #pipe.transformer<num_layers = 2, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "gelu", norm = "layernorm", position = "learned", tie_embeddings = false, bias = "all", latent_attention = #pipe.latent_attention<q_lora_rank = -1, kv_lora_rank = 4, qk_nope_head_dim = 4, qk_rope_head_dim = 2, v_head_dim = 4>>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// latent_attention.kv_lora_rank
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+2 {{kv_lora_rank must be positive, got 0}}
  // expected-error @+1 {{failed to parse Pipe_TransformerAttr parameter 'latent_attention' which is to be a `LatentAttentionAttr`}}
  architecture = #pipe.transformer<num_layers = 2, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "gelu", norm = "layernorm", position = "learned", tie_embeddings = false, bias = "all", latent_attention = #pipe.latent_attention<q_lora_rank = 0, kv_lora_rank = 0, qk_nope_head_dim = 4, qk_rope_head_dim = 2, v_head_dim = 4>>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// latent_attention.qk_nope_head_dim
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+2 {{qk_nope_head_dim must be non-negative, got -1}}
  // expected-error @+1 {{failed to parse Pipe_TransformerAttr parameter 'latent_attention' which is to be a `LatentAttentionAttr`}}
  architecture = #pipe.transformer<num_layers = 2, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "gelu", norm = "layernorm", position = "learned", tie_embeddings = false, bias = "all", latent_attention = #pipe.latent_attention<q_lora_rank = 0, kv_lora_rank = 4, qk_nope_head_dim = -1, qk_rope_head_dim = 2, v_head_dim = 4>>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// latent_attention.qk_rope_head_dim
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+2 {{qk_rope_head_dim must be non-negative, got -1}}
  // expected-error @+1 {{failed to parse Pipe_TransformerAttr parameter 'latent_attention' which is to be a `LatentAttentionAttr`}}
  architecture = #pipe.transformer<num_layers = 2, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "gelu", norm = "layernorm", position = "learned", tie_embeddings = false, bias = "all", latent_attention = #pipe.latent_attention<q_lora_rank = 0, kv_lora_rank = 4, qk_nope_head_dim = 4, qk_rope_head_dim = -1, v_head_dim = 4>>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// latent_attention: no query/key dimensions
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+2 {{qk_nope_head_dim + qk_rope_head_dim must be positive, got 0}}
  // expected-error @+1 {{failed to parse Pipe_TransformerAttr parameter 'latent_attention' which is to be a `LatentAttentionAttr`}}
  architecture = #pipe.transformer<num_layers = 2, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "gelu", norm = "layernorm", position = "learned", tie_embeddings = false, bias = "all", latent_attention = #pipe.latent_attention<q_lora_rank = 0, kv_lora_rank = 4, qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 4>>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// latent_attention.v_head_dim
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+2 {{v_head_dim must be positive, got 0}}
  // expected-error @+1 {{failed to parse Pipe_TransformerAttr parameter 'latent_attention' which is to be a `LatentAttentionAttr`}}
  architecture = #pipe.transformer<num_layers = 2, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "gelu", norm = "layernorm", position = "learned", tie_embeddings = false, bias = "all", latent_attention = #pipe.latent_attention<q_lora_rank = 0, kv_lora_rank = 4, qk_nope_head_dim = 4, qk_rope_head_dim = 2, v_head_dim = 0>>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// parallelism.expert
pipe.model @m phase model attributes {
  // expected-error @+1 {{expert must be positive, got 0}}
  parallelism = #pipe.parallelism<pipeline = 1, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner", expert = 0>,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// layer.expert_params
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  // expected-error @+1 {{expects expert_params between 0 and params (10), got 11}}
  pipe.layer "block" block params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2 expert_params 11
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// training.master_weights "parameters" needs a 16-bit (or fp8) dtype
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "full", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  // expected-error @+1 {{master_weights "parameters" needs a 16-bit or fp8 dtype}}
  training = #pipe.training<dtype = "fp32", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3, master_weights = "parameters">} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// training.fp8_scaling "current" needs dtype fp8
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  // expected-error @+1 {{fp8_scaling "current" needs dtype "fp8"}}
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3, fp8_scaling = "current">} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// training.adam_moments "bf16" needs Adam
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  // expected-error @+1 {{adam_moments "bf16" needs optimizer "adam"}}
  training = #pipe.training<dtype = "bf16", optimizer = "sgd", seed = 1234, learning_rate = 1.0e-3, adam_moments = "bf16">} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// parallelism.max_deferred_weight_gradients: -1 (the schedule's rule) or a count
pipe.model @m phase model attributes {
  // expected-error @+1 {{max_deferred_weight_gradients must be non-negative (or -1, the schedule's own rule), got -2}}
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "zb-h1", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner", split_backward = true, max_deferred_weight_gradients = -2>,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// parallelism.max_deferred_weight_gradients: only with split backwards
pipe.model @m phase model attributes {
  // expected-error @+1 {{max_deferred_weight_gradients needs split backwards (split_backward or a zero-bubble schedule)}}
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner", max_deferred_weight_gradients = 1>,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// moe.routed_scaling_factor
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+2 {{routed_scaling_factor must be positive, got 0}}
  // expected-error @+1 {{failed to parse Pipe_TransformerAttr parameter 'moe' which is to be a `MoeAttr`}}
  architecture = #pipe.transformer<num_layers = 2, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "swiglu", norm = "rmsnorm", position = "rotary", tie_embeddings = false, bias = "none", moe = #pipe.moe<num_experts = 4, top_k = 2, expert_ffn_hidden_size = 8, routed_scaling_factor = 0.0>>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// moe.shared_expert_gate without shared experts
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+2 {{shared_expert_gate gates the shared experts, and there are none}}
  // expected-error @+1 {{failed to parse Pipe_TransformerAttr parameter 'moe' which is to be a `MoeAttr`}}
  architecture = #pipe.transformer<num_layers = 2, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "swiglu", norm = "rmsnorm", position = "rotary", tie_embeddings = false, bias = "none", moe = #pipe.moe<num_experts = 4, top_k = 2, expert_ffn_hidden_size = 8, shared_expert_gate = true>>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// rope_scaling.factor
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+2 {{factor must be at least 1, got 5.000000e-01}}
  // expected-error @+1 {{failed to parse Pipe_TransformerAttr parameter 'rope_scaling' which is to be a `RopeScalingAttr`}}
  architecture = #pipe.transformer<num_layers = 2, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "swiglu", norm = "rmsnorm", position = "rotary", tie_embeddings = false, bias = "none", rope_scaling = #pipe.rope_scaling<rope_type = "linear", factor = 0.5>>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// rope_scaling.original_max_position_embeddings: llama3, yarn and dynamic need it
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+2 {{original_max_position_embeddings must be positive for llama3, yarn and dynamic, got 0}}
  // expected-error @+1 {{failed to parse Pipe_TransformerAttr parameter 'rope_scaling' which is to be a `RopeScalingAttr`}}
  architecture = #pipe.transformer<num_layers = 2, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "swiglu", norm = "rmsnorm", position = "rotary", tie_embeddings = false, bias = "none", rope_scaling = #pipe.rope_scaling<rope_type = "yarn", factor = 4.0>>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// rope_scaling.high_freq_factor
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+2 {{high_freq_factor must be above low_freq_factor, got 1}}
  // expected-error @+1 {{failed to parse Pipe_TransformerAttr parameter 'rope_scaling' which is to be a `RopeScalingAttr`}}
  architecture = #pipe.transformer<num_layers = 2, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "swiglu", norm = "rmsnorm", position = "rotary", tie_embeddings = false, bias = "none", rope_scaling = #pipe.rope_scaling<rope_type = "llama3", factor = 8.0, original_max_position_embeddings = 8192, high_freq_factor = 1.0>>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// rope_scaling.rope_type: default is no rope_scaling
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+2 {{rope_type must be an extension (no rope_scaling: none), got default}}
  // expected-error @+1 {{failed to parse Pipe_TransformerAttr parameter 'rope_scaling' which is to be a `RopeScalingAttr`}}
  architecture = #pipe.transformer<num_layers = 2, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "swiglu", norm = "rmsnorm", position = "rotary", tie_embeddings = false, bias = "none", rope_scaling = #pipe.rope_scaling<rope_type = "default">>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// rope_scaling: only rotary positions
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+1 {{rope_scaling extends rotary positions, and the positions are learned}}
  architecture = #pipe.transformer<num_layers = 2, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "swiglu", norm = "rmsnorm", position = "learned", tie_embeddings = false, bias = "none", rope_scaling = #pipe.rope_scaling<rope_type = "linear", factor = 2.0>>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}

// -----

// rope_scaling: a key its type does not read
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+2 {{attention_factor is set and rope_type llama3 does not read it}}
  // expected-error @+1 {{failed to parse Pipe_TransformerAttr parameter 'rope_scaling' which is to be a `RopeScalingAttr`}}
  architecture = #pipe.transformer<num_layers = 2, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "swiglu", norm = "rmsnorm", position = "rotary", tie_embeddings = false, bias = "none", rope_scaling = #pipe.rope_scaling<rope_type = "llama3", factor = 8.0, original_max_position_embeddings = 8192, attention_factor = 1.5>>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}
