package delegation

import (
	"reflect"
	"testing"
	"time"
	"unsafe"
)

// TestKeyStateSize holds the line on the holder's share of an idle
// delegation. A node may hold a million; the budget for one, home and
// holder side together with their maps and timers, is 256 bytes (the
// harness's "heap per idle delegation"). The holder's state is 96 bytes, a
// malloc size class: a field more moves it to the next (112). Put what only
// a key in motion needs in keyExtra instead.
func TestKeyStateSize(t *testing.T) {
	if got := unsafe.Sizeof(keyState{}); got > 96 {
		t.Errorf("keyState is %d bytes, over its 96", got)
	}
}

// TestKeyExtraEmpty: empty must see every field of keyExtra, or the state
// in a field it misses would be dropped with the rest (trim).
func TestKeyExtraEmpty(t *testing.T) {
	if !new(keyExtra).empty() {
		t.Fatal("the zero keyExtra is not empty")
	}
	typ := reflect.TypeFor[keyExtra]()
	for i := range typ.NumField() {
		x := new(keyExtra)
		setNonZero(t, reflect.ValueOf(x).Elem().Field(i))
		if x.empty() {
			t.Errorf("keyExtra.empty misses field %s", typ.Field(i).Name)
		}
	}
}

var time1 = time.Unix(1, 0)

// setNonZero makes v (maybe unexported) non-zero.
func setNonZero(t *testing.T, v reflect.Value) {
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
		v.Set(reflect.MakeSlice(v.Type(), 0, 0))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
	case reflect.Struct:
		if v.Type().String() == "time.Time" {
			v.Set(reflect.ValueOf(time1))
			return
		}
		setNonZero(t, v.Field(0))
	default:
		t.Fatalf("setNonZero: %s", v.Kind())
	}
}
