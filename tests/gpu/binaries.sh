# The binaries tests/gpu/checks.py runs: run.sh builds them, bundle.sh packs them (sourced).
gpu_binaries=(conduit-compile conduit-run conduit-run-cuda runtime_cuda_tests cuda_gemm_bench executor_bench kernel_model)
