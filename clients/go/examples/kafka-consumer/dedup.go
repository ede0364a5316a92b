package main

// dedup remembers the event ids seen (the relay delivers at least once) and which
// sequences of 1..until are still missing.
type dedup struct {
	seen    map[string]struct{}
	until   uint64
	covered map[uint64]struct{}
}

func newDedup(until uint64) *dedup {
	return &dedup{seen: map[string]struct{}{}, until: until, covered: map[uint64]struct{}{}}
}

// first records id and tells whether it is new.
func (d *dedup) first(id string, seq uint64) bool {
	if _, ok := d.seen[id]; ok {
		return false
	}
	d.seen[id] = struct{}{}
	if seq >= 1 && seq <= d.until {
		d.covered[seq] = struct{}{}
	}
	return true
}

// complete tells whether every sequence 1..until has been seen (never when until is 0).
func (d *dedup) complete() bool {
	return d.until > 0 && uint64(len(d.covered)) == d.until
}

// unique is the number of distinct events seen.
func (d *dedup) unique() int { return len(d.seen) }
