#include "actors/dflash/drafter_settings.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "actors/dflash/drafter_device.h"
#include "actors/dflash/drafter_eval.h"
#include "actors/dflash/target_settings.h"
#include "kernels/dflash2/row_topk.h"
#include "kernels/dflash2/selector.h"
#include "models/dflash/dflash_checkpoint.h"
#include "models/dflash/dflash_drafter.h"
#include "models/dflash/dflash_params.h"
#include "models/dflash/dflash_warm_start.h"
#include "runtime/actor/system.h"
#include "runtime/core/clock.h"
#include "runtime/core/dir_lock.h"

namespace tandem::dflash {
namespace {

KeyTable CheckpointKeys() {
  KeyTable t("checkpoint");
  t.String("dir", "directory of step_N checkpoints and `latest`; must not be a file")
      .Default("")
      .ExclusiveDir();
  t.Int("every_steps", "checkpoint every N steps (0: only at the end)").Default(0).Min(0);
  t.Bool("async", "snapshot into host buffers and write on a background thread while "
         "training goes on (the snapshot's pinned memory: pinned_bytes, by default sized "
         "from the drafter; docs/checkpoints.md)")
      .Default(true);
  t.Int("keep_last", "keep the newest N complete step directories (never the one `latest` "
        "or DIR/best names), removing older ones after each checkpoint (0: keep all)")
      .Default(0).Min(0);
  return t;
}

// The settings only a DFlash2 drafter has.
constexpr const char* kDFlash2Keys[] = {
    "conv_kernel_size",        "conv_group_size",        "selector_rank",
    "selector_top_k",          "output_multiplier",      "final_logit_softcapping",
    "input_embedding_scale",   "selector_loss_weight"};

// The drafter setting that decides a config.json field, for messages.
std::string_view SettingOf(std::string_view config_key) {
  static const std::pair<std::string_view, std::string_view> kSettings[] = {
      {"num_hidden_layers", "num_layers"},
      {"num_attention_heads", "num_attention_heads"},
      {"num_key_value_heads", "num_key_value_heads"},
      {"head_dim", "head_dim"},
      {"layer_types", "layer_types"},
      {"sliding_window", "sliding_window"},
      {"is_causal", "is_causal"},
      {"block_size", "block_size"},
      {"architectures", "drafter_type"},
      {"dflash_config.conv_kernel_size", "conv_kernel_size"},
      {"dflash_config.conv_group_size", "conv_group_size"},
      {"dflash_config.selector_rank", "selector_rank"},
      {"dflash_config.selector_top_k", "selector_top_k"},
      {"dflash_config.output_multiplier", "output_multiplier"},
      {"dflash_config.final_logit_softcapping", "final_logit_softcapping"},
      {"dflash_config.input_embedding_scale", "input_embedding_scale"},
      {"dflash_config.mask_token_id", "mask_token_id"},
      {"dflash_config.target_layer_ids", "the target group's `layers`"}};
  for (const auto& [key, setting] : kSettings)
    if (key == config_key) return setting;
  return "";
}

// init_from: a drafter checkpoint (config.json + model.safetensors) of the drafter this
// group trains, for the same target.
Status CheckInitFrom(const std::string& at, const DrafterSettings& s) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(s.init_from, ec))
    return InvalidArgumentError("{}: '{}' is not a directory (a drafter checkpoint: "
                                "config.json + model.safetensors)", at, s.init_from);
  const std::string weights = (fs::path(s.init_from) / "model.safetensors").string();
  if (!fs::exists(weights, ec))
    return InvalidArgumentError("{}: '{}' does not exist", at, weights);
  Result<models::DFlashConfig> have = models::LoadDFlashConfig(s.init_from);
  if (!have.ok()) return have.status().WithContext(at);
  const std::optional<models::DFlashConfigMismatch> m =
      models::FindDFlashConfigMismatch(*have, DrafterConfig(s, s.target));
  if (!m) return Status::Ok();
  const std::string config = (fs::path(s.init_from) / "config.json").string();
  if (m->other_target)
    return InvalidArgumentError("{}: '{}' is a drafter for another target: key '{}' is {}, "
                                "the target group '{}' has {}", at, config, m->key, m->have,
                                s.target_group, m->want);
  const std::string_view setting = SettingOf(m->key);
  return InvalidArgumentError(
      "{}: '{}' key '{}' is {}, but the drafter this group trains has {}{}", at, config,
      m->key, m->have, m->want,
      setting.empty() ? std::string(" (the target's; tandem trains the drafter with it)")
                      : fmt::format("; set {} to match", setting));
}

