// The chat encoder the chat and prompt targets encode with: the Qwen3 tokenizer and chat
// template (the test fixture that scripts/install-deps.sh unpacks, data/tokenizer/fixture.h),
// loaded once per process. Without the fixture the target stops with a message saying so.
//
// Thread-safety: the first call loads; libFuzzer calls from one thread.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "data/chat/chat_encoder.h"
#include "data/tokenizer/fixture.h"

namespace tandem::fuzz {

inline const chat_data::ChatEncoder& FixtureEncoder() {
  static const chat_data::ChatEncoder* enc = [] {
    auto e = chat_data::ChatEncoder::Load(tokenizer::Qwen3FixtureDir(), {});
    if (!e.ok()) {
      std::fprintf(stderr, "%s (run scripts/install-deps.sh for the tokenizer fixture)\n",
                   e.status().ToString().c_str());
      std::abort();
    }
    return new chat_data::ChatEncoder(std::move(e).value());
  }();
  return *enc;
}

}  // namespace tandem::fuzz
