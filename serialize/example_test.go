package serialize_test

import (
	"errors"
	"fmt"

	"github.com/minidubbo/minidubbo/serialize"
)

// A value of the wrong kind names what came, what the type takes and
// where: here a person's age sent as a string.
func ExampleTypeError() {
	type person struct {
		Name string `msgpack:"name"`
		Age  int    `msgpack:"age"`
	}
	s := serialize.NewMsgpack()
	data, err := s.Marshal(map[string]any{"name": "Ann", "age": "forty"})
	if err != nil {
		panic(err)
	}
	var p person
	err = s.Unmarshal(data, &p)
	fmt.Println(err)

	var te *serialize.TypeError
	if errors.As(err, &te) {
		fmt.Printf("at %q: %s; the type wants %s\n", te.Path, te.Got, te.Want)
	}
	// Output:
	// serialize: age: got a string ("forty"), expected an integer (int)
	// at "age": a string ("forty"); the type wants an integer
}