// The key ranges of selector_top_k and selector_rank are the selector kernels' limits (the
// step and the eval's proposer run them): the candidates' top-k and the selector agree.
static_assert(kernels::dflash2::kSelectorMaxTopK == kernels::dflash2::kLogitsTopKMax);

// DFlash2's keys: only with drafter_type = "dflash2", and shapes the target allows.
Status CheckDFlash2Keys(const ConfigValue& section, const std::string& prefix,
                        const DrafterSettings& s) {
  auto at = [&](std::string_view key) { return KeyPath(section, prefix, key); };
  if (!s.dflash2) {
    for (const char* key : kDFlash2Keys)
      if (section.Find(key) != nullptr)
        return InvalidArgumentError("{}: a DFlash2 setting; it needs drafter_type = "
                                    "\"dflash2\"", at(key));
    return Status::Ok();
  }
  const models::DFlash2Extension& e = *s.dflash2;
  const int64_t hidden = s.target.config.hidden_size, vocab = s.target.config.vocab_size;
  if (hidden % e.conv_group_size != 0)
    return InvalidArgumentError("{}: {} does not divide the target's hidden_size {}",
                                at("conv_group_size"), e.conv_group_size, hidden);
  if (e.conv_kernel_size > s.block_size)
    return InvalidArgumentError("{}: {} taps exceed block_size = {}", at("conv_kernel_size"),
                                e.conv_kernel_size, s.block_size);
  if (e.selector_top_k > vocab)
    return InvalidArgumentError("{}: {} exceeds the target's vocab_size {}",
                                at("selector_top_k"), e.selector_top_k, vocab);
  return Status::Ok();
}

// The settings that need more than one key, another group or the filesystem.
Status CheckCrossKeys(const ConfigValue& section, const std::string& prefix,
                      const DrafterSettings& s) {
  auto at = [&](std::string_view key) { return KeyPath(section, prefix, key); };
  if (s.total_steps < s.max_steps)
    return InvalidArgumentError("{}: {} is less than max_steps = {}", at("total_steps"),
                                s.total_steps, s.max_steps);
  if (static_cast<int64_t>(s.layer_types.size()) != s.num_layers)
    return InvalidArgumentError("{}: lists {} entries; num_layers = {}", at("layer_types"),
                                s.layer_types.size(), s.num_layers);
  const bool any_sliding = std::count(s.layer_types.begin(), s.layer_types.end(),
                                      models::LayerType::kSlidingAttention) > 0;
  if (any_sliding != (s.sliding_window > 0))
    return InvalidArgumentError("{}: sliding_window > 0 is needed exactly when some layer is "
                                "sliding_attention", at("sliding_window"));
  const int64_t vocab = s.target.config.vocab_size;
  if (s.mask_token_id < 0 || s.mask_token_id >= vocab)
    return InvalidArgumentError("{}: {} is outside the target's vocab [0, {})",
                                at("mask_token_id"), s.mask_token_id, vocab);
  // Anchor a needs a + 1 in its document, so a batch of max_tokens has at most
  // max_tokens - 1 eligible anchors; blocks beyond the eligible ones are padding that keeps
  // the step's shapes (dflash_anchors.h) and costs full compute: 100000 anchors on a
  // 512-token batch made one CPU step take minutes, training on at most 511 of them.
  const int64_t max_anchors = s.target.max_tokens - 1;
  if (s.anchors_per_batch > max_anchors)
    return InvalidArgumentError(
        "{}: {} blocks per step, but a batch of the target group '{}' (max_tokens = {}) has "
        "at most {} eligible anchors; the rest would be padding blocks that cost compute "
        "and train nothing", at("anchors_per_batch"), s.anchors_per_batch, s.target_group,
        s.target.max_tokens, max_anchors);
  if (s.anchors_per_sequence > s.anchors_per_batch)
    return InvalidArgumentError(
        "{}: {} anchors per document, but a step has anchors_per_batch = {} blocks for all "
        "the documents of its batch together; raise anchors_per_batch (blocks no anchor "
        "fills are padding)", at("anchors_per_sequence"), s.anchors_per_sequence,
        s.anchors_per_batch);
  RETURN_IF_ERROR(models::CheckDFlashMask(DrafterConfig(s, s.target), at("is_causal")));
  RETURN_IF_ERROR(CheckDFlash2Keys(section, prefix, s));
  if (s.nranks > 1 && s.max_seconds > 0)
    return InvalidArgumentError("{}: needs replicas = 1 (data-parallel replicas must stop at "
                                "the same step)", at("max_seconds"));
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!s.metrics_file.empty()) {
    fs::path dir = fs::path(s.metrics_file).parent_path();
    if (dir.empty()) dir = ".";
    if (!fs::is_directory(dir, ec))
      return InvalidArgumentError("{}: the directory '{}' does not exist", at("metrics_file"),
                                  dir.string());
    if (fs::is_directory(s.metrics_file, ec))
      return InvalidArgumentError("{}: '{}' is a directory, not a file", at("metrics_file"),
                                  s.metrics_file);
    // Another running job's checkpoint dir is that job's alone (its lock says whose).
    RETURN_IF_ERROR(DirLock::CheckNotInHeldDir(s.metrics_file, at("metrics_file"),
                                               s.checkpoint_dir));
  }
  if (!s.checkpoint_dir.empty() && fs::exists(s.checkpoint_dir, ec) &&
      !fs::is_directory(s.checkpoint_dir, ec))
    return InvalidArgumentError("{}.dir: '{}' exists and is not a directory",
                                KeyPath(section, prefix, "checkpoint"), s.checkpoint_dir);
  if (!s.checkpoint_dir.empty() && !fs::exists(s.checkpoint_dir, ec)) {
    // It is made at the start: its nearest existing parent must be a writable directory.
    fs::path parent = fs::absolute(s.checkpoint_dir, ec).parent_path();
    while (!parent.empty() && !fs::exists(parent, ec) && parent != parent.root_path())
      parent = parent.parent_path();
    if (!fs::is_directory(parent, ec) || ::access(parent.c_str(), W_OK | X_OK) != 0)
      return InvalidArgumentError("{}.dir: '{}' cannot be created: '{}' is not a writable "
                                  "directory", KeyPath(section, prefix, "checkpoint"),
                                  s.checkpoint_dir, parent.string());
  }
  if (!s.init_from.empty()) RETURN_IF_ERROR(CheckInitFrom(at("init_from"), s));
  return Status::Ok();
}

}  // namespace

