// Shared by the chat_data tests: the Qwen3 fixture's encoder, loaded once.
#pragma once

#include <gtest/gtest.h>

#include "data/chat/chat_encoder.h"
#include "data/tokenizer/fixture.h"

namespace tandem::chat_data {

inline const ChatEncoder& Qwen3Encoder() {
  static const ChatEncoder* enc = [] {
    auto e = ChatEncoder::Load(tokenizer::Qwen3FixtureDir(), {});
    if (!e.ok()) {
      ADD_FAILURE() << e.status().ToString() << " (run scripts/install-deps.sh)";
      std::abort();
    }
    return new ChatEncoder(std::move(e).value());
  }();
  return *enc;
}

}  // namespace tandem::chat_data
