package serialize_test

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/serialize"
)

// jsonArray is a JSON array of n copies of elem.
func jsonArray(n int, elem string) []byte {
	var b bytes.Buffer
	b.Grow(n*(len(elem)+1) + 2)
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(elem)
	}
	b.WriteByte(']')
	return b.Bytes()
}

// jsonObject is a JSON object of n keys k0, k1, ... each with value.
func jsonObject(n int, value string) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:%s", fmt.Sprint("k", i), value)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// TestJSONWorstShapesWithinBudget decodes the JSON shapes that cost the
// most Go memory per input byte, at sizes around the slack and far above
// it: what decoding allocates stays within DefaultAllocFactor × the body
// + DefaultAllocSlack, decoded or refused (after a first decode into the
// type: what encoding/json caches once per type is not counted). Unbounded (before the cost
// walk), 900 KB of "{}," into a []wide allocated 104 MB, 115 bytes per
// input byte.
func TestJSONWorstShapesWithinBudget(t *testing.T) {
	s := serialize.NewJSON()
	row, err := s.Marshal(reportRow{Side: "consumer", Application: "shop", Service: "demo.Greeter", Method: "SayHello",
		Provider: "10.0.0.1:20880", Consumer: "shop@10.0.0.9", Calls: 20, Failures: 1,
		FailuresByKind: map[string]int64{"timeout": 1}, Index: []int32{5, 900}, Count: []int64{19, 1}})
	require.NoError(t, err)
	nested := strings.Repeat("[", 60) + "1" + strings.Repeat("]", 60)
	shapes := []struct {
		name string
		body func(size int) []byte
		into func() any
	}{
		{"empty objects into []wide", arrayOf("{}"), func() any { return new([]wide) }},
		{"empty objects into []*wide", arrayOf("{}"), func() any { return new([]*wide) }},
		{"empty objects into any", arrayOf("{}"), func() any { return new(any) }},
		{"one-element arrays into [][]int", arrayOf("[1]"), func() any { return new([][]int) }},
		{"one-element arrays into any", arrayOf("[1]"), func() any { return new(any) }},
		{"nested one-element arrays into any", arrayOf(nested), func() any { return new(any) }},
		{"numbers into []any", arrayOf("1"), func() any { return new([]any) }},
		{"numbers into []int64", arrayOf("1"), func() any { return new([]int64) }},
		{"numbers into []*int64", arrayOf("1"), func() any { return new([]*int64) }},
		{"empty strings into []string", arrayOf(`""`), func() any { return new([]string) }},
		{"empty strings into any", arrayOf(`""`), func() any { return new(any) }},
		{"escaped strings into []string", arrayOf(`"\u0041"`), func() any { return new([]string) }},
		{"base64 strings into [][]byte", arrayOf(`"AAAA"`), func() any { return new([][]byte) }},
		{"one base64 string into []byte", func(size int) []byte { return []byte(`"` + strings.Repeat("A", size/4*4) + `"`) }, func() any { return new([]byte) }},
		{"objects into map[string]wide", objectOf("{}"), func() any { return new(map[string]wide) }},
		{"objects into map[string]map[string]int", objectOf("{}"), func() any { return new(map[string]map[string]int) }},
		{"numbers into map[string]any", objectOf("1"), func() any { return new(map[string]any) }},
		{"one-entry objects into []map[string]wide", arrayOf(`{"":{}}`), func() any { return new([]map[string]wide) }},
		{"one-entry objects into []map[string]any", arrayOf(`{"":1}`), func() any { return new([]map[string]any) }},
		{"one-entry objects into []map[int]int", arrayOf(`{"1":1}`), func() any { return new([]map[int]int) }},
		{"report rows into []reportRow", arrayOf(string(row)), func() any { return new([]reportRow) }},
	}
	budget := func(n int) uint64 { return uint64(serialize.DefaultAllocFactor*n + serialize.DefaultAllocSlack) }
	for _, sh := range shapes {
		// Once per type, encoding/json and the walk cache its fields.
		require.NoError(t, s.Unmarshal(sh.body(1), sh.into()))
		for _, size := range []int{1 << 10, 2 << 10, 16 << 10, 64 << 10, 900_000} {
			data := sh.body(size)
			t.Run(fmt.Sprintf("%s/%d", sh.name, len(data)), func(t *testing.T) {
				var err error
				got := allocated(func() { err = s.Unmarshal(data, sh.into()) })
				if got > budget(len(data)) {
					t.Fatalf("allocated %d bytes for a body of %d (%.1f per byte; budget %d, err %v)",
						got, len(data), float64(got)/float64(len(data)), budget(len(data)), err)
				}
				if err != nil && !errors.Is(err, serialize.ErrLimit) {
					t.Fatalf("not a limit: %v", err)
				}
				t.Logf("allocated %.2f bytes per body byte, err %v", float64(got)/float64(len(data)), err != nil)
			})
		}
	}
}

// arrayOf returns a body of about size bytes: an array of elem.
func arrayOf(elem string) func(size int) []byte {
	return func(size int) []byte { return jsonArray(max(1, size/(len(elem)+1)), elem) }
}

// objectOf returns a body of about size bytes: an object of keys k<i>
// with value.
func objectOf(value string) func(size int) []byte {
	return func(size int) []byte { return jsonObject(max(1, size/(len(value)+8)), value) }
}

// TestJSONOrdinaryBodiesDecode: bodies of the sizes a service sends
// decode with the default limits: 100 monitor-report rows (20 KB, which
// encoding/json decodes with 84 KB), 2,000 integers, a 1 MB string.
func TestJSONOrdinaryBodiesDecode(t *testing.T) {
	s := serialize.NewJSON()
	rows := make([]reportRow, 100)
	for i := range rows {
		rows[i] = reportRow{Side: "consumer", Application: "shop", Service: "demo.Greeter", Method: "SayHello",
			Calls: int64(i), FailuresByKind: map[string]int64{"timeout": 1}, Index: []int32{5, 900}, Count: []int64{19, 1}}
	}
	ints := make([]int64, 2_000)
	for i := range ints {
		ints[i] = int64(i) * 1000
	}
	for _, v := range []any{rows, ints, strings.Repeat("x", 1<<20)} {
		data, err := s.Marshal(v)
		require.NoError(t, err)
		got := reflect.New(reflect.TypeOf(v))
		require.NoError(t, s.Unmarshal(data, got.Interface()), "%d bytes of %T", len(data), v)
		require.Equal(t, v, got.Elem().Interface())
	}
}
