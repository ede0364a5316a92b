package main

import (
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"inventoryfeed/clients/go/gen/eventsv1"
)

func TestDecodeEvent(t *testing.T) {
	ev := &eventsv1.Event{EventId: "s1-3", Sequence: 3, Type: "inventory.stock.changed", Key: "sku-1"}
	pb, _ := proto.Marshal(ev)
	js, _ := protojson.Marshal(ev)

	got, err := decodeEvent(pb, []header{{"content-type", []byte("application/protobuf")}, {"ce_id", []byte("s1-3")}})
	if err != nil || !proto.Equal(got, ev) {
		t.Fatalf("protobuf: %v, %v", got, err)
	}
	if got, err = decodeEvent(pb, nil); err != nil || got.GetSequence() != 3 {
		t.Fatalf("no content-type (protobuf by default): %v, %v", got, err)
	}
	if got, err = decodeEvent(js, []header{{"Content-Type", []byte("application/json; charset=utf-8")}}); err != nil || !proto.Equal(got, ev) {
		t.Fatalf("json: %v, %v", got, err)
	}
	if _, err = decodeEvent(pb, []header{{"ce_id", []byte("other")}}); err == nil {
		t.Fatal("a ce_id that differs from event_id: want an error")
	}
	if _, err = decodeEvent(pb, []header{{"content-type", []byte("text/plain")}}); err == nil {
		t.Fatal("unknown content-type: want an error")
	}
	if _, err = decodeEvent([]byte("{"), []header{{"content-type", []byte("application/json")}}); err == nil {
		t.Fatal("broken JSON: want an error")
	}
	noID, _ := proto.Marshal(&eventsv1.Event{Sequence: 1})
	if _, err = decodeEvent(noID, nil); err == nil {
		t.Fatal("no event_id: want an error")
	}
}

func TestDedup(t *testing.T) {
	d := newDedup(3)
	if !d.first("a-1", 1) || !d.first("a-2", 2) || d.first("a-1", 1) {
		t.Fatal("first() wrong")
	}
	if d.complete() {
		t.Fatal("complete before sequence 3")
	}
	if !d.first("a-9", 9) || d.complete() {
		t.Fatal("a sequence beyond until does not complete")
	}
	d.first("a-3", 3)
	if !d.complete() || d.unique() != 4 {
		t.Fatalf("complete %v unique %d", d.complete(), d.unique())
	}
	if newDedup(0).complete() {
		t.Fatal("until 0 never completes")
	}
}
