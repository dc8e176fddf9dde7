// What every node of a cluster must agree on before the head places anything: the job file
// (by hash) and the tandem build (by version string).
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace tandem::cluster {

// The job file's hash: XXH3-128 of its exact text, as 32 lowercase hex digits. Nodes must
// read byte-identical job files (the same path on a shared filesystem, or the same copy).
std::string JobHash(std::string_view job_text);

// This build's version: the project version, plus `git describe` when the source tree was a
// git checkout at configure time ("0.1.0 (v0.1.0-12-gabc1234-dirty)").
std::string TandemVersion();

// This machine's host name (gethostname), or "unknown-host".
std::string HostName();

}  // namespace tandem::cluster
