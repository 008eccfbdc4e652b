package serialize_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/minidubbo/minidubbo/serialize"
)

// array32 is a msgpack array32 of n copies of elem.
func array32(n int, elem []byte) []byte {
	b := []byte{0xdd, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(n))
	return append(b, bytes.Repeat(elem, n)...)
}

// reportRow is shaped like a monitor report's row: names, counts, a
// one-entry map and two small slices.
type reportRow struct {
	Side, Application, Service, Method, Provider, Consumer string
	Calls, Failures                                        int64
	FailuresByKind                                         map[string]int64
	Index                                                  []int32
	Count                                                  []int64
}

// TestMsgpackWorstShapesWithinBudget decodes the shapes that cost the
// most Go memory per input byte, at sizes around the slack and far above
// it: what decoding allocates stays within DefaultAllocFactor × the body +
// DefaultAllocSlack, decoded or refused. Charged 16 bytes an entry, a
// one-entry map (355 bytes in Go) let 1805 bytes of them allocate 212 KB
// against a 71 KB budget (2.99×); typed slices of one element and non-nil
// pointers were 1.25× and 1.52× over.
func TestMsgpackWorstShapesWithinBudget(t *testing.T) {
	s := serialize.NewMsgpack()
	row, err := s.Marshal(reportRow{Side: "consumer", Application: "shop", Service: "demo.Greeter", Method: "SayHello",
		Provider: "10.0.0.1:20880", Consumer: "shop@10.0.0.9", Calls: 20, Failures: 1,
		FailuresByKind: map[string]int64{"timeout": 1}, Index: []int32{5, 900}, Count: []int64{19, 1}})
	if err != nil {
		t.Fatal(err)
	}
	shapes := []struct {
		name string
		elem []byte
		into func() any
	}{
		{"one-entry maps into any", []byte{0x81, 0xa0, 0xc0}, func() any { return new(any) }},
		{"one-entry maps into []map[string]any", []byte{0x81, 0xa0, 0xc0}, func() any { return new([]map[string]any) }},
		{"one-entry maps into []map[string]string", []byte{0x81, 0xa0, 0xa0}, func() any { return new([]map[string]string) }},
		{"one-entry maps into []map[int64]int64", []byte{0x81, 0x01, 0x01}, func() any { return new([]map[int64]int64) }},
		{"nine-entry maps into []map[int64]int64", append([]byte{0x89}, bytes.Repeat([]byte{0x01, 0x01}, 9)...), func() any { return new([]map[int64]int64) }},
		{"empty maps into any", []byte{0x80}, func() any { return new(any) }},
		{"one-element arrays into any", []byte{0x91, 0xc0}, func() any { return new(any) }},
		{"one-element arrays into [][]int", []byte{0x91, 0x01}, func() any { return new([][]int) }},
		{"integers into []*int64", []byte{0x01}, func() any { return new([]*int64) }},
		{"one-byte strings into any", []byte{0xa1, 'x'}, func() any { return new(any) }},
		{"report rows into []reportRow", row, func() any { return new([]reportRow) }},
	}
	budget := func(n int) uint64 { return uint64(serialize.DefaultAllocFactor*n + serialize.DefaultAllocSlack) }
	for _, sh := range shapes {
		for _, size := range []int{1 << 10, 2 << 10, 16 << 10, 64 << 10, 1 << 20} {
			n := max(1, size/len(sh.elem))
			data := array32(n, sh.elem)
			t.Run(fmt.Sprintf("%s/%d", sh.name, len(data)), func(t *testing.T) {
				var err error
				got := allocated(func() { err = s.Unmarshal(data, sh.into()) })
				if got > budget(len(data)) {
					t.Fatalf("allocated %d bytes for a body of %d (budget %d, err %v)", got, len(data), budget(len(data)), err)
				}
			})
		}
	}
}
