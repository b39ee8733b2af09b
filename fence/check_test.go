package fence

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"
)

// testify v1.12.1 imports go.yaml.in/yaml/v3, which this module's go.sum does
// not list, so plain `go test` cannot build it; these few assertions stand in.
// must stops the test on failure, check records it and continues.
type asserter struct{ fatal bool }

var (
	must  = asserter{fatal: true}
	check = asserter{fatal: false}
)

func (a asserter) fail(tb testing.TB, msg []any, format string, args ...any) {
	tb.Helper()
	s := fmt.Sprintf(format, args...)
	if len(msg) > 0 {
		if f, ok := msg[0].(string); ok {
			s += ": " + fmt.Sprintf(f, msg[1:]...)
		}
	}
	if a.fatal {
		tb.Fatal(s)
	}
	tb.Error(s)
}

func (a asserter) NoError(tb testing.TB, err error, msg ...any) {
	tb.Helper()
	if err != nil {
		a.fail(tb, msg, "unexpected error: %v", err)
	}
}

func (a asserter) Error(tb testing.TB, err error, msg ...any) {
	tb.Helper()
	if err == nil {
		a.fail(tb, msg, "expected an error")
	}
}

func (a asserter) ErrorIs(tb testing.TB, err, target error, msg ...any) {
	tb.Helper()
	if !errors.Is(err, target) {
		a.fail(tb, msg, "error %v is not %v", err, target)
	}
}

func (a asserter) NotErrorIs(tb testing.TB, err, target error, msg ...any) {
	tb.Helper()
	if errors.Is(err, target) {
		a.fail(tb, msg, "error %v should not be %v", err, target)
	}
}

func (a asserter) Equal(tb testing.TB, want, got any, msg ...any) {
	tb.Helper()
	if wb, ok := want.([]byte); ok {
		if gb, ok := got.([]byte); ok && bytes.Equal(wb, gb) {
			return
		}
	}
	if !reflect.DeepEqual(want, got) {
		a.fail(tb, msg, "not equal:\n want %#v\n  got %#v", want, got)
	}
}

func (a asserter) True(tb testing.TB, v bool, msg ...any) {
	tb.Helper()
	if !v {
		a.fail(tb, msg, "expected true")
	}
}

func (a asserter) False(tb testing.TB, v bool, msg ...any) {
	tb.Helper()
	if v {
		a.fail(tb, msg, "expected false")
	}
}

func (a asserter) Len(tb testing.TB, v any, n int, msg ...any) {
	tb.Helper()
	if l := reflect.ValueOf(v).Len(); l != n {
		a.fail(tb, msg, "length %d, want %d", l, n)
	}
}
