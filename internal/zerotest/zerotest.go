package zerotest

import (
	"reflect"
	"testing"
	"time"
	"unsafe"
)

// EachField calls f, for every field of struct T, with a new T whose only
// non-zero field is that one (unexported fields included).
func EachField[T any](t testing.TB, f func(field string, v *T)) {
	t.Helper()
	typ := reflect.TypeFor[T]()
	for i := range typ.NumField() {
		v := new(T)
		setNonZero(t, reflect.ValueOf(v).Elem().Field(i))
		f(typ.Field(i).Name, v)
	}
}

func setNonZero(t testing.TB, v reflect.Value) {
	t.Helper()
	v = reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.String:
		v.SetString("x")
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 0, 0)) // empty, but not nil
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Unix(1, 0)))
			return
		}
		setNonZero(t, v.Field(0))
	default:
		t.Fatalf("zerotest: no non-zero value for a %s field", v.Kind())
	}
}
