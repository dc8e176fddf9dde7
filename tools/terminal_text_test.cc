#include "tools/terminal_text.h"

#include <gtest/gtest.h>

namespace tandem::cli {
namespace {

TEST(TerminalTextTest, EscapeSequencesBecomeVisible) {
  // A job name that would clear the screen and retitle the terminal.
  const std::string name = "job\x1b[2J\x1b]0;pwned\x07\xc2\x9b" "31m\x7f";
  const std::string out = EscapeControl(name);
  EXPECT_EQ(out, "job\\x1b[2J\\x1b]0;pwned\\x07\\u009b31m\\x7f");
  for (char c : out) EXPECT_GE(static_cast<unsigned char>(c), 0x20) << out;
  EXPECT_EQ(EscapeControl("a\nb\tc\rd"), "a\\nb\\tc\\rd");
}

TEST(TerminalTextTest, KeepLinesKeepsNewlinesAndTabsOnly) {
  EXPECT_EQ(EscapeControlKeepLines("line 1\n\tline 2\x1b[K\r"), "line 1\n\tline 2\\x1b[K\\r");
}

TEST(TerminalTextTest, PrintableUtf8IsUntouched) {
  const std::string s = "caf\xc3\xa9 \xc2\xa0 \xe2\x9c\x93 tau=3.2";
  EXPECT_EQ(EscapeControl(s), s);
  EXPECT_EQ(EscapeControl("\xc2"), "\xc2");  // a cut sequence is not a C1 control
}

}  // namespace
}  // namespace tandem::cli
