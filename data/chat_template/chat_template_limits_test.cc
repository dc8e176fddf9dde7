// The interpreter's resource limits (limits.h): each template here used to crash the
// process (stack overflow, SIGFPE, an uncaught exception) or exhaust memory; now each is
// refused at Parse or fails its rendering with an error naming the limit, in bounded time
// and memory (each case finishes in at most a few seconds and holds at most a few hundred
// MB: a few times kMaxOutputBytes, or kMaxListItems values).
#include <gtest/gtest.h>

#include <string>

#include "data/chat_template/chat_template.h"
#include "data/chat_template/limits.h"
#include "data/chat_template/parser.h"
#include "data/chat_template/renderer.h"

namespace tandem::chat_template {
namespace {

std::string Render(const std::string& src) {
  auto t = ChatTemplate::Parse(src);
  if (!t.ok()) return "PARSE ERROR: " + t.status().message();
  auto r = t->Render(nlohmann::ordered_json::object());
  if (!r.ok()) return "ERROR: " + r.status().message();
  return *r;
}

std::string Repeat(const std::string& s, int n) {
  std::string out;
  for (int k = 0; k < n; ++k) out += s;
  return out;
}

#define EXPECT_HAS(text, part) \
  EXPECT_NE((text).find(part), std::string::npos) << (text)

TEST(ChatTemplateLimitsTest, RecursionIsBoundedByTheCallDepth) {
  // Unbounded recursion overflowed the stack; the bound is kMaxCallDepth (64) levels.
  EXPECT_HAS(Render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"),
             "ERROR: chat_template:1: macro calls nested deeper than 64 levels");
  EXPECT_HAS(Render("{% for x in [1] recursive %}{{ loop([x]) }}{% endfor %}"),
             "ERROR: chat_template:1: a recursive loop nested deeper than 64 levels");
  // Within the bound recursion still works (a JSON schema is rarely 15 levels deep).
  EXPECT_EQ(Render("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}"
                   "{{ f(20) }}"),
            "2019181716151413121110987654321");
}

// A namespace that holds itself, directly or through a list, was a cycle of shared
// pointers that every rendering leaked (found by fuzz/chat_template_fuzz.cc under
// LeakSanitizer): the renderer now clears the namespaces set into when it ends.
// Growing a string or list in a loop copies it every iteration: 50,000 iterations took
// minutes under the sanitizers, a million would take hours (found by
// fuzz/chat_template_fuzz.cc as a timeout). The bytes a rendering evaluates are bounded.
TEST(ChatTemplateLimitsTest, QuadraticGrowthInALoopIsBounded) {
  EXPECT_HAS(Render("{% set ns = namespace(s='') %}{% for j in range(1000) %}"
                    "{% for i in range(1000) %}{% set ns.s = ns.s ~ i %}{% endfor %}{% endfor %}"
                    "{{ ns.s | length }}"),
             "evaluated more than 1073741824 bytes");
  EXPECT_HAS(Render("{% set ns = namespace(l=[]) %}{% for i in range(200000) %}"
                    "{% set ns.l = ns.l + [i] %}{% endfor %}{{ ns.l | length }}"),
             "evaluated more than 1073741824 bytes");
  EXPECT_EQ(Render("{% set ns = namespace(s='') %}{% for i in range(5000) %}"
                   "{% set ns.s = ns.s ~ 'x' %}{% endfor %}{{ ns.s | length }}"),
            "5000");
}

TEST(ChatTemplateLimitsTest, NamespaceHoldingItselfIsFreedAfterRendering) {
  for (const char* src : {"{% set probe.me = probe %}{{ probe.me.me is defined }}",
                          "{% set ns = namespace(p=probe) %}{% set probe.l = [1, ns] %}x",
                          "{% for i in range(3) %}{% set probe.s = probe %}{% endfor %}"}) {
    auto body = ParseTemplate(src);
    ASSERT_TRUE(body.ok()) << body.status().ToString();
    Value probe = Value::Dict();
    probe.obj->is_namespace = true;
    const std::weak_ptr<Object> alive = probe.obj;
    std::string out;
    {
      Renderer r(&out);
      r.Define("probe", std::move(probe));
      auto f = r.Run(*body);
      ASSERT_TRUE(f.ok()) << f.status().ToString();
    }
    EXPECT_TRUE(alive.expired()) << src;
  }
}

TEST(ChatTemplateLimitsTest, NamespaceHoldingItselfIsATojsonError) {
  EXPECT_HAS(Render("{% set ns = namespace(a=1) %}{% set ns.self = ns %}{{ ns | tojson }}"),
             "nested deeper than 256 levels");
  EXPECT_HAS(Render("{{ {'a': 1} | tojson(indent=100000000) }}"), "wider than 1024");
  // Comparing two such namespaces recursed without end; past the depth they differ.
  EXPECT_EQ(Render("{% set a = namespace(v=1) %}{% set b = namespace(v=1) %}{% set a.s = a %}"
                   "{% set b.s = b %}{{ a == b }} {{ a == a }}"),
            "False True");
}

TEST(ChatTemplateLimitsTest, ValuesNestedTooDeeplyAreErrors) {
  // A list wrapped 100,000 times: printing (and freeing) it recursed once per level. The
  // bound is kMaxValueDepth (256), reached on the 256th iteration.
  EXPECT_HAS(Render("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}"
                    "{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}"),
             "ERROR: chat_template:1: a value nested deeper than 256 levels");
  EXPECT_EQ(Render("{% set ns = namespace(x=[]) %}{% for i in range(3) %}"
                   "{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}"),
            "[[[[]]]]");
}

TEST(ChatTemplateLimitsTest, DeepNestingIsRefusedAtParse) {
  // 10,000 levels recursed once per level in the parser (and again when rendering).
  EXPECT_HAS(Render(Repeat("{% if true %}", 10000) + "x" + Repeat("{% endif %}", 10000)),
             "PARSE ERROR: chat_template:1: blocks nested deeper than 64 levels");
  EXPECT_HAS(Render("{{ " + std::string(100, '(') + "1" + std::string(100, ')') + " }}"),
             "PARSE ERROR: chat_template:1: expression nested deeper than 64 levels");
  EXPECT_HAS(Render("{{ " + Repeat("not ", 100) + "1 }}"), "nested deeper than 64 levels");
  EXPECT_HAS(Render("{{ " + Repeat("-", 100) + "1 }}"), "nested deeper than 64 levels");
  // 10,000 parentheses, or a 5,000-term sum (built without recursion, evaluated with it):
  // the tag is over kMaxTagTokens.
  EXPECT_HAS(Render("{{ " + std::string(10000, '(') + "1" + std::string(10000, ')') + " }}"),
             "tokens (the limit is 2048)");
  EXPECT_HAS(Render("{{ 1" + Repeat(" + 1", 5000) + " }}"), "(the limit is 2048)");
  // Ordinary nesting is untouched.
  EXPECT_EQ(Render(Repeat("{% if true %}", 30) + "x" + Repeat("{% endif %}", 30)), "x");
  EXPECT_EQ(Render("{{ " + std::string(30, '(') + "1" + std::string(30, ')') + " }}"), "1");
}

TEST(ChatTemplateLimitsTest, IntegerEdgeCasesAreExactOrErrors) {
  const std::string min = "(-9223372036854775807 - 1)";
  // INT64_MIN // -1 and % -1 raised SIGFPE.
  EXPECT_HAS(Render("{{ " + min + " // -1 }}"), "ERROR: chat_template:1: integer overflow");
  EXPECT_EQ(Render("{{ " + min + " % -1 }}"), "0");
  EXPECT_EQ(Render("{{ " + min + " is divisibleby(-1) }}"), "True");
  EXPECT_EQ(Render("{{ 7 // -1 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }}"), "-7 -4 2 -2");
  // Wrapping arithmetic is an error, as Python would need a bigger integer.
  EXPECT_HAS(Render("{{ 9223372036854775807 + 1 }}"), "integer overflow");
  EXPECT_HAS(Render("{{ 4611686018427387904 * 2 }}"), "integer overflow");
  EXPECT_HAS(Render("{{ -" + min + " }}"), "integer overflow");
  EXPECT_HAS(Render("{{ 2 ** 64 }}"), "integer overflow");
  EXPECT_EQ(Render("{{ 2 ** 62 }} {{ (-3) ** 3 }}"), "4611686018427387904 -27");
  EXPECT_HAS(Render("{{ [9223372036854775807, 1] | sum }}"), "integer overflow in sum");
  EXPECT_HAS(Render("{{ 1e300 | int }}"), "int() of 1e+300 does not fit 64 bits");
  // strtoll clamped a literal that does not fit to INT64_MAX.
  EXPECT_EQ(Render("{{ 99999999999999999999 }}"),
            "PARSE ERROR: chat_template:1: the integer 99999999999999999999 does not fit 64 bits");
}

TEST(ChatTemplateLimitsTest, SizesAreBoundedBeforeAllocating) {
  // indent(-1) threw std::length_error; Python indents by ' ' * -1, nothing.
  EXPECT_EQ(Render("{{ 'a\nb' | indent(-1) }}"), "a\nb");
  // Each of these asked for about 100 GB.
  EXPECT_HAS(Render("{{ 'x' * 100000000000 }}"), "is longer than the 16777216-byte limit");
  EXPECT_HAS(Render("{{ 'a\nb' | indent(100000000000) }}"),
             "indent(100000000000) of 2 lines is longer than the 16777216-byte limit");
  EXPECT_HAS(Render("{{ range(100000000000) | length }}"),
             "range() of 100000000000 items is longer than the limit of 262144");
  EXPECT_HAS(Render("{{ range(-9223372036854775807, 9223372036854775807) | length }}"),
             "is longer than the limit of 262144");
  // The float forms are type errors, as in Python.
  EXPECT_HAS(Render("{{ 'x' * 1e11 }}"), "ERROR: ");
  EXPECT_HAS(Render("{{ range(1e11) }}"), "range() needs integers, got float");
  EXPECT_EQ(Render("{{ range(2, 11, 3) | list }}"), "[2, 5, 8]");
}

TEST(ChatTemplateLimitsTest, OutputStringsListsAndLoopsAreBounded) {
  // Output: 16 MB of text, then an error (memory stays near the limit).
  EXPECT_HAS(Render("{% for i in range(1000) %}{{ 'x' * 1000000 }}{% endfor %}"),
             "the output is longer than the 16777216-byte limit");
  // A string doubled in a namespace: stopped at the first value past the limit.
  EXPECT_HAS(Render("{% set ns = namespace(s='x') %}{% for i in range(40) %}"
                    "{% set ns.s = ns.s ~ ns.s %}{% endfor %}"),
             "a string of 33554432 bytes is longer than the 16777216-byte limit");
  // A list doubled the same way.
  EXPECT_HAS(Render("{% set ns = namespace(l=[1]) %}{% for i in range(40) %}"
                    "{% set ns.l = ns.l + ns.l %}{% endfor %}"),
             "a list of 524288 items is longer than the limit of 262144");
  // Nested loops: 10^10 iterations would run for hours; the bound is kMaxLoopIterations.
  EXPECT_HAS(Render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
                    "{% endfor %}"),
             "more than 1048576 loop iterations in one rendering");
}

}  // namespace
}  // namespace tandem::chat_template
