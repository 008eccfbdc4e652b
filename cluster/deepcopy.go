package cluster

import "reflect"

// deepCopy returns a copy of v that shares no memory a caller could
// change: slices, arrays, maps, pointers and the exported fields of
// structs are copied all the way down (a pointer met twice is copied
// once, so cycles end). Strings, numbers, functions and channels are
// kept; so are unexported struct fields, which no serialization sends.
// Should reflection refuse a value, v itself is returned.
func deepCopy(v any) (out any) {
	switch x := v.(type) {
	case nil, string, bool, int, int8, int16, int32, int64, uint, uint8, uint16,
		uint32, uint64, float32, float64:
		return v
	case []byte:
		if x == nil {
			return x
		}
		return append([]byte(nil), x...)
	}
	defer func() {
		if recover() != nil {
			out = v
		}
	}()
	c := copier{seen: map[uintptr]reflect.Value{}}
	return c.value(reflect.ValueOf(v)).Interface()
}

type copier struct {
	seen map[uintptr]reflect.Value
}

func (c *copier) value(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		if p, ok := c.seen[v.Pointer()]; ok && p.Type() == v.Type() {
			return p
		}
		p := reflect.New(v.Type().Elem())
		c.seen[v.Pointer()] = p
		p.Elem().Set(c.value(v.Elem()))
		return p
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		s := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		if plain(v.Type().Elem()) {
			reflect.Copy(s, v)
			return s
		}
		for i := range v.Len() {
			s.Index(i).Set(c.value(v.Index(i)))
		}
		return s
	case reflect.Array:
		a := reflect.New(v.Type()).Elem()
		a.Set(v)
		if !plain(v.Type().Elem()) {
			for i := range v.Len() {
				a.Index(i).Set(c.value(v.Index(i)))
			}
		}
		return a
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		m := reflect.MakeMapWithSize(v.Type(), v.Len())
		it := v.MapRange()
		for it.Next() {
			m.SetMapIndex(it.Key(), c.value(it.Value()))
		}
		return m
	case reflect.Struct:
		s := reflect.New(v.Type()).Elem()
		s.Set(v)
		for i := range v.NumField() {
			if f := s.Field(i); f.CanSet() {
				f.Set(c.value(v.Field(i)))
			}
		}
		return s
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		i := reflect.New(v.Type()).Elem()
		i.Set(c.value(v.Elem()))
		return i
	}
	return v
}

// plain reports whether values of t hold no reference to other memory.
func plain(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128, reflect.String:
		return true
	case reflect.Array:
		return plain(t.Elem())
	}
	return false
}
