// Converting CUDA runtime errors into Status. Include only from CUDA-enabled sources.
#pragma once

#include <cuda_runtime_api.h>

#include "runtime/core/logging.h"
#include "runtime/core/status.h"

// Returns CudaError("file:line: expr: message") from the enclosing function on failure.
#define CUDA_RETURN_IF_ERROR(expr)                                                        \
  do {                                                                                    \
    cudaError_t _e = (expr);                                                              \
    if (_e != cudaSuccess)                                                                \
      return ::tandem::CudaError("{}:{}: {}: {}", __FILE__, __LINE__, #expr,              \
                                 cudaGetErrorString(_e));                                 \
  } while (0)

// After a kernel launch: returns the launch error, if any, as a Status.
#define CUDA_RETURN_IF_LAUNCH_ERROR(kernel_name) CUDA_RETURN_IF_ERROR(cudaGetLastError())

// Aborts on failure; for destructors and places that cannot return a Status.
#define CUDA_CHECK(expr)                                                                  \
  do {                                                                                    \
    cudaError_t _e = (expr);                                                              \
    TANDEM_CHECK_MSG(_e == cudaSuccess, "{}: {}", #expr, cudaGetErrorString(_e));          \
  } while (0)

// Logs a failure (file, line, call, CUDA's message) and goes on; for destructors and
// teardown paths, which must not abort and must not drop the error silently either.
#define CUDA_LOG_IF_ERROR(expr)                                                           \
  do {                                                                                    \
    cudaError_t _e = (expr);                                                              \
    if (_e != cudaSuccess)                                                                \
      TLOG_ERROR("{}:{}: {}: {}", __FILE__, __LINE__, #expr, cudaGetErrorString(_e));     \
  } while (0)
