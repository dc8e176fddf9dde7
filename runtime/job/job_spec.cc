#include "runtime/job/job_spec.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

namespace tandem {
namespace {

std::string Where(const std::string& path, const toml::node& node) {
  const auto& src = node.source();
  if (src.begin.line == 0) return path;
  return fmt::format("{}:{}", path, src.begin.line);
}

// Converts a TOML node to a ConfigValue, recording file:line on every value.
Result<ConfigValue> ToConfig(const std::string& path, const toml::node& node,
                             const std::string& key) {
  ConfigValue v;
  if (auto t = node.as_table()) {
    v = ConfigValue::MakeTable();
    // toml++ orders keys by name; keep the file's order (actor groups start in it).
    std::vector<std::pair<std::string, const toml::node*>> children;
    for (auto&& [k, child] : *t) children.emplace_back(std::string(k.str()), &child);
    std::stable_sort(children.begin(), children.end(), [](const auto& a, const auto& b) {
      return a.second->source().begin < b.second->source().begin;
    });
    for (const auto& [k, child] : children) {
      std::string sub = key.empty() ? k : key + "." + k;
      ASSIGN_OR_RETURN(ConfigValue c, ToConfig(path, *child, sub));
      v.Set(k, std::move(c));
    }
  } else if (auto a = node.as_array()) {
    ConfigValue::Array items;
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

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

Status CheckKeys(const ConfigValue& table, const std::string& section,
                 const std::vector<std::string>& known) {
  // `store = "x"` where [store] belongs (found by fuzz/job_spec_fuzz: table() CHECK-failed).
  if (!table.is_table()) {
    return InvalidArgumentError("{}: [{}] must be a table, got {}", table.location(), section,
                                table.ToString());
  }
  for (const auto& [k, v] : table.table()) {
    if (std::find(known.begin(), known.end(), k) != known.end()) continue;
    std::string hint = DidYouMean(k, known);
    return InvalidArgumentError("{}: unknown key '{}' in [{}]{}", v.location(), k, section,
                                hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint));
  }
  return Status::Ok();
}

Status RangeError(const ConfigValue& section, const std::string& key, const std::string& what) {
  const ConfigValue* v = section.Find(key);
  return InvalidArgumentError("{}: {}: expected {}, got {}", v ? v->location() : "", key, what,
                              v ? v->ToString() : "nothing");
}

Status ParseChannels(const std::string& path, const ConfigValue& root, JobSpec* job) {
  const ConfigValue* chans = root.Find("channels");
  if (chans == nullptr) return Status::Ok();
  if (!chans->is_table())
    return InvalidArgumentError("{}: 'channels' must be a table of [channels.NAME]",
                                chans->location());
  for (const auto& [name, c] : chans->table()) {
    if (!c.is_table())
      return InvalidArgumentError("{}: channels.{} must be a table", c.location(), name);
    RETURN_IF_ERROR(CheckKeys(c, "channels." + name, {"capacity", "min_ready"}));
    ChannelSpec spec;
    spec.name = name;
    ASSIGN_OR_RETURN(spec.capacity, c.GetInt("capacity", spec.capacity));
    ASSIGN_OR_RETURN(spec.min_ready, c.GetInt("min_ready", spec.min_ready));
    if (spec.capacity < 1) return RangeError(c, "capacity", "an integer >= 1");
    if (spec.min_ready < 1 || spec.min_ready > spec.capacity)
      return RangeError(c, "min_ready", fmt::format("an integer in [1, capacity={}]", spec.capacity));
    job->channels.push_back(std::move(spec));
  }
  return Status::Ok();
}

Status ParseActors(const ConfigValue& root, JobSpec* job) {
  const ConfigValue* actors = root.Find("actors");
  if (actors == nullptr || !actors->is_table() || actors->table().empty())
    return InvalidArgumentError("{}: the job has no [actors.NAME] sections", job->path);
  for (const auto& [name, a] : actors->table()) {
    if (!a.is_table())
      return InvalidArgumentError("{}: actors.{} must be a table", a.location(), name);
    ActorGroupSpec g;
    g.name = name;
    g.where = a.location();
    g.settings = a;
    auto cls = a.RequireString("class");
    if (!cls.ok()) return cls.status().WithContext(fmt::format("{}: actors.{}", a.location(), name));
    g.class_name = *cls;
    ASSIGN_OR_RETURN(g.replicas, a.GetInt("replicas", 1));
    ASSIGN_OR_RETURN(g.gpus, a.GetDouble("gpus", 0.0));
    ASSIGN_OR_RETURN(g.cpus, a.GetInt("cpus", 1));
    ASSIGN_OR_RETURN(g.max_restarts, a.GetInt("max_restarts", 0));
    ASSIGN_OR_RETURN(g.restart_backoff_s, a.GetDouble("restart_backoff_s", 0.1));
    if (g.replicas < 1) return RangeError(a, "replicas", "an integer >= 1");
    if (g.gpus < 0 || (g.gpus > 1 && g.gpus != static_cast<int64_t>(g.gpus)))
      return RangeError(a, "gpus", "a share in [0, 1] or a whole number of GPUs");
    if (g.cpus < 0) return RangeError(a, "cpus", "an integer >= 0");
    if (g.max_restarts < 0) return RangeError(a, "max_restarts", "an integer >= 0");
    for (const char* port : {"in", "out"}) {
      const ConfigValue* ch = a.Find(port);
      if (ch == nullptr) continue;
      ASSIGN_OR_RETURN(std::string cname, ch->AsString());
      if (job->FindChannel(cname) == nullptr) {
        std::vector<std::string> names;
        for (const auto& c : job->channels) names.push_back(c.name);
        std::string hint = DidYouMean(cname, names);
        return InvalidArgumentError("{}: actors.{}.{}: no channel named '{}'{}", ch->location(),
                                    name, port, cname,
                                    hint.empty() ? " (declare it as [channels." + cname + "])"
                                                 : fmt::format(" (did you mean '{}'?)", hint));
      }
    }
    job->actors.push_back(std::move(g));
  }
  return Status::Ok();
}

Result<JobSpec> FromToml(const toml::table& tbl, const std::string& path) {
  ASSIGN_OR_RETURN(ConfigValue root, ToConfig(path, tbl, ""));
  RETURN_IF_ERROR(CheckKeys(root, "top level", {"job", "channels", "actors", "store", "profile"}));
  JobSpec job;
  job.path = path;
  if (const ConfigValue* j = root.Find("job")) {
    RETURN_IF_ERROR(CheckKeys(*j, "job", {"name", "seed", "plugins"}));
    ASSIGN_OR_RETURN(job.name, j->GetString("name", job.name));
    ASSIGN_OR_RETURN(job.seed, j->GetInt("seed", 0));
    if (const ConfigValue* p = j->Find("plugins")) {
      if (!p->is_array()) return RangeError(*j, "plugins", "an array of paths");
      std::filesystem::path base = std::filesystem::path(path).parent_path();
      for (const auto& item : p->array()) {
        ASSIGN_OR_RETURN(std::string s, item.AsString());
        std::filesystem::path pp(s);
        job.plugins.push_back(pp.is_absolute() || base.empty() ? s : (base / pp).string());
      }
    }
  }
  if (const ConfigValue* s = root.Find("store")) {
    RETURN_IF_ERROR(CheckKeys(*s, "store", {"capacity_mb"}));
    ASSIGN_OR_RETURN(int64_t mb, s->GetInt("capacity_mb", job.store_bytes >> 20));
    if (mb < 1) return RangeError(*s, "capacity_mb", "an integer >= 1");
    job.store_bytes = mb << 20;
  }
  if (const ConfigValue* p = root.Find("profile")) {
    RETURN_IF_ERROR(CheckKeys(*p, "profile", {"interval_s"}));
    ASSIGN_OR_RETURN(job.profile_interval_s, p->GetDouble("interval_s", 0));
    if (job.profile_interval_s < 0) return RangeError(*p, "interval_s", "a number >= 0");
  }
  RETURN_IF_ERROR(ParseChannels(path, root, &job));
  RETURN_IF_ERROR(ParseActors(root, &job));
  return job;
}

}  // namespace

const ChannelSpec* JobSpec::FindChannel(const std::string& n) const {
  for (const auto& c : channels)
    if (c.name == n) return &c;
  return nullptr;
}

std::string DidYouMean(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = std::max<size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    size_t d = EditDistance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

Result<JobSpec> ParseJobText(const std::string& text, const std::string& path) {
  try {
    toml::table tbl = toml::parse(text, path);
    return FromToml(tbl, path);
  } catch (const toml::parse_error& e) {
    return InvalidArgumentError("{}:{}:{}: malformed TOML: {}", path, e.source().begin.line,
                                e.source().begin.column, e.description());
  }
}

Result<JobSpec> LoadJobFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFoundError("job file '{}' cannot be opened", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseJobText(ss.str(), path);
}

}  // namespace tandem