const KeyTable& DrafterKeys() {
  static const KeyTable* keys = [] {
    auto* t = new KeyTable("dflash.drafter",
                           "trains the DFlash drafter on the target's hidden states "
                           "(actors/dflash/drafter_actor.cc); replicas > 1 are data parallel");
    t->String("in", "channel of HiddenBatches it trains from").Required();
    t->String("target", "the dflash.target group whose model it trains against")
        .Default("target");
    t->Int("num_layers", "drafter decoder layers").Default(2).Range(1, 64);
    t->StringArray("layer_types", "attention kind per drafter layer (num_layers entries)")
        .OneOf({"full_attention", "sliding_attention"}).DefaultIs("all full_attention");
    t->Int("sliding_window", "window W of a sliding_attention layer: a query sees keys at "
           "most W - 1 positions back, as SGLang and vLLM serve it (0: no sliding layer)")
        .Default(0).Min(0);
    t->Int("num_attention_heads", "the drafter layers' query heads").Min(1)
        .DefaultIs("the target's");
    t->Int("num_key_value_heads", "the drafter layers' KV heads (divides num_attention_heads)")
        .Min(1).DefaultIs("the target's");
    t->Int("head_dim", "the drafter layers' head dim").Range(16, 256).DefaultIs("the target's");
    t->Int("block_size", "tokens per draft block (anchor + masks); the block attention kernel "
           "takes 16").Default(16).Range(16, 16);
    t->Int("mask_token_id", "token id of the mask slots").Min(0)
        .DefaultIs("the target's vocab_size - 1");
    t->Int("max_steps", "training steps per replica").Required().Min(1);
    t->Int("total_steps", "LR schedule length (>= max_steps)").Min(1).DefaultIs("max_steps");
    t->Int("anchors_per_batch", "draft blocks per step: anchors drawn from the batch's "
           "loss-weighted positions, every document one before any gets a second (with "
           "anchors_per_sequence: the most all documents of a batch take together)")
        .Default(64).Range(1, 1 << 20);
    t->Int("anchors_per_sequence", "anchors per document, drawn uniformly from its "
           "loss-weighted positions (all of them when it has fewer), at most "
           "anchors_per_batch in all: documents that together want more share the step's "
           "blocks equally (0: no per-document count)")
        .Default(0).Range(0, 1 << 20);
    t->Number("loss_decay", "gamma of the loss weight exp(-(j-1)/gamma) of block slot j")
        .Range(0.5, 1000).DefaultIs("1 + 3 * block_size / 8: 7 at block 16, 4 at block 8");
    t->Bool("is_causal", "written to the drafter's config.json and applied to every layer: "
            "true, each layer causal inside the block; false, bidirectional (needs "
            "sliding_window >= block_size when a layer is sliding); the window stays per "
            "layer from layer_types")
        .DefaultIs("absent: sliding layers causal, full layers bidirectional; dflash2: "
                   "false");
    t->String("drafter_type", "the drafter trained: dflash, or dflash2 (DFlash plus a "
              "dynamic convolution around attention and the MLP and a candidate selector; "
              "docs/dflash2.md)")
        .Default("dflash").OneOf({"dflash", "dflash2"});
    t->Int("conv_kernel_size", "dflash2: taps K of the convolution inside each block "
           "(<= block_size)").Default(2).Range(1, 16);
    t->Int("conv_group_size", "dflash2: channels sharing one dynamic conv weight (divides "
           "hidden_size)").Default(16).Min(1);
    t->Int("selector_rank", "dflash2: rank of the candidate selector's codebooks (up to "
           "the largest the CUDA selector kernels take)")
        .Default(256).Range(1, static_cast<double>(kernels::dflash2::kSelectorMaxRank));
    t->Int("selector_top_k", "dflash2: candidates per draft position the selector rescores "
           "(<= the target's vocab; up to the most the selector kernels take)")
        .Default(16).Range(1, static_cast<double>(kernels::dflash2::kSelectorMaxTopK));
    t->Number("output_multiplier", "dflash2: scale m of the logits (logits = m * lm_head(h), "
              "then the soft cap)").Default(1.0).Range(1e-6, 1e6);
    t->Number("final_logit_softcapping", "dflash2: soft cap c of the logits, c * tanh(x / c) "
              "(0: none)").Default(0.0).Range(0, 1e6);
    t->Number("input_embedding_scale", "dflash2: scale of the block's token embeddings "
              "before layer 0").Default(1.0).Range(1e-6, 1e6);
    t->Number("selector_loss_weight", "dflash2: alpha of loss = DFlash loss + alpha * the "
              "selector's top-k cross entropy").Default(1.0).Range(0, 1000);
    t->String("init_from", "warm start: a drafter checkpoint directory (config.json + "
              "model.safetensors, as released or as tandem exports) for the same target and "
              "drafter shape, loaded instead of random weights; a resumed run loads its own "
              "checkpoint instead (\"\": random init)")
        .Default("");
    t->Number("lr", "peak learning rate (cosine schedule with warmup)").Default(6e-4).Range(0, 1);
    t->Number("warmup_ratio", "share of total_steps spent warming up").Default(0.04).Range(0, 1);
    t->Number("grad_clip", "clip the global gradient norm to this (0: no clipping)")
        .Default(1.0).Min(0);
    t->Number("noise_std", "std of the noise added to the target's hidden states")
        .Default(0.05).Range(0, 100);
    t->Bool("optimizer_overlap", "run AdamW on a second stream, layer by layer, overlapping "
            "the next step's forward (CUDA; the same update bitwise)").Default(false);
    t->String("lm_head_precision", "the frozen LM head's GEMMs: bf16, or fp8 (e4m3 with "
              "128x128 weight blocks, FP8 logits and d logits, fp32 accumulation; sm_90+; its loss "
              "curve stays within the seed spread at a realistic logit scale but left it on "
              "huge logits: docs/fp8.md)")
        .Default("bf16").OneOf({"bf16", "fp8"});
    t->Int("seed", "seed of the drafter init and the noise").Min(0).DefaultIs("[job] seed");
    t->Int("log_every", "read loss/accuracy/tau from the device every N steps")
        .Default(10).Min(1);
    t->Int("max_bad_steps", "abort after this many non-finite steps in a row").Default(5).Min(1);
    t->BoolOrString("resume", "continue from checkpoint.dir's latest checkpoint (\"force\": "
                    "even when the job or drafter config differs; docs/checkpoints.md)")
        .Default(false).OneOf({"force"});
    t->String("metrics_file", "JSON lines, one per log; its directory must exist (\"\": none)")
        .Default("");
    t->Number("max_seconds", "stop after this many seconds of steady state (0: no limit; "
              "needs replicas = 1)").Default(0.0).Min(0);
    t->Table("checkpoint", "checkpointing: { dir, every_steps, async, keep_last }").Keys(CheckpointKeys())
        .DefaultIs("none: no checkpoints");
    t->Table("eval", "every N steps, tau by real speculative decoding of held-out prompts "
             "(docs/training-eval.md): { every_steps, prompts, ... }").Keys(EvalKeys())
        .DefaultIs("none: no evaluation");
    t->SetCheck([](const ConfigValue& s, const SectionContext& ctx) {
      return ParseDrafterSettings(s, ctx).status();
    });
    // Without pinned_bytes, the group is counted (and its snapshot budgeted) for what its
    // asynchronous checkpoints need.
    t->SetPinnedDefault([](const ConfigValue& s, const SectionContext& ctx) -> Result<uint64_t> {
      ASSIGN_OR_RETURN(const DrafterSettings ds, ParseDrafterSettings(s, ctx));
      return DefaultDrafterPinnedBytes(ds);
    });
    t->SetDeviceCheck([](const ConfigValue& s, std::string_view prefix, const PlacedGpu& gpu) {
      return CheckFp8Gpu(s, prefix, "lm_head_precision", gpu);
    });
    // Parameters with their optimizer state (DFlashParams::DeviceBytes); the activation
    // workspace (measured as the drafter measures it); the context layers of
    // kDrafterContextSets batches; with an eval table, the eval decoder's own memory
    // (DrafterEval::DeviceBytesBound). Its own embedding and LM head (or, with an eval table,
    // the whole target), when no target replica shares its GPU, come on top (alone_bytes).
    t->SetDeviceBytesEstimate([](const ConfigValue& s, const SectionContext& ctx)
                                  -> Result<KeyTable::DeviceBytes> {
      ASSIGN_OR_RETURN(const DrafterSettings ds, ParseDrafterSettings(s, ctx));
      const models::DFlashConfig config = DrafterConfig(ds, ds.target);
      const models::DFlashParamLayout layout = models::MakeDFlashParamLayout(config);
      const int64_t params = layout.total;
      models::DFlashDrafterOptions o;
      o.max_tokens = ds.target.max_tokens;
      o.num_blocks = ds.anchors_per_batch;
      o.lm_head_fp8 = ds.lm_head_fp8;
      ASSIGN_OR_RETURN(const int64_t workspace, models::DFlashDrafter::WorkspaceBytes(
                                                    config, o, kernels::Device::Cuda(0)));
      const int64_t context = kDrafterContextSets *
                              static_cast<int64_t>(ds.target.layer_ids.size()) *
                              ds.target.max_tokens * ds.target.config.hidden_size * 2;
      std::string what = fmt::format(
          "{:.2f} B parameters with their optimizer state, activations {}, context {}",
          params / 1e9, FormatBytes(static_cast<uint64_t>(workspace)),
          FormatBytes(static_cast<uint64_t>(context)));
      int64_t eval = 0;  // the eval decoder's buffers and workspaces (drafter_eval.h)
      if (ds.eval.enabled) {
        ASSIGN_OR_RETURN(eval, DrafterEval::DeviceBytesBound(ds.eval, ds.target, config));
        what += fmt::format(", eval decoder {}", FormatBytes(static_cast<uint64_t>(eval)));
      }
      // Without a replica of its target group on its GPU the drafter loads its own copy of
      // the target's embedding and LM head, or with an eval table the whole target
      // (drafter_actor.cc).
      KeyTable::DeviceBytes bytes;
      bytes.bytes = static_cast<uint64_t>(models::DFlashParams::DeviceBytes(layout) + workspace +
                                          context + eval);
      bytes.what = std::move(what);
      bytes.unless_group = ds.target_group;
      if (ds.eval.enabled) {
        std::string target_what;
        bytes.alone_bytes = TargetDeviceBytes(ds.target, &target_what);
        bytes.alone_what = "its own target for the eval (" + target_what + ")";
      } else {
        const models::TransformerConfig& tc = ds.target.config;
        bytes.alone_bytes = static_cast<uint64_t>(tc.vocab_size) * tc.hidden_size * 2 *
                            (tc.tie_word_embeddings ? 1 : 2);
        bytes.alone_what = "its own embedding and LM head";
      }
      return bytes;
    });
    return t;
  }();
  return *keys;
}

