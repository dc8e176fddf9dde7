#include "actors/data/source_keys.h"

namespace tandem::data {

const KeyTable& DataSourceKeys() {
  static const KeyTable* keys = [] {
    auto* t = new KeyTable("data source");
    t->String("data", "\"synthetic\", a pre-tokenized .jsonl file, or a binary set directory "
              "made by `tandem data` (docs/data-format.md)").Default("synthetic");
    t->Int("epochs", "passes over the data; 0 = forever (files only)").Default(1).Min(0);
    t->Bool("shuffle", "shuffle the document order per epoch (files)").Default(true);
    t->Int("vocab", "token ids must be below this (files); 0: no check here").Default(0).Min(0);
    t->Bool("skip_bad", "skip (and count) malformed JSONL lines instead of failing").Default(false);
    t->String("long_documents", "documents longer than max_tokens: split them or truncate them")
        .Default("split").OneOf({"split", "truncate"});
    return t;
  }();
  return *keys;
}

}  // namespace tandem::data
