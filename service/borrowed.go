package service

// Borrowed is a []byte parameter that a method borrows from the framework
// instead of owning: a method opts in by declaring a parameter of this type,
//
//	func (s *Store) Put(ctx context.Context, key string, value service.Borrowed) error
//
// and the provider then passes the bytes as they lie in the request it
// read (protocol/dubbo with msgpack, the default serialization), with no
// copy and no allocation per call. A plain []byte parameter is a copy the
// method owns and may keep, which at large sizes costs the provider its
// allocation and its garbage collection on every call.
//
// The bytes are valid only until the method returns. After that the
// request's buffer goes back to a pool and is read into again, so a method
// must not keep a Borrowed slice, any slice of it or a pointer into it
// (in a struct, a map, a channel, a goroutine still running), nor modify
// it; filters that see it in an Invocation must not either. To keep the
// bytes, copy them (bytes.Clone). Keeping them is a misuse the framework
// cannot detect: the kept bytes silently become those of later requests.
//
// A method may return the Borrowed bytes, or a slice of them, as its
// []byte reply (return []byte(b), nil): the provider writes the reply
// before the request's buffer is reused (large replies are written from
// the request's own memory, not copied).
//
// With a serialization that cannot lend its input (json), the argument is
// a fresh copy, as for a []byte parameter; the rules above stay the same.
// On a consumer a Borrowed argument is sent as a []byte.
type Borrowed []byte