Result<DrafterSettings> ParseDrafterSettings(const ConfigValue& section,
                                             const SectionContext& ctx) {
  const KeyTable& k = DrafterKeys();
  const std::string prefix = "actors." + ctx.group;
  RETURN_IF_ERROR(k.Check(section, prefix, &ActorGroupKeys()));
  DrafterSettings s;
  s.in = k.GetString(section, "in");
  s.target_group = k.GetString(section, "target");
  const SectionContext::Group* tg = ctx.Find(s.target_group);
  if (tg == nullptr || tg->class_name != "dflash.target" || tg->settings == nullptr)
    return InvalidArgumentError("{}: \"{}\" is not a dflash.target group of this job",
                                KeyPath(section, prefix, "target"), s.target_group);
  SectionContext target_ctx = ctx;
  target_ctx.group = tg->name;
  ASSIGN_OR_RETURN(TargetSettings target, ParseTargetSettings(*tg->settings, target_ctx));
  s.target = std::move(target.model);
  if (const SectionContext::Group* own = ctx.Find(ctx.group))
    s.nranks = static_cast<int>(own->replicas);
  s.num_layers = k.GetInt(section, "num_layers");
  s.layer_types.assign(s.num_layers, models::LayerType::kFullAttention);
  if (const ConfigValue* lt = section.Find("layer_types")) {
    s.layer_types.clear();
    for (const ConfigValue& v : lt->array())
      s.layer_types.push_back(*v.AsString() == "sliding_attention"
                                  ? models::LayerType::kSlidingAttention
                                  : models::LayerType::kFullAttention);
  }
  s.sliding_window = k.GetInt(section, "sliding_window");
  s.block_size = k.GetInt(section, "block_size");
  s.num_attention_heads = k.GetOptInt(section, "num_attention_heads")
                              .value_or(s.target.config.num_attention_heads);
  s.num_key_value_heads = k.GetOptInt(section, "num_key_value_heads")
                              .value_or(s.target.config.num_key_value_heads);
  s.head_dim = k.GetOptInt(section, "head_dim").value_or(s.target.config.head_dim);
  if (s.num_attention_heads % s.num_key_value_heads != 0)
    return InvalidArgumentError("{}: {} does not divide num_attention_heads = {}",
                                KeyPath(section, prefix, "num_key_value_heads"),
                                s.num_key_value_heads, s.num_attention_heads);
  s.mask_token_id =
      k.GetOptInt(section, "mask_token_id").value_or(s.target.config.vocab_size - 1);
  s.max_steps = k.GetInt(section, "max_steps");
  s.total_steps = k.GetOptInt(section, "total_steps").value_or(s.max_steps);
  s.anchors_per_batch = k.GetInt(section, "anchors_per_batch");
  s.anchors_per_sequence = k.GetInt(section, "anchors_per_sequence");
  s.loss_decay = k.GetOptNumber(section, "loss_decay")
                     .value_or(models::DFlashDefaultLossDecay(s.block_size));
  if (const ConfigValue* c = section.Find("is_causal")) s.is_causal = *c->AsBool();
  if (k.GetString(section, "drafter_type") == "dflash2") {
    models::DFlash2Extension e;
    e.conv_kernel_size = k.GetInt(section, "conv_kernel_size");
    e.conv_group_size = k.GetInt(section, "conv_group_size");
    e.selector_rank = k.GetInt(section, "selector_rank");
    e.selector_top_k = k.GetInt(section, "selector_top_k");
    e.output_multiplier = k.GetNumber(section, "output_multiplier");
    const double cap = k.GetNumber(section, "final_logit_softcapping");
    if (cap > 0) e.final_logit_softcapping = cap;
    e.input_embedding_scale = k.GetNumber(section, "input_embedding_scale");
    s.dflash2 = e;
    s.selector_loss_weight = k.GetNumber(section, "selector_loss_weight");
  }
  s.init_from = k.GetString(section, "init_from");
  s.lr = k.GetNumber(section, "lr");
  s.warmup_ratio = k.GetNumber(section, "warmup_ratio");
  s.grad_clip = k.GetNumber(section, "grad_clip");
  s.noise_std = k.GetNumber(section, "noise_std");
  s.optimizer_overlap = k.GetBool(section, "optimizer_overlap");
  s.lm_head_fp8 = k.GetString(section, "lm_head_precision") == "fp8";
  s.seed = static_cast<uint64_t>(k.GetOptInt(section, "seed").value_or(ctx.job_seed));
  s.log_every = k.GetInt(section, "log_every");
  s.max_bad_steps = k.GetInt(section, "max_bad_steps");
  ASSIGN_OR_RETURN(s.resume, ParseResumeMode(section));
  s.metrics_file = k.GetString(section, "metrics_file");
  s.max_seconds = k.GetNumber(section, "max_seconds");
  if (const ConfigValue* ck = section.Find("checkpoint")) {
    const KeySpec* spec = k.Find("checkpoint");
    s.checkpoint_dir = spec->sub->GetString(*ck, "dir");
    s.checkpoint_every = spec->sub->GetInt(*ck, "every_steps");
    s.checkpoint_async = spec->sub->GetBool(*ck, "async");
    s.checkpoint_keep_last = spec->sub->GetInt(*ck, "keep_last");
  }
  RETURN_IF_ERROR(CheckCrossKeys(section, prefix, s));
  if (const ConfigValue* ev = section.Find("eval")) {
    ASSIGN_OR_RETURN(s.eval,
                     ParseEvalSettings(*ev, prefix + ".eval", s.block_size, s.checkpoint_dir));
  }
  return s;
}

