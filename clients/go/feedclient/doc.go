// Package feedclient is a thin typed client of the inventory feed server.
//
// It adds to the generated stubs (Client.Inventory, Client.Orders) what every caller would
// otherwise write again:
//
//   - Dial: plaintext or TLS (a CA file, an optional client certificate) and a bearer token;
//   - Reserve, AdjustStock, Commit and Release: an idempotency key generated when none is
//     given, and retries after UNAVAILABLE, DEADLINE_EXCEEDED, a CANCELLED the caller did
//     not cause and RESOURCE_EXHAUSTED, with backoff and always the same key, so a retry
//     never applies a change twice;
//   - WatchStock: a stock stream that reconnects by itself and resumes after the highest
//     sequence delivered, so the handler sees no gap and no duplicate;
//   - FollowOrder: an order's status updates until a terminal status, reconnecting too.
//
// Errors keep their gRPC status: status.Code(err) works on every error returned here.
package feedclient
