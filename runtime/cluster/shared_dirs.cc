#include "runtime/cluster/shared_dirs.h"

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <fmt/format.h>

#include "runtime/job/job_spec_keys.h"

namespace tandem::cluster {
namespace {

namespace fs = std::filesystem;

// The node that writes directory key "actors.GROUP.…": the one running GROUP's replica 0
// (node 0 for a key that names no group, or a group placed nowhere).
int WriterNode(const std::string& key, const ClusterPlacement& placement) {
  const std::string prefix = "actors.";
  if (key.rfind(prefix, 0) != 0) return 0;
  const size_t end = key.find('.', prefix.size());
  const int node = placement.NodeOf(key.substr(prefix.size(), end - prefix.size()), 0);
  return node >= 0 ? node : 0;
}

std::string Nonce() {
  std::random_device rd;
  return fmt::format("{:08x}{:08x}{:08x}{:08x}", rd(), rd(), rd(), rd());
}

Status WriteNonce(const std::string& dir, const std::string& file, const std::string& nonce) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return InvalidArgumentError("cannot create {}: {}", dir, ec.message());
  std::ofstream f(file, std::ios::trunc);
  f << nonce;
  f.close();
  if (!f) return InvalidArgumentError("cannot write {}", file);
  return Status::Ok();
}

std::string ReadAll(const std::string& file) {
  std::ifstream f(file);
  if (!f) return {};
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

Status CheckSharedDirs(ClusterNode& node, const JobSpec& job, const ClusterPlacement& placement,
                       Duration timeout) {
  std::vector<std::string> written;  // check files this node wrote, removed at the end
  Status verdict;
  for (const ExclusiveDir& d : ExclusiveDirs(job)) {
    const std::string file = (fs::path(d.path) / kSharedDirCheckFile).string();
    const std::string kv = "shared_dir/" + d.key;
    const int writer = WriterNode(d.key, placement);
    if (writer == node.rank()) {
      const std::string nonce = Nonce();
      RETURN_IF_ERROR(WriteNonce(d.path, file, nonce).WithContext(fmt::format(
          "node {}: the directory of {}", node.rank(), d.key)));
      written.push_back(file);
      RETURN_IF_ERROR(node.KvPut(kv, nonce));
      continue;
    }
    ASSIGN_OR_RETURN(std::string expected, node.KvGet(kv, timeout));
    const std::string seen = ReadAll(file);
    if (seen != expected) {
      verdict = InvalidArgumentError(
          "node {} does not see the directory node {} writes for {} ({}): {}; every node must "
          "see the same directory at that path (a shared filesystem), or the nodes' checkpoints "
          "and resumes would silently split",
          node.rank(), writer, d.key, d.path,
          seen.empty() ? fmt::format("{} is missing here", file)
                       : fmt::format("{} holds another node's check", file));
      break;
    }
  }
  // The writers keep their files until every node has looked (or one failed: then the
  // cluster fails and the barrier returns its failure).
  Status met = verdict.ok() ? node.Barrier("shared_dirs", node.nodes(), timeout) : verdict;
  for (const std::string& f : written) {
    std::error_code ec;
    fs::remove(f, ec);
  }
  return met;
}

}  // namespace tandem::cluster
