// The keys of a file data source (data::MakeBatchSource, docs/data-format.md), declared once:
// an actor class that reads its batches through the data layer includes this table in its own
// (KeyTable::Include) and hands MakeBatchSource its section with these defaults filled in
// (KeyTable::WithDefaults), so the defaults below are the ones that apply.
//
// Thread-safety: the table is built once and immutable.
#pragma once

#include "runtime/actor/config_keys.h"

namespace tandem::data {

const KeyTable& DataSourceKeys();

}  // namespace tandem::data
