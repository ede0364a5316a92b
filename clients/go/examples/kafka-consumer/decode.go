package main

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"inventoryfeed/clients/go/gen/eventsv1"
)

// header is one Kafka record header.
type header struct {
	Key   string
	Value []byte
}

func headerValue(hs []header, key string) (string, bool) {
	for _, h := range hs {
		if strings.EqualFold(h.Key, key) {
			return string(h.Value), true
		}
	}
	return "", false
}

// decodeEvent decodes a record value as an events.v1.Event according to its content-type
// header (application/protobuf, the default, or application/json with the proto3 JSON
// mapping) and checks that the ce_id header, when there, names the same event.
func decodeEvent(value []byte, hs []header) (*eventsv1.Event, error) {
	ct, _ := headerValue(hs, "content-type")
	ct = strings.TrimSpace(strings.SplitN(ct, ";", 2)[0])
	ev := &eventsv1.Event{}
	switch strings.ToLower(ct) {
	case "", "application/protobuf", "application/x-protobuf":
		if err := proto.Unmarshal(value, ev); err != nil {
			return nil, fmt.Errorf("protobuf value: %w", err)
		}
	case "application/json":
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(value, ev); err != nil {
			return nil, fmt.Errorf("JSON value: %w", err)
		}
	default:
		return nil, fmt.Errorf("unknown content-type %q", ct)
	}
	if ev.GetEventId() == "" {
		return nil, fmt.Errorf("event without event_id")
	}
	if id, ok := headerValue(hs, "ce_id"); ok && id != ev.GetEventId() {
		return nil, fmt.Errorf("header ce_id %q differs from event_id %q", id, ev.GetEventId())
	}
	return ev, nil
}
