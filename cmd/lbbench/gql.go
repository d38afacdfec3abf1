package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// gqlClient posts GraphQL requests to the server over keep-alive connections, one per concurrent caller.
type gqlClient struct {
	url string
	hc  *http.Client
}

func newGQLClient(url string) *gqlClient {
	tr := &http.Transport{MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096, IdleConnTimeout: time.Minute,
		DisableCompression: true}
	return &gqlClient{url: url, hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// post sends a request body ({"query":..., "variables":...}) with the given key (empty: none) and returns the
// response body. A non-200 status or a response with GraphQL errors is an error.
func (c *gqlClient) post(ctx context.Context, key string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return data, fmt.Errorf("HTTP %d: %s", resp.StatusCode, truncate(string(data), 200))
	}
	// Cheap check first: the load generator shares the machine, so it decodes only what it must.
	if bytes.Contains(data, []byte(`"errors"`)) {
		var r struct {
			Errors []struct {
				Message    string         `json:"message"`
				Extensions map[string]any `json:"extensions"`
			} `json:"errors"`
		}
		if json.Unmarshal(data, &r) == nil && len(r.Errors) > 0 {
			return data, fmt.Errorf("%v: %s (%d errors)", r.Errors[0].Extensions["code"], r.Errors[0].Message,
				len(r.Errors))
		}
	}
	return data, nil
}

// query posts a query with variables (marshalled with encoding/json) and decodes data into out (nil: skip).
func (c *gqlClient) query(ctx context.Context, key, query string, vars map[string]any, out any) error {
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		return err
	}
	data, err := c.post(ctx, key, body)
	if err != nil || out == nil {
		return err
	}
	var r struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return err
	}
	return json.Unmarshal(r.Data, out)
}

// scoreInput appends one ScoreInput object as JSON: the submit steps build bodies by hand because
// encoding/json of a map per request would cost the shared CPU more than the server's own parsing.
func scoreInput(b []byte, board, player string, score float64) []byte {
	b = append(b, `{"board":`...)
	b = strconv.AppendQuote(b, board)
	b = append(b, `,"playerId":`...)
	b = strconv.AppendQuote(b, player)
	b = append(b, `,"score":`...)
	b = strconv.AppendFloat(b, score, 'f', -1, 64)
	return append(b, '}')
}

// request wraps a query and raw variables JSON into a request body.
func request(query string, vars []byte) []byte {
	b := make([]byte, 0, len(query)+len(vars)+32)
	b = append(b, `{"query":`...)
	b = strconv.AppendQuote(b, query)
	b = append(b, `,"variables":`...)
	b = append(b, vars...)
	return append(b, '}')
}
