package cli

import (
	"fmt"
	"strconv"
	"strings"
)

// Item is one SKU[@LOCATION]<sep>QUANTITY argument.
type Item struct {
	SKU, Location string
	Quantity      int64
}

// ParseItem parses "SKU[@LOCATION]<sep>QUANTITY", e.g. "sku-1@wh-2:3" with sep ':'.
func ParseItem(arg string, sep byte) (Item, error) {
	i := strings.LastIndexByte(arg, sep)
	if i <= 0 || i == len(arg)-1 {
		return Item{}, fmt.Errorf("%q: want SKU[@LOCATION]%cQUANTITY", arg, sep)
	}
	q, err := strconv.ParseInt(arg[i+1:], 10, 64)
	if err != nil {
		return Item{}, fmt.Errorf("%q: quantity %q is not an integer", arg, arg[i+1:])
	}
	sku, loc, _ := strings.Cut(arg[:i], "@")
	if sku == "" {
		return Item{}, fmt.Errorf("%q: empty SKU", arg)
	}
	return Item{SKU: sku, Location: loc, Quantity: q}, nil
}

// List is a flag that may be repeated and takes comma-separated values.
type List []string

func (l *List) String() string { return strings.Join(*l, ",") }

// Set adds the comma-separated values of one occurrence.
func (l *List) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}