models::DFlashConfig DrafterConfig(const DrafterSettings& ds, const TargetModelSpec& spec) {
  models::DFlashConfig dc;
  dc.layers = spec.config;
  dc.layers.moe.reset();  // the drafter's layers are dense whatever the target's are
  dc.layers.architectures = {"DFlashDraftModel"};
  dc.layers.num_hidden_layers = ds.num_layers;
  dc.layers.layer_types = ds.layer_types;
  dc.layers.sliding_window.reset();
  if (ds.sliding_window > 0) dc.layers.sliding_window = ds.sliding_window;
  dc.layers.tie_word_embeddings = false;
  dc.layers.num_attention_heads = ds.num_attention_heads;
  dc.layers.num_key_value_heads = ds.num_key_value_heads;
  dc.layers.head_dim = ds.head_dim;
  dc.layers.rotary_dim = dc.layers.head_dim;
  dc.mask_token_id = ds.mask_token_id;
  dc.block_size = ds.block_size;
  dc.num_target_layers = spec.config.num_hidden_layers;
  dc.target_layer_ids = spec.layer_ids;
  dc.is_causal = ds.is_causal;
  if (ds.dflash2) {
    dc.dflash2 = ds.dflash2;
    dc.layers.architectures = {"DFlash2DraftModel"};
    if (!dc.is_causal) dc.is_causal = false;  // the released DFlash2 drafters' mask
  }
  return dc;
}

