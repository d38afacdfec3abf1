package gqlhttp

import (
	"encoding/json"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonReader reads JSON values from b, as encoding/json decodes them into interface values with UseNumber.
type jsonReader struct {
	b     []byte
	i     int
	depth int // objects and arrays open
}

// maxJSONDepth bounds the nesting it reads (variables of the hot operations nest two or three levels; encoding/json
// allows 10,000).
const maxJSONDepth = 32

func (d *jsonReader) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// byte consumes c if it is next.
func (d *jsonReader) byte(c byte) bool {
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

func (d *jsonReader) literal(s string) bool {
	if len(d.b)-d.i >= len(s) && string(d.b[d.i:d.i+len(s)]) == s {
		d.i += len(s)
		return true
	}
	return false
}

func (d *jsonReader) null() bool { return d.literal("null") }

// value reads any value; the reader is at its first byte.
func (d *jsonReader) value() (any, bool) {
	if d.i >= len(d.b) {
		return nil, false
	}
	switch c := d.b[d.i]; {
	case c == '{':
		return d.object()
	case c == '[':
		return d.array()
	case c == '"':
		return d.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	case d.literal("true"):
		return true, true
	case d.literal("false"):
		return false, true
	case d.literal("null"):
		return nil, true
	}
	return nil, false
}

// object reads an object into a map; a key given twice is refused (see FastBodyParams).
func (d *jsonReader) object() (map[string]any, bool) {
	m := map[string]any{}
	ok := d.members(func(k string) bool {
		if _, dup := m[k]; dup {
			return false
		}
		v, ok := d.value()
		m[k] = v
		return ok
	})
	return m, ok
}

// members reads an object, calling value for each key with the reader at the member's value, which value reads;
// false from value, or anything not JSON's, ends it with false.
func (d *jsonReader) members(value func(key string) bool) bool {
	if d.depth >= maxJSONDepth || !d.byte('{') {
		return false
	}
	d.depth++
	defer func() { d.depth-- }()
	d.space()
	if d.byte('}') {
		return true
	}
	for {
		d.space()
		k, ok := d.str()
		if !ok {
			return false
		}
		d.space()
		if !d.byte(':') {
			return false
		}
		d.space()
		if !value(k) {
			return false
		}
		d.space()
		if d.byte('}') {
			return true
		}
		if !d.byte(',') {
			return false
		}
	}
}

func (d *jsonReader) array() ([]any, bool) {
	if d.depth >= maxJSONDepth || !d.byte('[') {
		return nil, false
	}
	d.depth++
	defer func() { d.depth-- }()
	a := []any{}
	d.space()
	if d.byte(']') {
		return a, true
	}
	for {
		d.space()
		v, ok := d.value()
		if !ok {
			return nil, false
		}
		a = append(a, v)
		d.space()
		if d.byte(']') {
			return a, true
		}
		if !d.byte(',') {
			return nil, false
		}
	}
}

// number reads a number of JSON's grammar as its text.
func (d *jsonReader) number() (json.Number, bool) {
	start := d.i
	d.byte('-')
	switch {
	case d.byte('0'):
	case d.i < len(d.b) && d.b[d.i] >= '1' && d.b[d.i] <= '9':
		d.digits()
	default:
		return "", false
	}
	if d.byte('.') && !d.digits() {
		return "", false
	}
	if d.byte('e') || d.byte('E') {
		if !d.byte('+') {
			d.byte('-')
		}
		if !d.digits() {
			return "", false
		}
	}
	return json.Number(d.b[start:d.i]), true
}

// digits reads one or more digits.
func (d *jsonReader) digits() bool {
	start := d.i
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		d.i++
	}
	return d.i > start
}

// str reads a string. Text that is not valid UTF-8, and \u escapes of lone surrogates, are refused (encoding/json
// turns both into U+FFFD; the server's body check refuses them before).
func (d *jsonReader) str() (string, bool) {
	if !d.byte('"') {
		return "", false
	}
	start := d.i
	for d.i < len(d.b) { // the common case: no escapes
		c := d.b[d.i]
		if c == '"' {
			s := d.b[start:d.i]
			d.i++
			if !utf8.Valid(s) {
				return "", false
			}
			return string(s), true
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", false
		}
		d.i++
	}
	buf := append([]byte(nil), d.b[start:d.i]...)
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			if !utf8.Valid(buf) {
				return "", false
			}
			return string(buf), true
		case c < 0x20:
			return "", false
		case c != '\\':
			buf = append(buf, c)
			d.i++
			continue
		}
		if d.i+1 >= len(d.b) {
			return "", false
		}
		e := d.b[d.i+1]
		d.i += 2
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := d.hex4()
			if !ok {
				return "", false
			}
			if utf16.IsSurrogate(r) {
				if r >= 0xDC00 || !d.literal(`\u`) {
					return "", false
				}
				r2, ok := d.hex4()
				if !ok {
					return "", false
				}
				if r = utf16.DecodeRune(r, r2); r == utf8.RuneError {
					return "", false
				}
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", false
		}
	}
	return "", false
}

func (d *jsonReader) hex4() (rune, bool) {
	if len(d.b)-d.i < 4 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(d.b[d.i:d.i+4]), 16, 16)
	if err != nil {
		return 0, false
	}
	d.i += 4
	return rune(n), true
}
