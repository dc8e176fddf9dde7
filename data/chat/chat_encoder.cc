#include "data/chat/chat_encoder.h"

#include <fstream>

#include "runtime/core/json_parse.h"

namespace tandem::chat_data {
namespace {

using nlohmann::ordered_json;

// A special token in tokenizer_config.json: a string or {"content": "..."}.
std::optional<std::string> TokenText(const ordered_json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    return v["content"].get<std::string>();
  }
  return std::nullopt;
}

bool HasReasoning(const ordered_json& m) {
  if (m.value("role", "") != "assistant") return false;
  if (m.contains("reasoning_content") && m["reasoning_content"].is_string() &&
      !m["reasoning_content"].get<std::string>().empty()) {
    return true;
  }
  return m.contains("content") && m["content"].is_string() &&
         m["content"].get<std::string>().find("</think>") != std::string::npos;
}

}  // namespace

Result<ChatEncoder> ChatEncoder::Load(const std::string& dir, const ChatEncodeOptions& options) {
  ChatEncoder e;
  e.options_ = options;
  ASSIGN_OR_RETURN(tokenizer::Tokenizer tok, tokenizer::Tokenizer::Load(dir + "/tokenizer.json"));
  e.tok_ = std::make_shared<const tokenizer::Tokenizer>(std::move(tok));
  const std::string cfg_path = dir + "/tokenizer_config.json";
  std::ifstream in(cfg_path, std::ios::binary);
  if (!in) return NotFoundError("{}: cannot open (the chat template lives there)", cfg_path);
  const std::string cfg_text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSIGN_OR_RETURN(ordered_json cfg, ParseOrderedJson(cfg_text, cfg_path));
  if (!cfg.is_object()) return InvalidArgumentError("{}: not a JSON object", cfg_path);
  if (!cfg.contains("chat_template") || !cfg["chat_template"].is_string()) {
    return InvalidArgumentError("{}: no \"chat_template\" string (named templates are not supported)",
                                cfg_path);
  }
  auto t = chat_template::ChatTemplate::Parse(cfg["chat_template"].get<std::string>());
  if (!t.ok()) return t.status().WithContext(cfg_path);
  e.template_ = std::move(t).value();
  e.special_ = ordered_json::object();
  for (const char* k : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
    if (auto s = cfg.contains(k) ? TokenText(cfg[k]) : std::nullopt) e.special_[k] = *s;
  }
  auto eos = cfg.contains("eos_token") ? TokenText(cfg["eos_token"]) : std::nullopt;
  if (!eos) return InvalidArgumentError("{}: no eos_token to end assistant turns", cfg_path);
  const int64_t id = e.tok_->TokenId(*eos);
  if (id < 0) {
    return InvalidArgumentError("{}: eos_token '{}' is not a token of tokenizer.json", cfg_path, *eos);
  }
  e.eot_ = static_cast<uint32_t>(id);
  e.think_open_ = e.tok_->TokenId("<think>");
  e.think_close_ = e.tok_->TokenId("</think>");
  return e;
}

Result<std::string> ChatEncoder::Render(const Conversation& c, size_t count,
                                        bool generation_prompt) const {
  return RenderMessages(ordered_json(std::vector<ordered_json>(c.messages.begin(),
                                                               c.messages.begin() + long(count))),
                        c, generation_prompt);
}

Result<std::string> ChatEncoder::RenderMessages(const ordered_json& messages,
                                                const Conversation& c,
                                                bool generation_prompt) const {
  ordered_json ctx = special_;
  ctx["messages"] = messages;
  ctx["tools"] = c.tools;
  ctx["add_generation_prompt"] = generation_prompt;
  if (options_.enable_thinking) ctx["enable_thinking"] = *options_.enable_thinking;
  return template_.Render(ctx);
}

