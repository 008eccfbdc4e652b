// Package eface reads and writes the two words of an empty interface value
// (its type word and its data word), for the direct-call fast paths of
// package service and package proxy, which box and unbox values of a few
// known shapes without reflect.Value.Call or the copy any(v) makes.
//
// These rely on the gc compiler's layout of interface{}: a type word, then
// a data word. The callers check the shapes they handle when a service or
// stub is built, and fall back to reflection for every other type.
package eface

import (
	"reflect"
	"unsafe"
)

// Words is the layout of an empty interface value.
type Words struct {
	Type unsafe.Pointer
	Data unsafe.Pointer
}

// Of returns the words of the interface value *v, to read or write in place.
func Of(v *any) *Words { return (*Words)(unsafe.Pointer(v)) }

// TypeWord returns the type word that interface values of type t carry.
func TypeWord(t reflect.Type) unsafe.Pointer {
	z := reflect.Zero(t).Interface()
	return Of(&z).Type
}

// Box returns the interface value of type word t and data word p.
func Box(t, p unsafe.Pointer) any {
	var v any
	w := Of(&v)
	w.Type, w.Data = t, p
	return v
}
