// Package kmsgtest helps tests of code that reads and writes kmsg messages.
package kmsgtest

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fill sets every exported field of v, recursively, to a value other than
// its zero, so that every field a message version carries is on the wire
// (or, for a reused response, dirty); slices get one element. Unknown tagged
// fields stay empty: tenure never reads them.
func Fill(t testing.TB, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() && f.Type != reflect.TypeFor[kmsg.Tags]() {
				Fill(t, v.Field(i))
			}
		}
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float64:
		v.SetFloat(1)
	case reflect.Array:
		for i := range v.Len() {
			Fill(t, v.Index(i))
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		Fill(t, s.Index(0))
		v.Set(s)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		Fill(t, p.Elem())
		v.Set(p)
	default:
		t.Fatalf("Fill: no value for a %s", v.Type())
	}
}
