package feedclient

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"inventoryfeed/clients/go/gen/inventoryv1"
)

func upd(kind inventoryv1.StockUpdate_Kind, seq uint64) *inventoryv1.StockUpdate {
	return &inventoryv1.StockUpdate{Kind: kind, Sequence: seq, Level: &inventoryv1.StockLevel{Sku: "a", Sequence: seq}}
}

const (
	snap    = inventoryv1.StockUpdate_KIND_SNAPSHOT
	snapEnd = inventoryv1.StockUpdate_KIND_SNAPSHOT_END
	change  = inventoryv1.StockUpdate_KIND_CHANGE
)

func mustAccept(t *testing.T, s *stockResume, u *inventoryv1.StockUpdate, want bool) {
	t.Helper()
	got, err := s.accept(u)
	if err != nil {
		t.Fatalf("accept(%v %d): %v", u.Kind, u.Sequence, err)
	}
	if got != want {
		t.Fatalf("accept(%v %d) = %v, want %v", u.Kind, u.Sequence, got, want)
	}
}

func TestResumeStartsWithSnapshotThenResumesAfterHighestSequence(t *testing.T) {
	keys := []*inventoryv1.StockKey{StockKey("a", "")}
	s := newStockResume(keys, 0, false)
	if r := s.request(); r.ResumeAfterSequence != 0 || r.SnapshotOnGap || len(r.Keys) != 1 {
		t.Fatalf("first request = %v, want a snapshot of the keys", r)
	}
	mustAccept(t, s, upd(snap, 10), true)
	mustAccept(t, s, upd(snap, 10), true)
	mustAccept(t, s, upd(snapEnd, 10), true)
	mustAccept(t, s, upd(change, 12), true)
	mustAccept(t, s, upd(change, 15), true)
	if r := s.request(); r.ResumeAfterSequence != 15 || r.SnapshotOnGap {
		t.Fatalf("request after changes = %v, want resume after 15", r)
	}
	// A reconnected stream that repeats what was delivered: dropped.
	mustAccept(t, s, upd(change, 12), false)
	mustAccept(t, s, upd(change, 15), false)
	mustAccept(t, s, upd(change, 16), true)
	if s.resumeAfter() != 16 {
		t.Errorf("resumeAfter = %d, want 16", s.resumeAfter())
	}
}

func TestResumeBrokenSnapshotStartsOver(t *testing.T) {
	s := newStockResume(nil, 0, false)
	mustAccept(t, s, upd(snap, 10), true)
	if r := s.request(); r.ResumeAfterSequence != 0 {
		t.Fatalf("a snapshot broken before its end must be asked again, got resume %d", r.ResumeAfterSequence)
	}
	// Also after a completed snapshot and changes, a new snapshot (snapshot_on_gap) is no
	// resume point until its end.
	mustAccept(t, s, upd(snapEnd, 10), true)
	mustAccept(t, s, upd(change, 11), true)
	mustAccept(t, s, upd(snap, 30), true)
	if s.resumeAfter() != 0 {
		t.Fatalf("inside a snapshot resumeAfter = %d, want 0", s.resumeAfter())
	}
	mustAccept(t, s, upd(snapEnd, 30), true)
	mustAccept(t, s, upd(change, 29), false)
	mustAccept(t, s, upd(change, 31), true)
}

func TestResumeFromGivenSequence(t *testing.T) {
	s := newStockResume(nil, 41, false)
	if r := s.request(); r.ResumeAfterSequence != 41 {
		t.Fatalf("request = %v, want resume after 41", r)
	}
	mustAccept(t, s, upd(change, 41), false)
	mustAccept(t, s, upd(change, 42), true)
}

func TestResumeOutOfRangeFallsBackToSnapshotOnGap(t *testing.T) {
	gone := status.Error(codes.OutOfRange, "oldest retained: 7")
	s := newStockResume(nil, 0, false)
	mustAccept(t, s, upd(snapEnd, 3), true)
	if err := s.onOutOfRange(gone); err != nil {
		t.Fatalf("onOutOfRange: %v", err)
	}
	if r := s.request(); r.ResumeAfterSequence != 3 || !r.SnapshotOnGap {
		t.Fatalf("request after OUT_OF_RANGE = %v, want resume after 3 with snapshot_on_gap", r)
	}
	// OUT_OF_RANGE although snapshot_on_gap was asked: an error, not a loop.
	if err := s.onOutOfRange(gone); err == nil || status.Code(errors.Unwrap(err)) != codes.OutOfRange {
		t.Fatalf("second onOutOfRange = %v, want an error wrapping OUT_OF_RANGE", err)
	}
}

func TestResumeRejectsChangeBeforeSnapshotEnd(t *testing.T) {
	s := newStockResume(nil, 0, false)
	if _, err := s.accept(upd(change, 5)); !errors.Is(err, ErrProtocol) {
		t.Fatalf("change before any snapshot: %v, want ErrProtocol", err)
	}
}

func TestResumeUnknownKindPassesWithoutMovingTheSequence(t *testing.T) {
	s := newStockResume(nil, 9, false)
	mustAccept(t, s, &inventoryv1.StockUpdate{Kind: 42, Sequence: 100}, true)
	if s.resumeAfter() != 9 {
		t.Errorf("resumeAfter = %d, want 9", s.resumeAfter())
	}
}
