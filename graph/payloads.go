package graph

import (
	"context"
	"strconv"
)

// PayloadHolder is the websocket connection a subscription's responses are written to, when it can write the
// bytes of a response's data itself: Hold keeps them and returns a token, which the response carries as its data
// (a JSON number, which no GraphQL data is), and the connection's writer puts the held bytes back in place of it.
// The transport marshals every response with encoding/json, as gqlgen's does, which validates and compacts the
// data again for each subscriber; a token costs nothing to marshal. The data bytes are already compact and HTML-escaped as
// encoding/json would leave them (renderShared), so the message is byte for byte what gqlgen would have sent.
//
// The held bytes belong to the subscription until the writer takes them: the transport writes each response before it
// asks for the next one, in the same goroutine.
type PayloadHolder interface {
	Hold(data []byte) (token uint64)
}

type payloadHolderKey struct{}

// WithPayloadHolder returns ctx whose subscriptions hand their topUpdates data to h.
func WithPayloadHolder(ctx context.Context, h PayloadHolder) context.Context {
	return context.WithValue(ctx, payloadHolderKey{}, h)
}

func payloadHolderFrom(ctx context.Context) PayloadHolder {
	h, _ := ctx.Value(payloadHolderKey{}).(PayloadHolder)
	return h
}

// heldData returns the data a response carries for bytes given to h.
func heldData(h PayloadHolder, data []byte) []byte {
	return strconv.AppendUint(nil, h.Hold(data), 10)
}
