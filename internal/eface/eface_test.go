package eface

import (
	"reflect"
	"testing"
	"unsafe"
)

func TestWordsRoundTrip(t *testing.T) {
	s := "hello"
	v := Box(TypeWord(reflect.TypeFor[*string]()), unsafe.Pointer(&s))
	p, ok := v.(*string)
	if !ok || p != &s || *p != "hello" {
		t.Fatalf("Box gave %#v, want the pointer to s", v)
	}
	var a any = 42
	if Of(&a).Type != TypeWord(reflect.TypeFor[int]()) {
		t.Fatal("TypeWord(int) is not the type word of any(42)")
	}
	if Of(&a).Type == TypeWord(reflect.TypeFor[int64]()) {
		t.Fatal("int and int64 share a type word")
	}
}
