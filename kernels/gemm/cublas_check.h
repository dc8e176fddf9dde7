// CUBLAS_RETURN_IF_ERROR: returns a CudaError naming the file, line, expression and cuBLAS's
// status text when a cuBLAS or cuBLASLt call (both return cublasStatus_t) fails. For the
// kernels that call cuBLAS directly (gemm_cublaslt.cc, the MoE experts).
// Thread-safety: a macro over thread-safe calls.
#pragma once

#include <cublas_v2.h>

#include "kernels/core/cuda_check.h"

#define CUBLAS_RETURN_IF_ERROR(expr)                                                     \
  do {                                                                                   \
    cublasStatus_t _s = (expr);                                                          \
    if (_s != CUBLAS_STATUS_SUCCESS)                                                     \
      return ::tandem::CudaError("{}:{}: {}: {}", __FILE__, __LINE__, #expr,             \
                                 cublasGetStatusString(_s));                             \
  } while (0)