// The first token of the assistant's turn: where the tokens of the generation prompt stop
// agreeing with the example's tokens. Comparing tokens, not characters, keeps a partial
// match inside a token (the "<" of "<think>" and "<|im_end|>", a "\n" of "\n\n") out.
// Text between added tokens is encoded independently, so only the prompt's text after the
// last added token inside the common text prefix needs encoding: the k-th added token of the
// prompt is the k-th added id of `ids` (checked; on any doubt the whole prompt is encoded).
size_t ChatEncoder::TurnStart(const std::string& prompt, const std::string& text,
                              const std::vector<uint32_t>& ids, Scratch& scratch) const {
  size_t common = 0;
  const size_t n = std::min(prompt.size(), text.size());
  while (common < n && prompt[common] == text[common]) ++common;
  const auto matches = tok_->MatchAdded(std::string_view(prompt).substr(0, common));
  size_t from = 0, j = 0;
  if (!matches.empty()) {
    size_t seen = 0;
    for (; j < ids.size() && seen < matches.size(); ++j) {
      if (tok_->IsAdded(ids[j]) && ids[j] == matches[seen].id) ++seen;
      else if (tok_->IsAdded(ids[j])) break;
    }
    if (seen == matches.size()) {
      from = matches.back().end;
    } else {
      j = 0;
    }
  }
  auto tail = tok_->Encode(std::string_view(prompt).substr(from), scratch.tok);
  size_t s = 0;
  while (tail.ok() && s < tail->size() && j + s < ids.size() && (*tail)[s] == ids[j + s]) ++s;
  return j + s;
}

size_t ChatEncoder::TurnEnd(const Conversation& c, size_t i, const std::string& text,
                            const std::vector<uint32_t>& ids, Scratch& scratch) const {
  if (i + 1 >= c.messages.size()) return ids.size();
  // A user message no conversation holds, so that its rendering is told apart.
  const ordered_json probe = {{"role", "user"}, {"content", "\x1f\x1e probe \x1e\x1f"}};
  ordered_json messages(std::vector<ordered_json>(c.messages.begin(),
                                                  c.messages.begin() + long(i + 1)));
  messages.push_back(probe);
  Result<std::string> p = RenderMessages(messages, c, /*generation_prompt=*/false);
  messages.push_back(probe);
  Result<std::string> q = p.ok() ? RenderMessages(messages, c, false) : p;
  if (!q.ok() || q->size() <= p->size() || q->compare(0, p->size(), *p) != 0) return ids.size();
  const std::string_view user = std::string_view(*q).substr(p->size());
  if (!std::string_view(*p).ends_with(user)) return ids.size();
  const size_t end = p->size() - user.size();  // characters of the render through turn i
  if (end > text.size() || text.compare(0, end, *p, 0, end) != 0) return ids.size();
  return TurnStart(p->substr(0, end), text, ids, scratch);
}

Status ChatEncoder::MaskTurn(const Conversation& c, size_t i, const std::string& text,
                             const std::vector<uint32_t>& ids, Scratch& scratch,
                             std::vector<uint8_t>* mask, bool* ended) const {
  ASSIGN_OR_RETURN(std::string prompt, Render(c, i, /*generation_prompt=*/true));
  const size_t s = TurnStart(prompt, text, ids, scratch);
  const size_t limit = std::max(s, TurnEnd(c, i, text, ids, scratch));
  size_t e = s;
  while (e < limit && ids[e] != eot_) ++e;
  *ended = e < limit;
  const size_t end = *ended ? e + 1 : limit;
  for (size_t k = s; k < end; ++k) (*mask)[k] = 1;
  if (options_.train_reasoning || think_open_ < 0 || think_close_ < 0) return Status::Ok();
  // Clear <think> .. </think> and the tokens made only of newlines after it.
  size_t a = s;
  while (a < end && ids[a] != uint32_t(think_open_)) ++a;
  if (a == end) return Status::Ok();
  size_t b = a;
  while (b < end && ids[b] != uint32_t(think_close_)) ++b;
  if (b == end) return Status::Ok();
  for (size_t k = a; k <= b; ++k) (*mask)[k] = 0;
  for (size_t k = b + 1; k < end; ++k) {
    const std::string* bytes = tok_->model().TokenBytes(ids[k]);
    if (!bytes || bytes->empty() || bytes->find_first_not_of('\n') != std::string::npos) break;
    (*mask)[k] = 0;
  }
  return Status::Ok();
}

