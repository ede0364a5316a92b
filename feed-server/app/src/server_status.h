// The dashboard's view of the process (server/status.h) collected from the core and the
// relay. Any thread; cheap enough for a request a second.
#pragma once

#include "bridge/relay.h"
#include "core/inventory_core.h"
#include "server/status.h"

namespace feed::server {

// `relay` is null when Kafka is off.
ServerStatus CollectStatus(core::InventoryCore& core, const bridge::Relay* relay);

}  // namespace feed::server
