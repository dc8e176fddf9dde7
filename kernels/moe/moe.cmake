# kernels/moe: mixture-of-experts feed-forward blocks: the router, the permutation of token
# copies by expert and its weighted inverse (with the shared expert's gate), the per-expert
# GEMM loop, and MoeLayer composing them (README.md).
tandem_kernel_sources(CPU moe/routing_cpu.cc moe/combine_cpu.cc moe/experts.cc moe/experts_fp8.cc
                      moe/experts_fp8_cpu.cc moe/moe_layer.cc)
tandem_kernel_sources(CUDA moe/moe.cu moe/moe_cuda.cc moe/experts_cuda.cc
                      moe/experts_fp8.cu moe/experts_fp8_cuda.cc)
tandem_add_test(moe_test SOURCES moe/moe_test.cc moe/moe_layer_test.cc moe/experts_fp8_test.cc LIBS tandem_kernels tandem_kernels_testing)
tandem_add_test(moe_gpu_test SOURCES moe/moe_gpu_test.cc moe/experts_fp8_gpu_test.cc LIBS tandem_kernels tandem_kernels_testing GPU)
