#include "actors/dflash/checkpoint_state.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace tandem::dflash {
namespace {

Status WriteAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << text;
    f.flush();
    if (!f) return InternalError("cannot write {}", tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return InternalError("cannot rename {} to {}: {}", tmp, path, ec.message());
  return Status::Ok();
}

}  // namespace

Result<std::string> CheckpointDir(const ConfigValue& s) {
  const ConfigValue* ck = s.Find("checkpoint");
  if (ck == nullptr) return std::string();
  if (!ck->is_table())
    return InvalidArgumentError("{}: `checkpoint` must be a table ({{ dir = ..., every_steps = "
                                "... }})", s.location());
  return ck->GetString("dir", "");
}

Result<std::optional<ResumeState>> ReadLatestState(const std::string& dir) {
  if (dir.empty()) return std::optional<ResumeState>();
  std::ifstream latest(dir + "/latest");
  if (!latest) return std::optional<ResumeState>();
  std::string sub;
  std::getline(latest, sub);
  ResumeState st;
  st.path = dir + "/" + sub;
  std::ifstream f(st.path + "/tandem_state.json");
  if (!f) return DataLossError("{}/latest names {}, which has no tandem_state.json", dir, sub);
  nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
  if (j.is_discarded() || !j.contains("step") || !j.contains("positions"))
    return DataLossError("{}/tandem_state.json is not a tandem state file", st.path);
  st.step = j["step"].get<int64_t>();
  st.tokens = j.value("tokens", int64_t{0});
  for (const auto& [k, v] : j["positions"].items())
    st.positions[std::stoi(k)] = {v.at("epoch").get<int64_t>(), v.at("next_batch").get<int64_t>()};
  return std::optional<ResumeState>(std::move(st));
}

Status CommitState(const std::string& dir, const ResumeState& state) {
  nlohmann::json j;
  j["format"] = "tandem-dflash-job";
  j["step"] = state.step;
  j["tokens"] = state.tokens;
  j["positions"] = nlohmann::json::object();
  for (const auto& [r, p] : state.positions)
    j["positions"][std::to_string(r)] = {{"epoch", p.epoch}, {"next_batch", p.next_batch}};
  RETURN_IF_ERROR(WriteAtomically(state.path + "/tandem_state.json", j.dump(2)));
  return WriteAtomically(dir + "/latest",
                         std::filesystem::path(state.path).filename().string() + "\n");
}

}  // namespace tandem::dflash
