// Package cli holds what the examples share: the connection flags and small parsers.
package cli

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"inventoryfeed/clients/go/feedclient"
)

// ConnFlags are the flags that say how to reach the server.
type ConnFlags struct {
	Server, CAFile, ServerName, CertFile, KeyFile, Token, TokenFile string
	TokenWithoutTLS                                                 bool
}

// RegisterConn adds the connection flags to fs. The server defaults to $FEED_SERVER, else
// 127.0.0.1:50051.
func RegisterConn(fs *flag.FlagSet) *ConnFlags {
	c := &ConnFlags{}
	server := os.Getenv("FEED_SERVER")
	if server == "" {
		server = "127.0.0.1:50051"
	}
	fs.StringVar(&c.Server, "server", server, "gRPC address host:port (env FEED_SERVER)")
	fs.StringVar(&c.CAFile, "tls-ca", "", "PEM CA file: connect with TLS and verify the server with it")
	fs.StringVar(&c.ServerName, "tls-server-name", "", "name to verify in the server's certificate")
	fs.StringVar(&c.CertFile, "tls-cert", "", "client certificate (mutual TLS)")
	fs.StringVar(&c.KeyFile, "tls-key", "", "client key (mutual TLS)")
	fs.StringVar(&c.Token, "token", os.Getenv("FEED_TOKEN"), "bearer token (env FEED_TOKEN)")
	fs.StringVar(&c.TokenFile, "token-file", "", "file holding the bearer token")
	fs.BoolVar(&c.TokenWithoutTLS, "token-without-tls", false, "send the token over plaintext (development only)")
	return c
}

// Options turns the flags into feedclient options.
func (c *ConnFlags) Options() (feedclient.Options, error) {
	o := feedclient.Options{
		Server:               c.Server,
		TLSCAFile:            c.CAFile,
		TLSServerName:        c.ServerName,
		TLSCertFile:          c.CertFile,
		TLSKeyFile:           c.KeyFile,
		Token:                c.Token,
		AllowTokenWithoutTLS: c.TokenWithoutTLS,
		UserAgent:            "feedclient-go-example",
	}
	if c.TokenFile != "" {
		b, err := os.ReadFile(c.TokenFile)
		if err != nil {
			return o, fmt.Errorf("token file: %w", err)
		}
		o.Token = strings.TrimSpace(string(b))
	}
	return o, nil
}
