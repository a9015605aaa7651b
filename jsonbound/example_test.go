package jsonbound_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/skillreg/skillreg/jsonbound"
)

// A handler checks a body it already holds before decoding it.
func ExampleCheck() {
	ok := []byte(`{"method":"skills/list","params":{"cursor":""}}`)
	deep := []byte(strings.Repeat("[", 2_000_000))
	fmt.Println(jsonbound.Check(ok, jsonbound.Limits{}))
	err := jsonbound.Check(deep, jsonbound.Limits{})
	fmt.Println(errors.Is(err, jsonbound.ErrTooDeep), err)
	err = jsonbound.Check([]byte(`[1,2,3,4,5]`), jsonbound.Limits{MaxTokens: 3})
	fmt.Println(errors.Is(err, jsonbound.ErrTooManyTokens))
	// Output:
	// <nil>
	// true json nested too deeply: more than 1000 levels
	// true
}

// A streaming decoder reads through Reader, so it stops at the bound
// before it recurses past it.
func ExampleReader() {
	body := strings.NewReader(`{"a":{"b":{"c":{}}}}`)
	var v any
	err := json.NewDecoder(jsonbound.Reader(body, jsonbound.Limits{MaxDepth: 2})).Decode(&v)
	fmt.Println(errors.Is(err, jsonbound.ErrTooDeep))
	// Output:
	// true
}

// Scanner is an io.Writer, so it can watch bytes as they are copied
// elsewhere, and tells how deep the document went.
func ExampleScanner() {
	var s jsonbound.Scanner
	if _, err := io.Copy(&s, strings.NewReader(`{"skills":[{"name":"lint","tags":["go"]}]}`)); err != nil {
		panic(err)
	}
	fmt.Println(s.MaxDepth())
	// Output:
	// 4
}
