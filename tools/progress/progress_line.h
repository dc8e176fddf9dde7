// The live progress line of `tandem run` and `tandem submit --wait` on a terminal: for a
// training job "how far, how good, how long" (step/total, percent, loss, tau, tok/s, elapsed,
// ETA, the bottleneck in a few words); for a job kind without a step total, items and rate
// and a note that there is no total. One line, fitted to a width: the least important
// fields go first, then the rest is cut.
// Thread-safety: pure functions (TerminalWidth reads the terminal's size).
#pragma once

#include <string>

#include "runtime/job/job_status.h"

namespace tandem::cli {

// The line for `job`, at most `width` terminal columns (width < 20 is treated as 20).
std::string FormatProgressLine(const JobStatus& job, int width);
// The bottleneck verdict in a few words: "producer-bound" (consumers wait on producers, e.g.
// the drafter on the target), "consumer-bound", "balanced", "checkpoint-bound" (checkpointing
// holds the training loop).
std::string ShortVerdict(const JobStatus& job);
// Terminal columns of `fd` (ioctl), else $COLUMNS, else 80.
int TerminalWidth(int fd);
// Columns `s` takes on a terminal (UTF-8 code points; tandem's lines hold no wide glyphs).
int DisplayWidth(const std::string& s);
// "42s", "3:07", "1:02:03".
std::string FormatDuration(double seconds);

}  // namespace tandem::cli
