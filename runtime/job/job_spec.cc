#include "runtime/job/job_spec.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <cstdlib>

#include <unistd.h>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "runtime/actor/system.h"
#include "runtime/core/logging.h"
#include "runtime/job/job_spec_keys.h"
#include "runtime/job/toml_text_depth.h"

namespace tandem {
namespace {

std::string Where(const std::string& path, const toml::node& node) {
  const auto& src = node.source();
  if (src.begin.line == 0) return path;
  return fmt::format("{}:{}", path, src.begin.line);
}

// Refuses a table or array nested deeper than kMaxJobNesting, before ToConfig recurses into
// it. CheckTomlTextDepth already refused such text before parsing (toml++ recurses too); its
// count is exact for well-formed TOML, and this walk of the parsed table keeps ToConfig's
// bound independent of that. An explicit stack, no recursion; the error names the file, the
// line and the first parts of the key.
Status CheckNesting(const std::string& path, const toml::table& root) {
  struct Frame {
    const toml::node* node;
    int depth;      // root = 0
    size_t parent;  // index in `frames`; the root is its own parent
    std::string part;  // "name" or "[3]"
    bool index;
  };
  std::vector<Frame> frames = {{&root, 0, 0, "", false}};
  std::vector<size_t> todo = {0};
  while (!todo.empty()) {
    const size_t i = todo.back();
    todo.pop_back();
    const int depth = frames[i].depth;
    if (depth > kMaxJobNesting) {
      std::vector<const Frame*> parts;
      for (size_t j = i; j != 0; j = frames[j].parent) parts.push_back(&frames[j]);
      std::string key;
      for (auto it = parts.rbegin(); it != parts.rend() && key.size() < 200; ++it)
        key += (key.empty() || (*it)->index ? "" : ".") + (*it)->part;
      return InvalidArgumentError(
          "{}: {}...: tables and arrays nested deeper than {} levels; a job file needs a few",
          Where(path, *frames[i].node), key, kMaxJobNesting);
    }
    if (auto t = frames[i].node->as_table()) {
      for (auto&& [k, child] : *t) {
        frames.push_back({&child, depth + 1, i, std::string(k.str()), false});
        todo.push_back(frames.size() - 1);
      }
    } else if (auto a = frames[i].node->as_array()) {
      for (size_t n = 0; n < a->size(); ++n) {
        frames.push_back({a->get(n), depth + 1, i, fmt::format("[{}]", n), true});
        todo.push_back(frames.size() - 1);
      }
    }
  }
  return Status::Ok();
}

// Converts a TOML node to a ConfigValue, recording file:line on every value. Linear in the
// number of keys: a table's entries are collected and handed over at once (toml++ keys are
// distinct), never inserted one lookup at a time.
Result<ConfigValue> ToConfig(const std::string& path, const toml::node& node,
                             const std::string& key) {
  ConfigValue v;
  if (auto t = node.as_table()) {
    // toml++ orders keys by name; keep the file's order (actor groups start in it).
    std::vector<std::pair<std::string, const toml::node*>> children;
    children.reserve(t->size());
    for (auto&& [k, child] : *t) children.emplace_back(std::string(k.str()), &child);
    std::stable_sort(children.begin(), children.end(), [](const auto& a, const auto& b) {
      return a.second->source().begin < b.second->source().begin;
    });
    ConfigValue::Table entries;
    entries.reserve(children.size());
    for (auto& [k, child] : children) {
      ASSIGN_OR_RETURN(ConfigValue c, ToConfig(path, *child, key.empty() ? k : key + "." + k));
      entries.emplace_back(std::move(k), std::move(c));
    }
    v = ConfigValue::MakeTable(std::move(entries));
  } else if (auto a = node.as_array()) {
    ConfigValue::Array items;
    items.reserve(a->size());
    for (size_t i = 0; i < a->size(); ++i) {
      ASSIGN_OR_RETURN(ConfigValue c, ToConfig(path, *a->get(i), fmt::format("{}[{}]", key, i)));
      items.push_back(std::move(c));
    }
    v = ConfigValue(std::move(items));
  } else if (auto s = node.as_string()) {
    v = ConfigValue(s->get());
  } else if (auto i = node.as_integer()) {
    v = ConfigValue(static_cast<int64_t>(i->get()));
  } else if (auto d = node.as_floating_point()) {
    v = ConfigValue(d->get());
  } else if (auto b = node.as_boolean()) {
    v = ConfigValue(b->get());
  } else {
    return InvalidArgumentError("{}: {}: dates and times are not supported in job files",
                                Where(path, node), key);
  }
  v.set_location(Where(path, node));
  return v;
}

Status RangeError(const ConfigValue& section, const std::string& key, const std::string& what) {
  const ConfigValue* v = section.Find(key);
  return InvalidArgumentError("{}: {}: expected {}, got {}", v ? v->location() : "", key, what,
                              v ? v->ToString() : "nothing");
}

Status ParseChannels(const ConfigValue& root, JobSpec* job) {
  const ConfigValue* chans = root.Find("channels");
  if (chans == nullptr) return Status::Ok();
  for (const auto& [name, c] : chans->table()) {
    const KeyTable& keys = ChannelKeys();
    RETURN_IF_ERROR(keys.Check(c, "channels." + name));
    ChannelSpec spec;
    spec.name = name;
    spec.capacity = keys.GetInt(c, "capacity");
    spec.min_ready = keys.GetInt(c, "min_ready");
    spec.route = keys.GetString(c, "route");
    if (spec.min_ready > spec.capacity)
      return RangeError(c, "min_ready", fmt::format("an integer in [1, capacity={}]", spec.capacity));
    job->channels.push_back(std::move(spec));
  }
  return Status::Ok();
}

// The ports of a group: `in` and `out` name declared channels.
Status CheckPorts(const std::string& name, const ConfigValue& a, const JobSpec& job) {
  for (const char* port : {"in", "out"}) {
    const ConfigValue* ch = a.Find(port);
    if (ch == nullptr) continue;
    Result<std::string> cname = ch->AsString();
    if (!cname.ok())
      return InvalidArgumentError("{}: actors.{}.{}: expected a channel name, got {}",
                                  ch->location(), name, port, ConfigKindName(ch->kind()));
    if (job.FindChannel(*cname) != nullptr) continue;
    std::vector<std::string> names;
    for (const auto& c : job.channels) names.push_back(c.name);
    std::string hint = DidYouMean(*cname, names);
    return InvalidArgumentError("{}: actors.{}.{}: no channel named '{}'{}", ch->location(), name,
                                port, *cname,
                                hint.empty() ? " (declare it as [channels." + *cname + "])"
                                             : fmt::format(" (did you mean '{}'?)", hint));
  }
  return Status::Ok();
}

// A channel with route = "replica" gives each reader replica capacity / readers of the room.
Status CheckRoutes(const ConfigValue& root, const JobSpec& job) {
  for (const ChannelSpec& c : job.channels) {
    if (c.route != "replica") continue;
    const int64_t readers = std::max(job.PortReplicas("in", c.name), 1);
    const ConfigValue& section = *root.Find("channels")->Find(c.name);
    auto where = [&](const char* key) {
      const ConfigValue* v = section.Find(key);
      return v != nullptr ? v->location() : section.location();
    };
    if (c.capacity < readers)
      return InvalidArgumentError(
          "{}: channels.{}.capacity: {} is too small for route \"replica\" with {} reader "
          "replicas (each gets its own share of the room); expected at least {}",
          where("capacity"), c.name, c.capacity, readers, readers);
    if (c.min_ready > c.capacity / readers)
      return InvalidArgumentError(
          "{}: channels.{}.min_ready: {} exceeds capacity / readers = {} / {} = {}; with route "
          "\"replica\" a reader waits for min_ready items of its own share, so it would wait "
          "forever. Raise capacity or lower min_ready",
          where("min_ready"), c.name, c.min_ready, c.capacity, readers, c.capacity / readers);
  }
  return Status::Ok();
}

Status ParseActors(const ConfigValue& root, JobSpec* job) {
  const ConfigValue* actors = root.Find("actors");
  if (actors == nullptr || actors->table().empty())
    return InvalidArgumentError("{}: the job has no [actors.NAME] sections", job->path);
  const KeyTable& keys = ActorGroupKeys();
  for (const auto& [name, a] : actors->table()) {
    // The group keys here; the class's own keys once its plugin is loaded (job_spec_keys.h).
    RETURN_IF_ERROR(keys.Check(a, "actors." + name, nullptr, /*unknown_ok=*/true));
    ActorGroupSpec g;
    g.name = name;
    g.where = a.location();
    g.settings = keys.WithDefaults(a);
    g.class_name = keys.GetString(a, "class");
    g.replicas = keys.GetInt(a, "replicas");
    g.gpus = keys.GetNumber(a, "gpus");
    g.cpus = keys.GetNumber(a, "cpus");
    g.max_restarts = keys.GetInt(a, "max_restarts");
    if (g.gpus > 1 && g.gpus != static_cast<double>(static_cast<int64_t>(g.gpus)))
      return RangeError(a, "gpus", "a share in [0, 1] or a whole number of GPUs");
    RETURN_IF_ERROR(CheckPorts(name, a, *job));
    job->actors.push_back(std::move(g));
  }
  return Status::Ok();
}

Result<JobSpec> FromToml(const toml::table& tbl, const std::string& path) {
  RETURN_IF_ERROR(CheckNesting(path, tbl));
  ASSIGN_OR_RETURN(ConfigValue root, ToConfig(path, tbl, ""));
  RETURN_IF_ERROR(TopLevelKeys().Check(root, ""));
  JobSpec job;
  job.path = path;
  const ConfigValue empty = ConfigValue::MakeTable();
  const ConfigValue* j = root.Find("job");
  const ConfigValue& js = j != nullptr ? *j : empty;
  RETURN_IF_ERROR(JobSectionKeys().Check(js, "job"));
  job.name = JobSectionKeys().GetString(js, "name");
  job.seed = JobSectionKeys().GetInt(js, "seed");
  job.node_timeout_s = JobSectionKeys().GetNumber(js, "node_timeout_s");
  if (const ConfigValue* p = js.Find("plugins")) {
    std::filesystem::path base = std::filesystem::path(path).parent_path();
    for (const auto& item : p->array()) {
      std::string s = *item.AsString();
      std::filesystem::path pp(s);
      job.plugins.push_back(pp.is_absolute() || base.empty() ? s : (base / pp).string());
    }
  }
  const ConfigValue* st = root.Find("store");
  const ConfigValue& ss = st != nullptr ? *st : empty;
  RETURN_IF_ERROR(StoreKeys().Check(ss, "store"));
  job.store_bytes = StoreKeys().GetInt(ss, "capacity_mb") << 20;
  const ConfigValue* pr = root.Find("profile");
  const ConfigValue& ps = pr != nullptr ? *pr : empty;
  RETURN_IF_ERROR(ProfileKeys().Check(ps, "profile"));
  job.profile_interval_s = ProfileKeys().GetNumber(ps, "interval_s");
  RETURN_IF_ERROR(ParseChannels(root, &job));
  RETURN_IF_ERROR(ParseActors(root, &job));
  RETURN_IF_ERROR(CheckRoutes(root, job));
  return job;
}

Status TooLarge(const std::string& path, int64_t max_bytes) {
  return InvalidArgumentError("{}: the job file is larger than the limit of {} bytes; a job file "
                              "is a short TOML description (raise the limit with "
                              "TANDEM_MAX_JOB_FILE_BYTES if you must)", path, max_bytes);
}

}  // namespace

Status CheckStoreFitsMachine(const JobSpec& job, int64_t machine_bytes) {
  if (machine_bytes <= 0) {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page <= 0) return Status::Ok();  // unknown: the allocation will tell
    machine_bytes = static_cast<int64_t>(pages) * page;
  }
  if (job.store_bytes <= machine_bytes) return Status::Ok();
  return InvalidArgumentError("{}: store.capacity_mb: {} MiB of pinned memory is more than this "
                              "machine has ({} MiB); lower it", job.path, job.store_bytes >> 20,
                              machine_bytes >> 20);
}

