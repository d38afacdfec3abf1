package gqlstream

import (
	"encoding"
	"encoding/json"
	"reflect"
	"sync"
)

// wsMessage is one of gqlgen's protocol messages.
type wsMessage struct {
	payload []byte
	id, typ string
}

// protocolFields reads one of gqlgen's protocol messages (see isProtocolMessage).
func protocolFields(v any) (wsMessage, bool) {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct || !isProtocolMessage(rv.Type()) {
		return wsMessage{}, false
	}
	typ := rv.Field(2)
	text := typ.String()
	if tm, ok := typ.Interface().(encoding.TextMarshaler); ok {
		b, err := tm.MarshalText()
		if err != nil {
			return wsMessage{}, false
		}
		text = string(b)
	}
	return wsMessage{payload: rv.Field(0).Bytes(), id: rv.Field(1).String(), typ: text}, true
}

var protocolMessages sync.Map // reflect.Type -> bool

// isProtocolMessage reports whether t is shaped like gqlgen's websocket messages: Payload json.RawMessage
// `json:"payload,omitempty"`, ID string `json:"id,omitempty"`, Type (a string kind) `json:"type"`, then only
// unexported fields.
func isProtocolMessage(t reflect.Type) bool {
	if v, ok := protocolMessages.Load(t); ok {
		return v.(bool)
	}
	ok := t.NumField() >= 3 &&
		t.Field(0).Type == reflect.TypeFor[json.RawMessage]() && t.Field(0).Tag.Get("json") == "payload,omitempty" &&
		t.Field(1).Type.Kind() == reflect.String && t.Field(1).Tag.Get("json") == "id,omitempty" &&
		t.Field(2).Type.Kind() == reflect.String && t.Field(2).Tag.Get("json") == "type" &&
		!t.Field(2).Type.Implements(reflect.TypeFor[json.Marshaler]())
	for i := 3; ok && i < t.NumField(); i++ {
		ok = !t.Field(i).IsExported()
	}
	protocolMessages.Store(t, ok)
	return ok
}

func appendJSONString(buf []byte, s string) []byte {
	b, _ := json.Marshal(s)
	return append(buf, b...)
}

// appendProtocolMessage appends {"payload":...,"id":...,"type":...} (payload and id only when set), the way
// encoding/json writes gqlgen's message structs.
func appendProtocolMessage(buf, payload []byte, id, typ string) []byte {
	buf = append(buf, '{')
	if len(payload) > 0 {
		buf = append(buf, `"payload":`...)
		buf = append(buf, payload...)
		buf = append(buf, ',')
	}
	if id != "" {
		buf = append(buf, `"id":`...)
		buf = appendJSONString(buf, id)
		buf = append(buf, ',')
	}
	buf = append(buf, `"type":`...)
	buf = appendJSONString(buf, typ)
	return append(buf, '}')
}
