# Decides TANDEM_HAVE_CUDA from TANDEM_CUDA (AUTO|ON|OFF) and sets up the CUDA language
# for sm_90. Targets that hold CUDA code link tandem::cuda_deps.
set(TANDEM_HAVE_CUDA OFF)
if(NOT TANDEM_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(TANDEM_HAVE_CUDA ON)
  elseif(TANDEM_CUDA STREQUAL "ON")
    message(FATAL_ERROR "TANDEM_CUDA=ON but no nvcc was found; install the CUDA toolkit "
                        "or configure with -DTANDEM_CUDA=OFF")
  endif()
endif()

if(TANDEM_HAVE_CUDA)
  set(CMAKE_CUDA_ARCHITECTURES 90a CACHE STRING "CUDA architectures")
  enable_language(CUDA)
  # CMake 3.25 does not know nvcc 13's C++20 flag and refuses CUDA20 targets (which targets
  # get from CMAKE_CXX_STANDARD 20): pass the flag directly and tell CMake none is needed.
  set(CMAKE_CUDA_FLAGS "${CMAKE_CUDA_FLAGS} -std=c++20")
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "")
  # .cu files hold kernels and cudaError_t launchers only: nvcc 13 cannot compile fmt 9, which
  # runtime/core/status.h includes, so Status-returning wrappers live in *_cuda.cc files.
  # Debian 12's CMake 3.25 FindCUDAToolkit sets a property on CUDA::nvToolsExt, a library
  # CUDA 13 no longer ships, and stops when that target was not made. tandem does not link it:
  # an empty stand-in, only where the library is absent, lets the module through.
  find_library(TANDEM_NVTOOLSEXT_LIB NAMES nvToolsExt nvToolsExt64_1 nvToolsExt64
               HINTS /usr/local/cuda/lib64 ENV CUDA_PATH PATH_SUFFIXES lib64 lib)
  if(NOT TANDEM_NVTOOLSEXT_LIB AND NOT TARGET CUDA::nvToolsExt)
    add_library(CUDA::nvToolsExt INTERFACE IMPORTED)
  endif()
  find_package(CUDAToolkit REQUIRED)
  find_library(TANDEM_CUDNN_LIB cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
  find_library(TANDEM_NCCL_LIB nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
  add_library(tandem_cuda_deps INTERFACE)
  target_link_libraries(tandem_cuda_deps INTERFACE CUDA::cudart CUDA::cublas CUDA::cublasLt)
  if(TANDEM_CUDNN_LIB)
    target_link_libraries(tandem_cuda_deps INTERFACE ${TANDEM_CUDNN_LIB})
  endif()
  if(TANDEM_NCCL_LIB)
    target_link_libraries(tandem_cuda_deps INTERFACE ${TANDEM_NCCL_LIB})
  endif()
  target_compile_definitions(tandem_cuda_deps INTERFACE TANDEM_HAVE_CUDA=1)
  add_library(tandem::cuda_deps ALIAS tandem_cuda_deps)
  set(CMAKE_CUDA_FLAGS "${CMAKE_CUDA_FLAGS} --expt-relaxed-constexpr -lineinfo")
  message(STATUS "tandem: CUDA ${CUDAToolkit_VERSION} on (sm_90a); cuDNN=${TANDEM_CUDNN_LIB} NCCL=${TANDEM_NCCL_LIB}")
else()
  add_library(tandem_cuda_deps INTERFACE)
  add_library(tandem::cuda_deps ALIAS tandem_cuda_deps)
  message(STATUS "tandem: CUDA off (CPU only)")
endif()
