package cli

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestParseItem(t *testing.T) {
	cases := []struct {
		in   string
		want Item
		ok   bool
	}{
		{"sku-1:3", Item{"sku-1", "", 3}, true},
		{"sku-1@wh-2:3", Item{"sku-1", "wh-2", 3}, true},
		{"sku-1=-4", Item{"sku-1", "", -4}, false}, // with ':' as the separator
		{"sku-1", Item{}, false},
		{":3", Item{}, false},
		{"sku-1:", Item{}, false},
		{"sku-1:x", Item{}, false},
		{"@wh:3", Item{}, false},
	}
	for _, c := range cases {
		got, err := ParseItem(c.in, ':')
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("ParseItem(%q) = %+v, %v; want %+v ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
	if got, err := ParseItem("sku-1@wh=-4", '='); err != nil || got != (Item{"sku-1", "wh", -4}) {
		t.Errorf("ParseItem with '=' = %+v, %v", got, err)
	}
}

func TestList(t *testing.T) {
	var l List
	_ = l.Set("a, b")
	_ = l.Set("c,,")
	if l.String() != "a,b,c" {
		t.Errorf("List = %q, want a,b,c", l.String())
	}
}

func TestExitCode(t *testing.T) {
	cases := map[error]int{
		nil:                                     ExitOK,
		Usagef("bad"):                           ExitUsage,
		errors.New("local"):                     ExitUsage,
		status.Error(codes.Unavailable, "down"): ExitUnavailable,
		status.Error(codes.DeadlineExceeded, "slow"):           ExitUnavailable,
		status.Error(codes.FailedPrecondition, "short"):        ExitRefused,
		fmt.Errorf("w: %w", status.Error(codes.NotFound, "x")): ExitRefused,
	}
	for err, want := range cases {
		if got := ExitCode(err); got != want {
			t.Errorf("ExitCode(%v) = %d, want %d", err, got, want)
		}
	}
}
