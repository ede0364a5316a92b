package feedclient

import (
	"fmt"

	"inventoryfeed/clients/go/gen/inventoryv1"
)

// stockResume is the bookkeeping that lets a reconnecting WatchStock hand its handler no
// gap and no duplicate: the highest sequence delivered, and whether it is a point the
// server can resume after (a snapshot has completed, or the caller gave one).
type stockResume struct {
	keys          []*inventoryv1.StockKey
	last          uint64
	synced        bool
	snapshotOnGap bool
}

func newStockResume(keys []*inventoryv1.StockKey, resumeAfter uint64, snapshotOnGap bool) *stockResume {
	return &stockResume{keys: keys, last: resumeAfter, synced: resumeAfter > 0, snapshotOnGap: snapshotOnGap}
}

// request is the WatchStock request of the next (re)connection: resume after the last
// sequence delivered, or a snapshot when there is no such point yet (first call, or the
// previous stream broke in the middle of a snapshot).
func (s *stockResume) request() *inventoryv1.WatchStockRequest {
	req := &inventoryv1.WatchStockRequest{Keys: s.keys}
	if s.synced {
		req.ResumeAfterSequence = s.last
		req.SnapshotOnGap = s.snapshotOnGap
	}
	return req
}

// resumeAfter is the sequence the next request resumes after (0: a snapshot).
func (s *stockResume) resumeAfter() uint64 {
	if s.synced {
		return s.last
	}
	return 0
}

// accept records an update and tells whether the handler gets it. A change at or below
// the last sequence delivered is a duplicate and is dropped.
func (s *stockResume) accept(u *inventoryv1.StockUpdate) (deliver bool, err error) {
	switch u.GetKind() {
	case inventoryv1.StockUpdate_KIND_SNAPSHOT:
		// Until its end a snapshot is no point to resume after.
		s.synced = false
		return true, nil
	case inventoryv1.StockUpdate_KIND_SNAPSHOT_END:
		s.last = u.GetSequence()
		s.synced = true
		return true, nil
	case inventoryv1.StockUpdate_KIND_CHANGE:
		if !s.synced {
			return false, fmt.Errorf("%w: a change (sequence %d) before the snapshot ended", ErrProtocol, u.GetSequence())
		}
		if u.GetSequence() <= s.last {
			return false, nil
		}
		s.last = u.GetSequence()
		return true, nil
	default:
		// A kind this client does not know: pass it on, it moves no sequence.
		return true, nil
	}
}

// onOutOfRange handles the server's OUT_OF_RANGE (it no longer retains the changes after
// the last sequence): from now on, ask for a fresh snapshot in that case. An
// OUT_OF_RANGE although a snapshot was already asked for is an error.
func (s *stockResume) onOutOfRange(err error) error {
	if !s.synced || s.snapshotOnGap {
		return fmt.Errorf("feedclient: WatchStock: OUT_OF_RANGE although a snapshot was requested: %w", err)
	}
	s.snapshotOnGap = true
	return nil
}
