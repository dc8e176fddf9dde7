#include "runtime/job/job_spec_keys.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/actor/registry.h"
#include "runtime/actor/system.h"
#include "runtime/core/logging.h"

namespace tandem {
namespace {

template <typename Build>
const KeyTable& Once(Build build) {
  static const KeyTable* table = new KeyTable(build());
  return *table;
}

}  // namespace

const KeyTable& TopLevelKeys() {
  return Once([] {
    KeyTable t("top level", "the sections a job file may have");
    t.Table("job", "the job's name, seed and plugins");
    t.Table("store", "the pinned object store");
    t.Table("profile", "profile reports");
    t.Table("channels", "[channels.NAME]: bounded queues between actor groups");
    t.Table("actors", "[actors.NAME]: actor groups");
    return t;
  });
}

const KeyTable& JobSectionKeys() {
  return Once([] {
    KeyTable t("[job]");
    t.String("name", "shown by `tandem status`, logs and metrics; `tandem stop NAME` finds it")
        .Default("job");
    t.Int("seed", "base seed handed to actors (data order, random weights, drafter init)")
        .Default(0).Min(0);
    t.StringArray("plugins", "shared libraries with custom actor classes, loaded before the job "
                  "starts; relative paths are relative to the job file")
        .Default(ConfigValue::Array{});
    t.Number("node_timeout_s", "a job on several nodes (docs/scaling.md): a node not heard from "
             "this long (it died or hangs) stops every node, naming it")
        .Default(10.0).Range(0.5, 3600.0);
    return t;
  });
}

const KeyTable& StoreKeys() {
  return Once([] {
    KeyTable t("[store]", "the pinned object store");
    t.Int("capacity_mb", "arena size in MiB; when it is full, producers wait (backpressure)")
        .Default(256).Range(1, 1 << 24);  // 16 TiB: far below where `<< 20` overflows
    return t;
  });
}

const KeyTable& ProfileKeys() {
  return Once([] {
    KeyTable t("[profile]");
    t.Number("interval_s", "seconds between profile reports in the log; 0: "
             "$TANDEM_PROFILE_INTERVAL, else 60 s (the environment overrides the file)")
        .Default(0.0).Range(0, 86400);
    return t;
  });
}

const KeyTable& ChannelKeys() {
  return Once([] {
    KeyTable t("[channels.NAME]", "a bounded queue; groups write it with `out = \"NAME\"` and "
               "read it with `in = \"NAME\"`");
    t.Int("capacity", "items held at most; a full channel blocks writers")
        .Default(16).Range(1, 1 << 20);
    t.Int("min_ready", "readers wait until this many items are queued (or the channel is "
          "closed); at most capacity").Default(1).Min(1);
    t.String("route", "which reader gets which item: \"any\" (whichever asks first) or "
             "\"replica\" (writer replica p's s-th item goes to reader (s * writers + p) % "
             "readers, and each reader takes its items in that order: reproducible whatever "
             "the timing; each reader gets capacity / readers of the room, so capacity >= "
             "readers and min_ready <= capacity / readers)")
        .Default("any").OneOf({"any", "replica"});
    return t;
  });
}

SectionContext JobSectionContext(const JobSpec& job, const std::string& group) {
  SectionContext ctx;
  ctx.group = group;
  ctx.job_seed = job.seed;
  for (const ActorGroupSpec& g : job.actors)
    ctx.groups.push_back({g.name, g.class_name, g.replicas, &g.settings});
  return ctx;
}

Status CheckActorSections(const JobSpec& job, std::vector<std::string>* notes) {
  std::vector<std::string> problems;
  for (const ActorGroupSpec& g : job.actors) {
    Result<ActorClass> cls = ActorRegistry::Global().Find(g.class_name);
    if (!cls.ok()) continue;
    const std::string prefix = "actors." + g.name;
    if (cls->keys == nullptr) {
      std::string note = fmt::format("{}: {}: class '{}' declares no keys, so its settings are "
                                     "not checked", g.where, prefix, g.class_name);
      TLOG_WARN("{}", note);
      if (notes != nullptr) notes->push_back(std::move(note));
      continue;
    }
    Status st = cls->keys->Check(g.settings, prefix, &ActorGroupKeys());
    if (st.ok()) st = cls->keys->CheckSection(g.settings, JobSectionContext(job, g.name));
    if (!st.ok()) {  // a drafter's check also reports its target's problems: keep one copy
      std::string_view msg = st.message();
      for (size_t start = 0; start < msg.size();) {
        size_t end = std::min(msg.find('\n', start), msg.size());
        std::string line(msg.substr(start, end - start));
        if (std::find(problems.begin(), problems.end(), line) == problems.end())
          problems.push_back(std::move(line));
        start = end + 1;
      }
    }
  }
  if (problems.empty()) return Status::Ok();
  return InvalidArgumentError("{}", fmt::join(problems, "\n"));
}

namespace {

void CollectExclusiveDirs(const KeyTable& table, const ConfigValue& section,
                          const std::string& prefix, std::vector<ExclusiveDir>* out) {
  for (const KeySpec& k : table.keys()) {
    const ConfigValue* v = section.Find(k.name);
    if (v == nullptr) continue;
    if (k.type == KeyType::kTable && k.sub != nullptr && v->is_table()) {
      CollectExclusiveDirs(*k.sub, *v, prefix + "." + k.name, out);
    } else if (k.exclusive_dir) {
      Result<std::string> path = v->AsString();
      if (!path.ok() || path->empty()) continue;
      bool seen = false;
      for (const ExclusiveDir& d : *out) seen = seen || d.path == *path;
      if (!seen) out->push_back({*path, prefix + "." + k.name});
    }
  }
}

}  // namespace

std::vector<ExclusiveDir> ExclusiveDirs(const JobSpec& job) {
  std::vector<ExclusiveDir> out;
  for (const ActorGroupSpec& g : job.actors) {
    Result<ActorClass> cls = ActorRegistry::Global().Find(g.class_name);
    if (!cls.ok() || cls->keys == nullptr) continue;
    CollectExclusiveDirs(*cls->keys, g.settings, "actors." + g.name, &out);
  }
  return out;
}

std::string KeyReferenceMarkdown() {
  std::string out;
  auto section = [&out](const std::string& heading, const KeyTable& t) {
    out += fmt::format("### {}\n\n", heading);
    if (!t.doc().empty()) out += t.doc() + ".\n\n";
    out += t.Markdown() + "\n";
  };
  section("Top level", TopLevelKeys());
  section("`[job]`", JobSectionKeys());
  section("`[store]`", StoreKeys());
  section("`[profile]`", ProfileKeys());
  section("`[channels.NAME]`", ChannelKeys());
  section("`[actors.NAME]`: keys of every group", ActorGroupKeys());
  for (const std::string& name : ActorRegistry::Global().Names()) {
    Result<ActorClass> cls = ActorRegistry::Global().Find(name);
    if (cls.ok() && cls->keys != nullptr) section(fmt::format("`{}`", name), *cls->keys);
  }
  return out;
}

}  // namespace tandem
