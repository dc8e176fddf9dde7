// Plugin loading: a shared library whose static initialisers register actor classes
// (TANDEM_REGISTER_ACTOR) is opened with dlopen, so a job can use classes the `tandem`
// binary was not built with (`plugins = ["libmy_actor.so"]`).
//
// The plugin resolves tandem's symbols (the registry, Actor, Status, logging) from the host
// process, so the host executable must export them (CMake: ENABLE_EXPORTS ON) and the plugin
// must not link its own copy of the tandem libraries. Plugins stay loaded for the life of the
// process.
//
// Thread-safety: safe from any thread; loads are serialised.
#pragma once

#include <string>
#include <vector>

#include "runtime/actor/registry.h"
#include "runtime/core/status.h"

namespace tandem {

// Opens `path` (RTLD_NOW: every symbol is resolved at once) and returns the names of the
// actor classes it registered in ActorRegistry::Global(). Errors: NotFound for a missing file;
// InvalidArgument when dlopen fails (e.g. "undefined symbol: ..."), when a class name was
// already taken, or when the library registered no class at all. Loading the same path
// twice returns the classes of the first load.
Result<std::vector<std::string>> LoadPlugin(const std::string& path);

}  // namespace tandem
