// Test hooks for the relay (tests only; not part of the public interface).
#pragma once

#include <cstdint>

#include "bridge/relay.h"

namespace feed::bridge::testing {

// Asks the relay thread to raise a fabricated fatal error on its producer
// (rd_kafka_test_fatal_error), as a real fatal idempotent-producer error would. The relay then
// recreates the producer and resends from its cursor. No-op on a relay that is not running.
void InjectFatalError(Relay& relay);

// Records handed to librdkafka whose delivery report has not been handled yet, over all relays
// of the process: 0 once every relay has shut down (no opaque leaked, purges included).
int64_t LiveDeliveries();

// Producers created so far (1 after Create; +1 per recreation after a fatal error).
int ProducersCreated(const Relay& relay);

}  // namespace feed::bridge::testing
