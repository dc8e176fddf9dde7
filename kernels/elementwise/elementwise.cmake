# kernels/elementwise: residual adds and casts, concat + noise of captured layers, raw row
# gathers and the embedding lookup built on them, the row argmax (greedy decode picks) and the
# row top-k (the candidates of a sampled pick).
tandem_kernel_sources(CPU elementwise/elementwise_cpu.cc elementwise/concat_noise_cpu.cc
     elementwise/row_gather_cpu.cc elementwise/row_argmax_cpu.cc elementwise/row_topk_cpu.cc
     elementwise/embedding.cc)
tandem_kernel_sources(CUDA elementwise/elementwise.cu elementwise/elementwise_cuda.cc
     elementwise/concat_noise.cu elementwise/concat_noise_cuda.cc
     elementwise/row_gather.cu elementwise/row_gather_cuda.cc
     elementwise/row_argmax.cu elementwise/row_argmax_cuda.cc
     elementwise/row_topk.cu elementwise/row_topk_cuda.cc)
tandem_add_test(elementwise_test SOURCES elementwise/elementwise_test.cc elementwise/row_gather_test.cc elementwise/row_argmax_test.cc elementwise/row_topk_test.cc LIBS tandem_kernels tandem_kernels_testing)
tandem_add_test(elementwise_gpu_test SOURCES elementwise/elementwise_gpu_test.cc elementwise/row_gather_gpu_test.cc elementwise/row_argmax_gpu_test.cc elementwise/row_topk_gpu_test.cc LIBS tandem_kernels tandem_kernels_testing GPU)
