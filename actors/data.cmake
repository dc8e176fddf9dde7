# actors/data: the actors' side of data/: a BatchSource made from a job section
# (MakeBatchSource) and the data-source keys (source_keys.h). Its own small library, so its
# test links no model or kernel code. Included from actors/CMakeLists.txt; paths are absolute
# so the file also works when included from elsewhere.
set(_tandem_data_dir ${CMAKE_CURRENT_LIST_DIR}/data)
add_library(tandem_data_source STATIC ${_tandem_data_dir}/source.cc
                                      ${_tandem_data_dir}/source_keys.cc)
target_link_libraries(tandem_data_source PUBLIC tandem::corpus tandem::actor PRIVATE fmt::fmt)
target_link_libraries(tandem_actors PUBLIC tandem_data_source)

tandem_add_test(data_source_test
  SOURCES ${_tandem_data_dir}/source_test.cc ${_tandem_data_dir}/vocab_test.cc
  LIBS tandem_data_source)
