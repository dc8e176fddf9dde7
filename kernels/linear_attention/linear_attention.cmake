# kernels/linear_attention: the Qwen3.5/3.6 hybrid layers' ops: the gated delta rule
# (Gated DeltaNet), the causal depthwise conv1d + SiLU with document resets, the gates, the
# gated and zero-centred RMSNorms and the sigmoid output gate. CPU references and CUDA
# versions (the gated delta rule: a recurrent CUDA kernel for any head dim <= 128 and the chunked
# tensor-core one for 128 / 128, with a float64 chunked CPU twin).
tandem_kernel_sources(CPU linear_attention/gated_delta_rule_cpu.cc linear_attention/hybrid_ops_cpu.cc
     linear_attention/hybrid_ops_fp8_cpu.cc
     linear_attention/gated_delta_rule_chunked_cpu.cc linear_attention/decode_step_cpu.cc)
tandem_add_test(linear_attention_test
  SOURCES linear_attention/gated_delta_rule_test.cc linear_attention/hybrid_ops_test.cc
          linear_attention/hybrid_ops_fp8_test.cc
          linear_attention/gated_delta_rule_chunked_test.cc linear_attention/decode_step_test.cc
  LIBS tandem_kernels tandem_kernels_testing)
tandem_kernel_sources(CUDA linear_attention/hybrid_ops.cu linear_attention/hybrid_ops_cuda.cc
     linear_attention/hybrid_ops_fp8.cu linear_attention/hybrid_ops_fp8_cuda.cc
     linear_attention/gated_delta_rule.cu linear_attention/gated_delta_rule_cuda.cc
     linear_attention/gated_delta_rule_chunked.cu linear_attention/gated_delta_rule_chunked_state.cu
     linear_attention/gated_delta_rule_chunked_cuda.cc
     linear_attention/decode_step.cu linear_attention/decode_step_cuda.cc)
tandem_add_test(linear_attention_gpu_test
  SOURCES linear_attention/hybrid_ops_gpu_test.cc linear_attention/hybrid_ops_fp8_gpu_test.cc
          linear_attention/gated_delta_rule_gpu_test.cc
          linear_attention/gated_delta_rule_chunked_gpu_test.cc linear_attention/decode_step_gpu_test.cc
  LIBS tandem_kernels tandem_kernels_testing GPU)