const ChannelSpec* JobSpec::FindChannel(const std::string& n) const {
  for (const auto& c : channels)
    if (c.name == n) return &c;
  return nullptr;
}

int JobSpec::PortReplicas(const std::string& port, const std::string& channel) const {
  int n = 0;
  for (const auto& g : actors)
    if (auto v = g.settings.GetString(port, ""); v.ok() && *v == channel)
      n += static_cast<int>(g.replicas);
  return n;
}

int JobSpec::PortIndex(const std::string& port, const std::string& channel,
                       const std::string& group, int replica) const {
  int base = 0;
  for (const auto& g : actors) {
    auto v = g.settings.GetString(port, "");
    if (!v.ok() || *v != channel) continue;
    if (g.name == group) return replica >= 0 && replica < g.replicas ? base + replica : -1;
    base += static_cast<int>(g.replicas);
  }
  return -1;
}

const ActorGroupSpec* JobSpec::FindGroup(const std::string& n) const {
  for (const auto& g : actors)
    if (g.name == n) return &g;
  return nullptr;
}

int64_t MaxJobFileBytes() {
  const char* env = std::getenv("TANDEM_MAX_JOB_FILE_BYTES");
  if (env == nullptr || *env == '\0') return kDefaultMaxJobFileBytes;
  char* end = nullptr;
  const long long v = std::strtoll(env, &end, 10);
  if (*end != '\0' || v <= 0) {
    TLOG_WARN("TANDEM_MAX_JOB_FILE_BYTES='{}' is not a positive integer; using {}", env,
              kDefaultMaxJobFileBytes);
    return kDefaultMaxJobFileBytes;
  }
  return v;
}

