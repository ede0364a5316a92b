// Owners of librdkafka's C handles (userver's holders.hpp is the model): each destroys its
// handle with the matching librdkafka function when it goes, on every path. release() hands
// ownership to librdkafka where it takes it (rd_kafka_new takes the configuration).
#pragma once

// The type-checking macros of rdkafka.h use GNU statement expressions, which -Wpedantic rejects.
#define LIBRDKAFKA_TYPECHECKS 0
#include <librdkafka/rdkafka.h>

#include <memory>

namespace feed::bridge::internal {

template <auto Destroy>
struct KafkaDeleter {
  template <class T>
  void operator()(T* handle) const {
    if (handle != nullptr) Destroy(handle);
  }
};

using ProducerHandle = std::unique_ptr<rd_kafka_t, KafkaDeleter<&rd_kafka_destroy>>;
using ConfHandle = std::unique_ptr<rd_kafka_conf_t, KafkaDeleter<&rd_kafka_conf_destroy>>;
using QueueHandle = std::unique_ptr<rd_kafka_queue_t, KafkaDeleter<&rd_kafka_queue_destroy>>;
using TopicHandle = std::unique_ptr<rd_kafka_topic_t, KafkaDeleter<&rd_kafka_topic_destroy>>;
using HeadersHandle = std::unique_ptr<rd_kafka_headers_t, KafkaDeleter<&rd_kafka_headers_destroy>>;
using EventHandle = std::unique_ptr<rd_kafka_event_t, KafkaDeleter<&rd_kafka_event_destroy>>;
using AdminOptionsHandle =
    std::unique_ptr<rd_kafka_AdminOptions_t, KafkaDeleter<&rd_kafka_AdminOptions_destroy>>;
using NewTopicHandle =
    std::unique_ptr<rd_kafka_NewTopic_t, KafkaDeleter<&rd_kafka_NewTopic_destroy>>;
using PartitionListHandle = std::unique_ptr<rd_kafka_topic_partition_list_t,
                                            KafkaDeleter<&rd_kafka_topic_partition_list_destroy>>;
using MessageHandle = std::unique_ptr<rd_kafka_message_t, KafkaDeleter<&rd_kafka_message_destroy>>;
using MetadataHandle =
    std::unique_ptr<const rd_kafka_metadata_t, KafkaDeleter<&rd_kafka_metadata_destroy>>;

}  // namespace feed::bridge::internal
