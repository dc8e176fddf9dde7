// Fuzzes HF config.json parsing: the target's TransformerConfig (Qwen3 / Llama keys, both
// transformers spellings of RoPE and dtype, layer types) and the DFlash drafter's config.
// A config that parses must survive its own round trip (ToJson, then parse again) with the
// same values.
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz/fuzz_util.h"
#include "models/dflash/dflash_config.h"
#include "models/io/hf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto c = tandem::models::ParseTransformerConfigText(text, "config.json");
  if (c.ok()) {
    const nlohmann::json j = tandem::models::TransformerConfigToJson(*c);
    auto again = tandem::models::ParseTransformerConfig(j, "round-trip config.json");
    TANDEM_FUZZ_ASSERT(again.ok());
    TANDEM_FUZZ_ASSERT(tandem::models::TransformerConfigToJson(*again) == j);
  }
  auto d = tandem::models::ParseDFlashConfigText(text, "drafter config.json");
  if (d.ok()) {
    const nlohmann::json j = tandem::models::DFlashConfigToJson(*d);
    auto again = tandem::models::ParseDFlashConfig(j, "round-trip drafter config.json");
    TANDEM_FUZZ_ASSERT(again.ok());
    TANDEM_FUZZ_ASSERT(tandem::models::DFlashConfigToJson(*again) == j);
  }
  return 0;
}
