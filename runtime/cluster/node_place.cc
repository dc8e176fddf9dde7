// NodePlace: see node_place.h.
#include "runtime/cluster/node_place.h"

#include <cerrno>
#include <charconv>
#include <cstdlib>

#include <fmt/format.h>

namespace tandem::cluster {
namespace {

// A whole decimal integer (optional leading '-'), nothing else.
std::optional<long long> ParseInt(std::string_view s) {
  long long v = 0;
  if (s.empty()) return std::nullopt;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

Result<int> IntVar(const EnvLookup& env, std::string_view name, long long lo, long long hi,
                   std::string_view expect) {
  std::optional<std::string> v = env(name);
  if (!v) return NotFoundError("{} is not set", name);
  std::optional<long long> n = ParseInt(*v);
  if (!n) return InvalidArgumentError("{}='{}' is not an integer ({})", name, *v, expect);
  if (*n < lo || *n > hi)
    return InvalidArgumentError("{}={} is out of range ({})", name, *n, expect);
  return static_cast<int>(*n);
}

Result<int> PortVar(const EnvLookup& env, std::string_view name) {
  return IntVar(env, name, 1, 65535, "a TCP port in 1-65535");
}

// TANDEM_HEAD_PORT, else `fallback_var` (MASTER_PORT), else the default.
Result<int> HeadPort(const EnvLookup& env, std::string_view fallback_var) {
  for (std::string_view name : {std::string_view("TANDEM_HEAD_PORT"), fallback_var}) {
    if (env(name)) return PortVar(env, name);
  }
  return kDefaultHeadPort;
}

Status CheckRank(int rank, int size, std::string_view rank_name, std::string_view size_name) {
  if (rank >= size)
    return InvalidArgumentError("{}={} is not below {}={} (ranks count from 0)", rank_name, rank,
                                size_name, size);
  return Status::Ok();
}

Result<NodePlace> FromFlags(const NodeFlags& f) {
  if (!f.nodes || !f.node_rank)
    return InvalidArgumentError("--nodes, --node-rank and --head go together: give all of them "
                                "(--head may be left out with --nodes 1) or none");
  NodePlace p;
  p.source = "flags";
  p.nodes = *f.nodes;
  p.node_rank = *f.node_rank;
  if (p.nodes < 1 || p.nodes > 65536)
    return InvalidArgumentError("--nodes {} is out of range (1-65536)", p.nodes);
  if (p.node_rank < 0 || p.node_rank >= p.nodes)
    return InvalidArgumentError("--node-rank {} is out of range (0 to --nodes - 1 = {})",
                                p.node_rank, p.nodes - 1);
  if (f.head) {
    ASSIGN_OR_RETURN(auto hp, ParseHostPort(*f.head, "--head"));
    p.head_host = hp.first;
    p.head_port = hp.second;
  } else if (p.nodes > 1) {
    return InvalidArgumentError("--nodes {} needs --head HOST:PORT (the address of node rank 0)",
                                p.nodes);
  }
  return p;
}

Result<NodePlace> FromSlurm(const EnvLookup& env) {
  NodePlace p;
  p.source = "slurm";
  ASSIGN_OR_RETURN(p.nodes, IntVar(env, "SLURM_NTASKS", 1, 65536, "the number of tasks, >= 1"));
  ASSIGN_OR_RETURN(p.node_rank, IntVar(env, "SLURM_PROCID", 0, 65535, "a task rank, >= 0"));
  RETURN_IF_ERROR(CheckRank(p.node_rank, p.nodes, "SLURM_PROCID", "SLURM_NTASKS"));
  if (std::optional<std::string> list = env("SLURM_NODELIST"); list && !list->empty()) {
    ASSIGN_OR_RETURN(std::vector<std::string> hosts, ExpandSlurmNodeList(*list));
    p.head_host = hosts.front();
  } else if (std::optional<std::string> ip = env("SLURM_LAUNCH_NODE_IPADDR"); ip && !ip->empty()) {
    p.head_host = *ip;
  } else {
    return InvalidArgumentError("SLURM_PROCID is set but neither SLURM_NODELIST nor "
                                "SLURM_LAUNCH_NODE_IPADDR names the head node");
  }
  ASSIGN_OR_RETURN(p.head_port, HeadPort(env, "MASTER_PORT"));
  return p;
}

Result<NodePlace> FromTorchrun(const EnvLookup& env) {
  NodePlace p;
  p.source = "torchrun";
  ASSIGN_OR_RETURN(p.nodes, IntVar(env, "WORLD_SIZE", 1, 65536, "the number of nodes, >= 1"));
  ASSIGN_OR_RETURN(p.node_rank, IntVar(env, "RANK", 0, 65535, "a rank, >= 0"));
  RETURN_IF_ERROR(CheckRank(p.node_rank, p.nodes, "RANK", "WORLD_SIZE"));
  std::optional<std::string> addr = env("MASTER_ADDR");
  if (!addr || addr->empty()) {
    if (p.nodes > 1)
      return InvalidArgumentError("RANK and WORLD_SIZE are set but MASTER_ADDR (the head's "
                                  "host) is not");
    addr = "127.0.0.1";
  }
  p.head_host = *addr;
  ASSIGN_OR_RETURN(p.head_port, HeadPort(env, "MASTER_PORT"));
  return p;
}

// "01-03" or "7" inside brackets -> the names, keeping the width of the lower bound.
Status ExpandRange(std::string_view part, std::string_view what, std::vector<std::string>* out) {
  const size_t dash = part.find('-');
  std::string_view lo_s = part.substr(0, dash);
  std::string_view hi_s = dash == std::string_view::npos ? lo_s : part.substr(dash + 1);
  std::optional<long long> lo = ParseInt(lo_s), hi = ParseInt(hi_s);
  if (!lo || !hi || *lo < 0 || *hi < *lo || *hi - *lo > 100000)
    return InvalidArgumentError("{}: bad range '{}' in a host list", what, part);
  for (long long i = *lo; i <= *hi; ++i)
    out->push_back(fmt::format("{:0{}}", i, lo_s.size()));
  return Status::Ok();
}

// One host pattern ("rack[1-2]-n[01,03]") -> its names, bracket groups multiplied out.
Status ExpandHost(std::string_view pat, std::string_view what, std::vector<std::string>* out) {
  std::vector<std::string> names = {""};
  size_t i = 0;
  while (i < pat.size()) {
    if (pat[i] == ']') return InvalidArgumentError("{}: unbalanced ']' in '{}'", what, pat);
    if (pat[i] != '[') {
      for (std::string& n : names) n += pat[i];
      ++i;
      continue;
    }
    const size_t close = pat.find(']', i);
    if (close == std::string_view::npos)
      return InvalidArgumentError("{}: unbalanced '[' in '{}'", what, pat);
    std::vector<std::string> suffixes;
    std::string_view body = pat.substr(i + 1, close - i - 1);
    size_t start = 0;
    while (start <= body.size()) {
      size_t comma = body.find(',', start);
      if (comma == std::string_view::npos) comma = body.size();
      RETURN_IF_ERROR(ExpandRange(body.substr(start, comma - start), what, &suffixes));
      start = comma + 1;
    }
    std::vector<std::string> next;
    for (const std::string& n : names)
      for (const std::string& s : suffixes) next.push_back(n + s);
    names = std::move(next);
    i = close + 1;
  }
  for (std::string& n : names) out->push_back(std::move(n));
  return Status::Ok();
}

}  // namespace

std::string NodePlace::ToString() const {
  return fmt::format("node {} of {} ({}), head {}:{}", node_rank, nodes, source, head_host,
                     head_port);
}

EnvLookup ProcessEnv() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* v = std::getenv(std::string(name).c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

Result<std::vector<std::string>> ExpandSlurmNodeList(std::string_view list, std::string_view what) {
  std::vector<std::string> hosts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    if (i < list.size() && list[i] == '[') ++depth;
    if (i < list.size() && list[i] == ']') --depth;
    if (depth < 0) return InvalidArgumentError("{}: unbalanced ']' in '{}'", what, list);
    if (i == list.size() || (list[i] == ',' && depth == 0)) {
      std::string_view host = list.substr(start, i - start);
      if (host.empty()) return InvalidArgumentError("{}: empty host name in '{}'", what, list);
      RETURN_IF_ERROR(ExpandHost(host, what, &hosts));
      start = i + 1;
    }
  }
  if (depth != 0) return InvalidArgumentError("{}: unbalanced '[' in '{}'", what, list);
  return hosts;
}

Result<std::pair<std::string, int>> ParseHostPort(std::string_view text, std::string_view what) {
  std::string_view host, port;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return InvalidArgumentError("{} '{}': expected [ADDRESS]:PORT", what, text);
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos)
      return InvalidArgumentError("{} '{}': expected HOST:PORT", what, text);
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (host.empty()) return InvalidArgumentError("{} '{}': the host is empty", what, text);
  std::optional<long long> p = ParseInt(port);
  if (!p || *p < 1 || *p > 65535)
    return InvalidArgumentError("{} '{}': the port must be an integer in 1-65535", what, text);
  return std::make_pair(std::string(host), static_cast<int>(*p));
}

Result<NodePlace> ResolveNodePlace(const NodeFlags& flags, const EnvLookup& env) {
  if (flags.nodes || flags.node_rank || flags.head) return FromFlags(flags);
  if (env("SLURM_PROCID")) return FromSlurm(env);
  if (env("RANK") || env("WORLD_SIZE")) return FromTorchrun(env);
  NodePlace p;
  if (env("TANDEM_HEAD_PORT")) {
    ASSIGN_OR_RETURN(p.head_port, PortVar(env, "TANDEM_HEAD_PORT"));
  }
  return p;
}

}  // namespace tandem::cluster
