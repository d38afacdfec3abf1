package main

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The new server's own figures, read from its /metrics.

// serverGauges reads go_goroutines and go_memstats_heap_inuse_bytes from the new server's /metrics.
func (e *env) serverGauges(ctx context.Context) (goroutines, heap float64, err error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.newSvc().addr+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "go_goroutines "); ok {
			goroutines, _ = strconv.ParseFloat(v, 64)
		}
		if v, ok := strings.CutPrefix(line, "go_memstats_heap_inuse_bytes "); ok {
			heap, _ = strconv.ParseFloat(v, 64)
		}
	}
	return goroutines, heap, sc.Err()
}

// serverGauge reads one unlabelled gauge of the new server's /metrics.
func (e *env) serverGauge(ctx context.Context, name string) (float64, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.newSvc().addr+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("%s: not in /metrics (%v)", name, sc.Err())
}

// serverBuckets reads the cumulative buckets (upper bound in seconds -> count) of a histogram series from the
// servers' /metrics, summed, the series named by its metric name and label text (`route="graphql"`).
func serverBuckets(ctx context.Context, servers []*service, name, labels string) (map[float64]float64, error) {
	out := map[float64]float64{}
	for _, sv := range servers {
		if err := addBuckets(ctx, sv.addr, name, labels, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func addBuckets(ctx context.Context, addr, name, labels string, out map[float64]float64) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	prefix := name + "_bucket{" + labels + ",le=\""
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), prefix)
		if !ok {
			continue
		}
		le, count, ok := strings.Cut(rest, "\"} ")
		if !ok {
			continue
		}
		bound, err1 := strconv.ParseFloat(le, 64) // "+Inf" parses as +Inf
		n, err2 := strconv.ParseFloat(count, 64)
		if err1 == nil && err2 == nil {
			out[bound] += n
		}
	}
	return sc.Err()
}

// bucketQuantile returns the upper bound of the bucket that holds quantile q of the observations between two
// readings of cumulative buckets (0 when there were none).
func bucketQuantile(before, after map[float64]float64, q float64) time.Duration {
	bounds := make([]float64, 0, len(after))
	for b := range after {
		bounds = append(bounds, b)
	}
	sort.Float64s(bounds)
	if len(bounds) == 0 {
		return 0
	}
	total := after[bounds[len(bounds)-1]] - before[bounds[len(bounds)-1]]
	if total <= 0 {
		return 0
	}
	for _, b := range bounds {
		if after[b]-before[b] >= q*total {
			if math.IsInf(b, 1) {
				return -1 // beyond the largest finite bucket
			}
			return time.Duration(b * float64(time.Second))
		}
	}
	return -1
}