void ChatEncoder::Finish(Example ex, EncodeOutcome* out) const {
  if (options_.max_tokens > 0 && int64_t(ex.ids.size()) > options_.max_tokens) {
    if (options_.drop_overlong) {
      ++out->events["too_long"];
      return;
    }
    ex.ids.resize(size_t(options_.max_tokens));
    ex.mask.resize(size_t(options_.max_tokens));
    ++out->events["truncated"];
  }
  bool any = false;
  for (uint8_t m : ex.mask) any = any || m;
  if (!any) {
    ++out->events["no_loss"];
    return;
  }
  out->examples.push_back(std::move(ex));
}

EncodeOutcome ChatEncoder::Encode(const Conversation& c, Scratch& scratch) const {
  EncodeOutcome out;
  std::vector<size_t> assistants;
  for (size_t k = 0; k < c.messages.size(); ++k) {
    if (c.messages[k].value("role", "") == "assistant") assistants.push_back(k);
  }
  bool split = options_.split_turns == SplitTurns::kOn;
  if (options_.split_turns == SplitTurns::kAuto) {
    for (size_t k = 0; k + 1 < assistants.size(); ++k) split = split || HasReasoning(c.messages[assistants[k]]);
  }
  if (options_.last_turn_only && !assistants.empty()) assistants.erase(assistants.begin(), assistants.end() - 1);
  auto fail = [&](const char* reason, const Status& st) {
    ++out.events[reason];
    if (out.error.empty()) out.error = st.message();
    out.examples.clear();
  };
  // One example per (rendered messages count, assistant turns masked in it).
  std::vector<std::pair<size_t, std::vector<size_t>>> plan;
  if (split) {
    for (size_t i : assistants) plan.push_back({i + 1, {i}});
  } else {
    plan.push_back({c.messages.size(), assistants});
  }
  for (const auto& [count, turns] : plan) {
    auto text = Render(c, count, /*generation_prompt=*/false);
    if (!text.ok()) {
      fail("template_error", text.status());
      return out;
    }
    Example ex;
    if (Status st = tok_->Encode(*text, scratch.tok, &ex.ids); !st.ok()) {
      fail("tokenize_error", st);
      return out;
    }
    ex.mask.assign(ex.ids.size(), 0);
    for (size_t i : turns) {
      bool ended = true;
      if (Status st = MaskTurn(c, i, *text, ex.ids, scratch, &ex.mask, &ended); !st.ok()) {
        fail("template_error", st);
        return out;
      }
      if (!ended) ++out.warnings["no_end_token"];
    }
    Finish(std::move(ex), &out);
  }
  return out;
}

Result<std::vector<uint32_t>> ChatEncoder::EncodePrompt(const Conversation& c,
                                                        Scratch& scratch) const {
  size_t count = c.messages.size();
  if (count > 0 && c.messages[count - 1].value("role", "") == "assistant") --count;
  bool asks = false;
  for (size_t k = 0; k < count; ++k) asks = asks || c.messages[k].value("role", "") != "assistant";
  if (!asks) return InvalidArgumentError("no message to answer (only assistant turns)");
  ASSIGN_OR_RETURN(std::string text, Render(c, count, /*generation_prompt=*/true));
  std::vector<uint32_t> ids;
  RETURN_IF_ERROR(tok_->Encode(text, scratch.tok, &ids));
  return ids;
}

}  // namespace tandem::chat_data
