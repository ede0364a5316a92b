// Which shard a SKU lives on: common/shard_hash.h, the one formula every component uses.
#pragma once

#include "common/shard_hash.h"

namespace feed::cluster {

using feed::ShardOf;

}  // namespace feed::cluster
