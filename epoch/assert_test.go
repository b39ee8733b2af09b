package epoch

import (
	"fmt"
	"reflect"
	"testing"
)

// Small assertions: testify's go.sum entries are incomplete in this module
// (its yaml dependency is missing), and go.sum is not ours to edit.

func must(t testing.TB, ok bool, msgAndArgs ...any) {
	t.Helper()
	if !ok {
		t.Fatalf("expected true: %s", explain(msgAndArgs))
	}
}

func mustNot(t testing.TB, ok bool, msgAndArgs ...any) {
	t.Helper()
	if ok {
		t.Fatalf("expected false: %s", explain(msgAndArgs))
	}
}

func equal(t testing.TB, want, got any, msgAndArgs ...any) {
	t.Helper()
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("want %v, got %v: %s", want, got, explain(msgAndArgs))
	}
}

func notEqual(t testing.TB, a, b any, msgAndArgs ...any) {
	t.Helper()
	if reflect.DeepEqual(a, b) {
		t.Fatalf("both are %v: %s", a, explain(msgAndArgs))
	}
}

func explain(msgAndArgs []any) string {
	if len(msgAndArgs) == 0 {
		return ""
	}
	if f, ok := msgAndArgs[0].(string); ok {
		return fmt.Sprintf(f, msgAndArgs[1:]...)
	}
	return fmt.Sprint(msgAndArgs...)
}
