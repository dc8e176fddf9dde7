# Script for the plugin_custom_actor test (cmake -P). Inputs: TANDEM_BUILD_DIR, EXAMPLE_DIR,
# WORK_DIR, GENERATOR, CXX_COMPILER. Fails (FATAL_ERROR) at the first step that goes wrong.
function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(step_output "${out}${err}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
step("install" ${CMAKE_COMMAND} --install ${TANDEM_BUILD_DIR} --prefix ${prefix})

# The job file names its plugin relative to itself (build/libbyte_stats.so), so the example's
# job file and its build directory sit side by side in WORK_DIR, as in a user's checkout.
file(COPY ${EXAMPLE_DIR}/byte_stats.toml DESTINATION ${WORK_DIR})
step("configure the example" ${CMAKE_COMMAND} -S ${EXAMPLE_DIR} -B ${WORK_DIR}/build
     -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_PREFIX_PATH=${prefix})
step("build the example" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)

step("tandem run" ${prefix}/bin/tandem run ${WORK_DIR}/byte_stats.toml)
message("${step_output}")
# 2 producers x 200 objects, all through the plugin's single replica.
set(expected "stats[^\n]*byte stats: 400 objects \\([^)]+\\), mean byte [0-9.]+ \\(per object")
if(NOT step_output MATCHES "${expected}")
  message(FATAL_ERROR "the plugin's summary line is missing (wanted /${expected}/)")
endif()
