package feedclient

import (
	"crypto/rand"
	"encoding/hex"
)

// NewIdempotencyKey returns a fresh random key ("go-" and 32 hex digits, 128 bits).
// Keep it with the request: a retry of the same request must send the same key.
func NewIdempotencyKey() string {
	var b [16]byte
	// crypto/rand.Read never fails on supported platforms (Go 1.24+ aborts instead).
	_, _ = rand.Read(b[:])
	return "go-" + hex.EncodeToString(b[:])
}