Result<JobSpec> ParseJobText(const std::string& text, const std::string& path, int64_t max_bytes) {
  if (static_cast<int64_t>(text.size()) > max_bytes) return TooLarge(path, max_bytes);
  // Before toml++ sees it: its parser recurses once per level.
  RETURN_IF_ERROR(CheckTomlTextDepth(text, path, kMaxJobNesting));
  try {
    toml::table tbl = toml::parse(text, path);
    return FromToml(tbl, path);
  } catch (const toml::parse_error& e) {
    return InvalidArgumentError("{}:{}:{}: malformed TOML: {}", path, e.source().begin.line,
                                e.source().begin.column, e.description());
  }
}

Result<std::string> ReadJobFile(const std::string& path, int64_t max_bytes) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status))
    return NotFoundError("job file '{}' cannot be opened: it does not exist", path);
  if (std::filesystem::is_directory(status))
    return InvalidArgumentError("job file '{}' is a directory; give the path of a .toml file",
                                path);
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("job file '{}' cannot be opened (permissions?)", path);
  // Read at most max_bytes + 1: enough to tell "too large" without reading /dev/zero forever.
  std::string text;
  std::vector<char> buf(64 << 10);
  while (in && static_cast<int64_t>(text.size()) <= max_bytes) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    text.append(buf.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) return InvalidArgumentError("job file '{}' cannot be read", path);
  if (static_cast<int64_t>(text.size()) > max_bytes) return TooLarge(path, max_bytes);
  return text;
}

Result<JobSpec> LoadJobFile(const std::string& path, int64_t max_bytes) {
  ASSIGN_OR_RETURN(std::string text, ReadJobFile(path, max_bytes));
  return ParseJobText(text, path, max_bytes);
}

}  // namespace tandem
