# actors/data: pre-tokenized data (JSONL, the binary set of docs/data-format.md), packing,
# synthetic data and the BatchSource factory. Included from actors/CMakeLists.txt; paths are
# absolute so the file also works when included from elsewhere.
set(_tandem_data_dir ${CMAKE_CURRENT_LIST_DIR}/data)
target_sources(tandem_actors PRIVATE
  ${_tandem_data_dir}/token_batch.cc
  ${_tandem_data_dir}/corpus.cc
  ${_tandem_data_dir}/sharded_set.cc
  ${_tandem_data_dir}/jsonl.cc
  ${_tandem_data_dir}/packer.cc
  ${_tandem_data_dir}/synthetic.cc
  ${_tandem_data_dir}/source.cc)
target_link_libraries(tandem_actors PRIVATE nlohmann_json::nlohmann_json)

tandem_add_test(data_test
  SOURCES ${_tandem_data_dir}/corpus_test.cc ${_tandem_data_dir}/packer_test.cc
          ${_tandem_data_dir}/source_test.cc ${_tandem_data_dir}/vocab_test.cc
          ${_tandem_data_dir}/sharded_set_test.cc
  LIBS tandem::actors_whole)
