package feedclient

import (
	"context"
)

// bearerToken sends "authorization: Bearer <token>" on every call.
type bearerToken struct {
	token      string
	requireTLS bool
}

func (b bearerToken) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

// RequireTransportSecurity keeps the token off plaintext connections unless
// Options.AllowTokenWithoutTLS is set.
func (b bearerToken) RequireTransportSecurity() bool { return b.requireTLS }
