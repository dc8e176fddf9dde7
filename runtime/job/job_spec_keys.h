// The declared keys of a job file's own sections ([job], [store], [profile], [channels.NAME],
// the top level), the check of every actor group's section against its class's declared keys,
// and the key reference generated from all of them (docs/job-file.md, `tandem keys`).
//
// Thread-safety: the tables are built once and immutable; the functions are reentrant
// (they read the actor registry under its lock).
#pragma once

#include <string>
#include <vector>

#include "runtime/actor/config_keys.h"
#include "runtime/job/job_spec.h"

namespace tandem {

const KeyTable& TopLevelKeys();
const KeyTable& JobSectionKeys();
const KeyTable& StoreKeys();
const KeyTable& ProfileKeys();
const KeyTable& ChannelKeys();

// Checks each [actors.NAME] section against ActorGroupKeys() and its class's table (unknown,
// ill-typed and out-of-range keys, with file:line and the nearest valid key), then runs the
// class's whole-section check (ranges that need other groups, paths that must exist).
// REQUIRES: the job's plugins are loaded. A group whose class is not registered is skipped
// (the caller reports it); one whose class declares no keys adds a line to `notes` (may be
// null) and is logged. InvalidArgument listing the problems of every group.
Status CheckActorSections(const JobSpec& job, std::vector<std::string>* notes = nullptr);

// A directory of `job` that no other running job may use: the value of every key declared
// ExclusiveDir() in its actor groups' classes (e.g. the drafter's checkpoint.dir).
struct ExclusiveDir {
  std::string path;  // as written in the job file
  std::string key;   // "actors.drafter.checkpoint.dir", for messages
};
// Every exclusive directory of `job`, each path once (in file order). Groups of unregistered
// classes, or with values that are not strings, are skipped (Check reports them).
std::vector<ExclusiveDir> ExclusiveDirs(const JobSpec& job);

// The context a class's whole-section check gets for group `group` of `job`.
SectionContext JobSectionContext(const JobSpec& job, const std::string& group);

// Markdown: a table per job-level section, one for the keys of every actor group, then one per
// registered actor class that declares keys, sorted by class name.
std::string KeyReferenceMarkdown();

}  // namespace tandem
