# tandem_add_test(NAME SOURCES src... [LIBS lib...] [GPU] [LABELS l...] [TIMEOUT s])
#
# Builds a GoogleTest binary and registers it with ctest. GPU tests link a main that
# exits with code 77 (ctest: "Skipped", shown in the summary) when no CUDA device is
# visible, and carry the label `gpu`; everything else carries `cpu`.
#
# Each test gets its own scratch folder, emptied before every run: TEST_TMPDIR (gtest's
# ::testing::TempDir()) and TMPDIR (std::filesystem::temp_directory_path(), mkstemp) point at
# BUILD/test-tmp/NAME. Tests that write fixed names there ("dflash_train", "job_metrics_test")
# so never collide with each other under `ctest -j`, with a sanitizer build's run of the same
# test, or with another checkout's build running the suite on the same machine.
function(tandem_add_test name)
  cmake_parse_arguments(T "GPU" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest Threads::Threads)
  if(T_GPU)
    target_link_libraries(${name} PRIVATE tandem_gpu_test_main)
    set(labels gpu ${T_LABELS})
  else()
    target_link_libraries(${name} PRIVATE GTest::gtest_main)
    set(labels cpu ${T_LABELS})
  endif()
  set(tmp ${PROJECT_BINARY_DIR}/test-tmp/${name})
  add_test(NAME ${name}
           COMMAND sh -c "rm -rf \"$1\" && mkdir -p \"$1\" && exec \"$0\""
                   $<TARGET_FILE:${name}> ${tmp})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${labels}" TIMEOUT ${T_TIMEOUT}
                                          SKIP_RETURN_CODE 77
                                          ENVIRONMENT "TEST_TMPDIR=${tmp};TMPDIR=${tmp}")
endfunction()
