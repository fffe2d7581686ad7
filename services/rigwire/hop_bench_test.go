package rigwire_test

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/rigwire"
)

// BenchmarkHop measures the hop alone: the same small handler called over rigwire (caller, embedded NATS server,
// the agent's connection) and over a loopback HTTP/1.1 keep-alive connection, with Poisson arrivals at
// hopRate a second, in alternating segments of hopSegment calls so that both meet the machine as it is. b.N is
// the calls on each path (make bench-rigwire runs 6,000). It reports each path's p50 and p99 in microseconds
// and the ratio of the p50s: what a call over NATS costs against the HTTP client the gateway used before,
// without the rest of the platform around it (make bench-gateway measures that).
func BenchmarkHop(b *testing.B) {
	const (
		hopRate    = 1000
		hopSegment = 500
	)
	w := newWorld(b)
	answer := []byte(`{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant",` +
		`"content":"hello there"},"finish_reason":"length"}],"usage":{"prompt_tokens":16,"completion_tokens":8}}`)
	h := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		rw.Header().Set("Content-Type", "application/json")
		_, _ = rw.Write(answer)
	})
	w.rig(b, "p1", "p1-o1", h, rigwire.Options{Log: quiet})
	caller := w.caller(b, rigwire.Options{Log: quiet})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{Handler: h}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()

	body := bytes.Repeat([]byte("x"), 400)
	header := http.Header{"Content-Type": {"application/json"}}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	url := "http://" + ln.Addr().String() + "/v1/chat/completions"
	paths := []struct {
		name string
		call func(context.Context) error
	}{
		{"http", func(ctx context.Context) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
			if err != nil {
				return err
			}
			req.Header = header.Clone()
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return err
		}},
		{"nats", func(ctx context.Context) error {
			resp, err := caller.Call(ctx, "p1", "p1-o1", "/v1/chat/completions", header.Clone(), body)
			if err != nil {
				return err
			}
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return err
		}},
	}
	segment := func(call func(context.Context) error, n int) []time.Duration {
		var mu sync.Mutex
		var wg sync.WaitGroup
		lat := make([]time.Duration, 0, n)
		next := time.Now()
		for range n {
			next = next.Add(time.Duration(rand.ExpFloat64() * float64(time.Second) / hopRate))
			time.Sleep(time.Until(next))
			wg.Go(func() {
				start := time.Now()
				if err := call(b.Context()); err != nil {
					b.Error(err)
					return
				}
				d := time.Since(start)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			})
		}
		wg.Wait()
		return lat
	}
	for _, p := range paths { // warm up: connections, buffers
		segment(p.call, hopSegment)
	}
	b.ResetTimer()
	results := make([][]time.Duration, len(paths))
	for done := 0; done < b.N; done += hopSegment {
		n := min(hopSegment, b.N-done)
		for i, p := range paths {
			results[i] = append(results[i], segment(p.call, n)...)
		}
	}
	b.StopTimer()
	p50 := make([]float64, len(paths))
	for i, p := range paths {
		lat := results[i]
		if len(lat) == 0 {
			b.Fatalf("%s: no call completed", p.name)
		}
		slices.Sort(lat)
		p50[i] = float64(lat[len(lat)/2].Microseconds())
		b.ReportMetric(p50[i], p.name+"-p50-us")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), p.name+"-p99-us")
	}
	b.ReportMetric(p50[1]/p50[0], "nats/http-p50")
	b.ReportMetric(0, "ns/op")
}
