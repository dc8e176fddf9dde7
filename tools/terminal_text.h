// Text from outside (job names, log lines, metrics strings, error messages that quote a file)
// made safe to print on a terminal: control characters become visible escapes, so an ESC
// sequence in a job name cannot move the cursor, recolor, retitle or clear the user's
// terminal.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace tandem::cli {

// `s` with every control character escaped: \n, \t, \r, and \xHH for the other C0 bytes and
// DEL; the C1 controls U+0080..U+009F (UTF-8 C2 80..C2 9F, CSI among them) as \u00HH. For one
// line of a table.
std::string EscapeControl(std::string_view s);
// The same, but keeps newlines and tabs: for multi-line text (log lines, error messages).
std::string EscapeControlKeepLines(std::string_view s);

}  // namespace tandem::cli