models::DFlashTrainOptions DrafterTrainOptions(const DrafterSettings& ds,
                                               const TargetModelSpec& spec) {
  models::DFlashTrainOptions to;
  to.max_tokens = spec.max_tokens;
  to.total_steps = ds.total_steps;
  to.anchors_per_batch = ds.anchors_per_batch;
  to.anchors_per_sequence = ds.anchors_per_sequence;
  to.loss_decay = ds.loss_decay;
  to.warmup_ratio = ds.warmup_ratio;
  to.lr = static_cast<float>(ds.lr);
  to.noise_std = static_cast<float>(ds.noise_std);
  to.optimizer_overlap = ds.optimizer_overlap;
  to.grad_clip = static_cast<float>(ds.grad_clip);
  to.seed = static_cast<uint64_t>(ds.seed);
  to.lm_head_fp8 = ds.lm_head_fp8;
  to.selector_loss_weight = static_cast<float>(ds.selector_loss_weight);
  return to;
}

uint64_t DefaultDrafterPinnedBytes(const DrafterSettings& ds) {
  if (ds.checkpoint_dir.empty() || !ds.checkpoint_async) return 0;
  const models::DFlashParamLayout layout =
      models::MakeDFlashParamLayout(DrafterConfig(ds, ds.target));
  return static_cast<uint64_t>(models::DFlashHostState::Bytes(layout));
}

}  // namespace tandem::dflash
