package feedclient

import (
	"testing"

	"inventoryfeed/clients/go/gen/orderv1"
)

func ou(status orderv1.OrderStatus, seq uint64) *orderv1.OrderStatusUpdate {
	return &orderv1.OrderStatusUpdate{OrderId: "o1", StatusCode: status, Sequence: seq}
}

func TestIsTerminal(t *testing.T) {
	for s, want := range map[orderv1.OrderStatus]bool{
		orderv1.OrderStatus_ORDER_STATUS_CONFIRMED:  false,
		orderv1.OrderStatus_ORDER_STATUS_PAID:       false,
		orderv1.OrderStatus_ORDER_STATUS_PACKING:    false,
		orderv1.OrderStatus_ORDER_STATUS_DISPATCHED: false,
		orderv1.OrderStatus_ORDER_STATUS_DELIVERED:  true,
		orderv1.OrderStatus_ORDER_STATUS_CANCELLED:  true,
		orderv1.OrderStatus_ORDER_STATUS_EXPIRED:    true,
	} {
		if IsTerminal(s) != want {
			t.Errorf("IsTerminal(%v) != %v", s, want)
		}
	}
}

func TestOrderStatusFromName(t *testing.T) {
	u := &orderv1.OrderStatusUpdate{Status: "DELIVERED"}
	if updateStatus(u) != orderv1.OrderStatus_ORDER_STATUS_DELIVERED {
		t.Errorf("status name DELIVERED not understood")
	}
	if updateStatus(&orderv1.OrderStatusUpdate{Status: "nonsense"}) != orderv1.OrderStatus_ORDER_STATUS_UNSPECIFIED {
		t.Errorf("an unknown name should be UNSPECIFIED")
	}
}

func TestOrderResumeDropsRepeatsAfterReconnect(t *testing.T) {
	var o orderResume
	steps := []struct {
		u                 *orderv1.OrderStatusUpdate
		deliver, terminal bool
	}{
		{ou(orderv1.OrderStatus_ORDER_STATUS_CONFIRMED, 4), true, false},
		{ou(orderv1.OrderStatus_ORDER_STATUS_PAID, 9), true, false},
		// Reconnected: the current status first, already delivered.
		{ou(orderv1.OrderStatus_ORDER_STATUS_PAID, 9), false, false},
		{ou(orderv1.OrderStatus_ORDER_STATUS_PACKING, 12), true, false},
		{ou(orderv1.OrderStatus_ORDER_STATUS_DELIVERED, 20), true, true},
	}
	for i, s := range steps {
		d, term := o.accept(s.u)
		if d != s.deliver || term != s.terminal {
			t.Errorf("step %d (%v): deliver %v terminal %v, want %v %v", i, s.u.StatusCode, d, term, s.deliver, s.terminal)
		}
	}
}

func TestOrderResumeWithoutSequences(t *testing.T) {
	var o orderResume
	if d, _ := o.accept(ou(orderv1.OrderStatus_ORDER_STATUS_CONFIRMED, 0)); !d {
		t.Fatal("first update not delivered")
	}
	if d, _ := o.accept(ou(orderv1.OrderStatus_ORDER_STATUS_CONFIRMED, 0)); d {
		t.Fatal("the same status again (no sequence) delivered twice")
	}
	if d, _ := o.accept(ou(orderv1.OrderStatus_ORDER_STATUS_PAID, 0)); !d {
		t.Fatal("a new status not delivered")
	}
}
