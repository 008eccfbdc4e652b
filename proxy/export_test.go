package proxy

// SetReflectiveStubs makes Refer fill every field through reflect.MakeFunc
// (on: true) until it is called again with false.
func SetReflectiveStubs(on bool) { reflectiveStubs = on }
