// Rendering agrees with transformers' apply_chat_template on the committed golden (Qwen3's
// template from the npm fixture), Jinja semantics the templates rely on, and errors that
// name the construct and line.
#include "data/chat_template/chat_template.h"

#include <gtest/gtest.h>

#include <fstream>

#include "data/tokenizer/fixture.h"

namespace tandem::chat_template {
namespace {

using nlohmann::ordered_json;

std::string Render(const std::string& src, const ordered_json& ctx = ordered_json::object()) {
  auto t = ChatTemplate::Parse(src);
  if (!t.ok()) return "PARSE ERROR: " + t.status().message();
  auto r = t->Render(ctx);
  if (!r.ok()) return "ERROR: " + r.status().message();
  return *r;
}

TEST(ChatTemplateTest, MatchesTransformersOnGoldenChats) {
  std::ifstream cfg_in(tokenizer::Qwen3FixtureDir() + "/tokenizer_config.json");
  ASSERT_TRUE(cfg_in) << "run scripts/install-deps.sh to fetch the fixture";
  const ordered_json cfg = ordered_json::parse(cfg_in);
  auto t = ChatTemplate::Parse(cfg["chat_template"].get<std::string>());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  std::ifstream in(std::string(TANDEM_SOURCE_DIR) + "/tests/golden/tokenizer_golden.jsonl");
  ASSERT_TRUE(in);
  std::string line;
  int checked = 0, mismatches = 0;
  while (std::getline(in, line)) {
    const ordered_json r = ordered_json::parse(line);
    if (r.value("kind", "") != "chat") continue;
    ordered_json msgs = r["messages"];
    if (!r["split"].is_null()) {
      msgs = ordered_json(std::vector<ordered_json>(msgs.begin(), msgs.begin() + r["split"].get<int>() + 1));
    }
    ordered_json ctx = {{"messages", msgs},
                        {"tools", r.contains("tools") ? r["tools"] : ordered_json()},
                        {"add_generation_prompt", r["add_generation_prompt"]},
                        {"eos_token", cfg["eos_token"]},
                        {"pad_token", cfg["pad_token"]}};
    if (!r["enable_thinking"].is_null()) ctx["enable_thinking"] = r["enable_thinking"];
    auto text = t->Render(ctx);
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    ++checked;
    if (*text != r["text"].get<std::string>() && ++mismatches <= 3) {
      ADD_FAILURE() << "render differs\n got:  " << ordered_json(*text).dump()
                    << "\n want: " << r["text"].dump();
    }
  }
  EXPECT_GT(checked, 1000);
  EXPECT_EQ(mismatches, 0);
}

TEST(ChatTemplateTest, WhitespaceControlTrimAndLstripBlocks) {
  EXPECT_EQ(Render("a\n  {% if true %}\nb\n  {% endif %}\nc\n"), "a\nb\nc");
  EXPECT_EQ(Render("a  {{- 'x' -}}  b"), "axb");
  EXPECT_EQ(Render("{# note #}\nx"), "x");
  EXPECT_EQ(Render("  {%+ if true %}y{% endif %}"), "  y");
}

TEST(ChatTemplateTest, LoopsNamespacesAndScoping) {
  EXPECT_EQ(Render("{% for x in [1,2,3] %}{{ loop.index }}{{ x }}{% if loop.last %}!{% endif %}"
                   "{% endfor %}"),
            "112233!");
  EXPECT_EQ(Render("{% for x in [3,2,1] if x > 1 %}{{ loop.length }}{% else %}none{% endfor %}"),
            "22");
  EXPECT_EQ(Render("{% for x in [] %}x{% else %}none{% endfor %}"), "none");
  EXPECT_EQ(Render("{% set ns = namespace(n=0) %}{% for x in range(4) %}{% set ns.n = ns.n + x %}"
                   "{% set local = 1 %}{% endfor %}{{ ns.n }}{{ local is defined }}"),
            "6False");
  EXPECT_EQ(Render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}"),
            "a=1;b=2;");
  EXPECT_EQ(Render("{% for x in [1,2,3,4] %}{% if x == 3 %}{% break %}{% endif %}{{ x }}"
                   "{% endfor %}"),
            "12");
}

TEST(ChatTemplateTest, StringsSlicesFiltersAndTests) {
  EXPECT_EQ(Render("{{ 'a</think>\\n\\nb'.split('</think>')[-1].lstrip('\\n') }}"), "b");
  EXPECT_EQ(Render("{{ [1,2,3][::-1] }} {{ 'héllo'[1:3] }} {{ [1,2,3,4][1:] }}"),
            "[3, 2, 1] él [2, 3, 4]");
  EXPECT_EQ(Render("{{ '  x  ' | trim }}|{{ [1,2] | length }}|{{ none | string }}|{{ u | "
                   "default('d') }}"),
            "x|2|None|d");
  EXPECT_EQ(Render("{{ {'a': [1, 2.5, 'é\"'], 'b': none, 'c': true} | tojson }}"),
            "{\"a\": [1, 2.5, \"é\\\"\"], \"b\": null, \"c\": true}");
  EXPECT_EQ(Render("{{ x is defined }} {{ none is none }} {{ 'a' is string }} {{ 3 is odd }}"),
            "False True True True");
  EXPECT_EQ(Render("{{ 'abc'.startswith('ab') and 'abc'.endswith(('x', 'c')) }}"), "True");
  EXPECT_EQ(Render("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ 1 / 2 }} {{ 'a' ~ 1 }}"),
            "3 -4 1 0.5 a1");
  EXPECT_EQ(Render("{{ 'x' if false }}|{{ 'y' if 0 else 'z' }}"), "|z");
  EXPECT_EQ(Render("{{ ['a', 'b'] | join(', ') }} {{ 'A b' | upper }} {{ [3,1,2] | sort }}"),
            "a, b A B [1, 2, 3]");
  EXPECT_EQ(Render("{{ [{'r': 'u'}, {'r': 'a'}] | selectattr('r', 'equalto', 'a') | list | "
                   "length }}"),
            "1");
}

// Macros, call blocks, recursive loops and `set` scoping in loops against Python Jinja2 as
// transformers configures it (tests/golden/make_jinja_golden.py): outputs, and errors where
// Jinja2 raises.
TEST(ChatTemplateTest, MatchesJinja2OnMacrosCallsRecursionAndScoping) {
  std::ifstream in(std::string(TANDEM_SOURCE_DIR) + "/tests/golden/jinja_golden.jsonl");
  ASSERT_TRUE(in);
  std::string line;
  std::getline(in, line);  // header
  int checked = 0;
  while (std::getline(in, line)) {
    const ordered_json r = ordered_json::parse(line);
    SCOPED_TRACE(r["name"].get<std::string>() + ": " + r["template"].get<std::string>());
    const std::string got = Render(r["template"].get<std::string>(), r["context"]);
    if (r.contains("error")) {
      // Jinja2's message ("TypeError: macro 'm' takes ...") after its exception type.
      const std::string want = r["error"].get<std::string>();
      EXPECT_EQ(got.rfind("ERROR: ", 0), 0u) << got;
      EXPECT_NE(got.find(want.substr(want.find(": ") + 2)), std::string::npos)
          << got << "\n Jinja2: " << want;
    } else {
      EXPECT_EQ(got, r["output"].get<std::string>());
    }
    ++checked;
  }
  EXPECT_GE(checked, 28);
}

TEST(ChatTemplateTest, IntegersAboveInt64FromJsonPrintExactly) {
  // A tool schema's "maximum": 2^63 was printed wrapped, as -9223372036854775808.
  const ordered_json ctx = ordered_json::parse(
      R"({"x": 9223372036854775808, "m": 18446744073709551615, "t": [{"maximum": 9223372036854775808}]})");
  EXPECT_EQ(Render("{{ x }} {{ m | tojson }} {{ t | tojson }} {{ t }}", ctx),
            "9223372036854775808 18446744073709551615 [{\"maximum\": 9223372036854775808}] "
            "[{'maximum': 9223372036854775808}]");
  // Arithmetic on them is in floating point (Python's would be exact).
  EXPECT_EQ(Render("{{ x > 1 }} {{ x == m }} {{ -x < 0 }} {{ x | abs }}", ctx),
            "True False True 9223372036854775808");
}

TEST(ChatTemplateTest, ErrorsNameTheConstructAndLine) {
  EXPECT_EQ(Render("a\n\n{% filter upper %}x{% endfilter %}"),
            "PARSE ERROR: chat_template:3: unsupported construct 'filter'");
  EXPECT_EQ(Render("\n{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}"),
            "ERROR: chat_template:2: macro 'm' takes not more than 1 argument(s)");
  EXPECT_EQ(Render("{% call m() %}x{% endcall %}"),
            "ERROR: chat_template:1: a call block must call a macro");
  EXPECT_EQ(Render("x\n{{ 1 | wordwrap }}"), "ERROR: chat_template:2: unsupported filter 'wordwrap'");
  EXPECT_EQ(Render("{{ raise_exception('bad role') }}"),
            "ERROR: chat_template:1: the chat template raised: bad role");
  EXPECT_EQ(Render("{% if x %}"),
            "PARSE ERROR: chat_template: the template ends inside a block; expected 'elif'");
  EXPECT_EQ(Render("{{ m.content }}"), "ERROR: chat_template:1: 'm' is undefined (reading .content)");
  EXPECT_EQ(Render("\n{% include 'x' %}"), "PARSE ERROR: chat_template:2: unsupported construct 'include'");
}

}  // namespace
}  // namespace tandem::chat_template
