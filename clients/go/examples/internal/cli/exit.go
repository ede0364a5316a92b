package cli

import (
	"errors"
	"fmt"
	"os"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Exit codes shared by the examples.
const (
	ExitOK          = 0
	ExitUsage       = 1 // bad flags or arguments, or another local failure
	ExitRefused     = 2 // the server refused the request (its gRPC code is printed)
	ExitUnavailable = 3 // the server could not be reached, even after the retries
)

// Fail prints "<prog>: <err>" on stderr and exits with the code that fits err.
func Fail(prog string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", prog, err)
	os.Exit(ExitCode(err))
}

// ExitCode is the exit code that fits err.
func ExitCode(err error) int {
	var usage *UsageError
	if err == nil {
		return ExitOK
	}
	if errors.As(err, &usage) {
		return ExitUsage
	}
	st, isStatus := status.FromError(err)
	switch {
	case !isStatus:
		return ExitUsage
	case st.Code() == codes.Unavailable || st.Code() == codes.DeadlineExceeded:
		return ExitUnavailable
	default:
		return ExitRefused
	}
}

// UsageError marks a mistake in the command line.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// Usagef makes a UsageError.
func Usagef(format string, args ...any) error { return &UsageError{Msg: fmt.Sprintf(format, args...)} }
