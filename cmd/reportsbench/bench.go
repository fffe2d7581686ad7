package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpumarket/gpumarket/cmd/internal/scratchdb"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/reports"
)

// bench runs the whole benchmark; see the package comment.
func bench(ctx context.Context, o options) error {
	d, err := scratchdb.Create(ctx, "gpumarket_reportsbench_", progress)
	if err != nil {
		return err
	}
	defer d.Drop()
	now := time.Now().UTC()
	end := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC).AddDate(0, 0, 1)
	began := time.Now()
	accounts, err := seed(ctx, d, o, end)
	if err != nil {
		return err
	}
	if _, err := d.Pool.Exec(ctx, "VACUUM ANALYZE"); err != nil {
		return err
	}
	events, err := metering.CountUsageRows(ctx, d.Pool)
	if err != nil {
		return err
	}
	rollups, err := metering.SumHourly(ctx, d.Pool)
	if err != nil {
		return err
	}
	progress("seeded %d usage rows in %d rollup rows in %s", events, rollups.Rows, time.Since(began).Round(time.Second))

	svc := reports.New(d.Pool)
	q, err := reports.ParseQuery("", "", "day", now)
	if err != nil {
		return err
	}
	plans, err := svc.Plans(ctx, accounts[0], q)
	if err != nil {
		return err
	}
	for name, plan := range plans {
		if !strings.Contains(plan, "usage_hourly_account_idx") || strings.Contains(plan, "Seq Scan on usage_hourly") {
			return fmt.Errorf("the %s report does not read usage_hourly through usage_hourly_account_idx:\n%s", name, plan)
		}
		how := "an index scan"
		if strings.Contains(plan, "Index Only Scan using usage_hourly_account_idx") {
			how = "an index-only scan"
		}
		progress("the %s report reads usage_hourly through usage_hourly_account_idx, %s", name, how)
	}

	srv, addr, err := serve(svc, d, q)
	if err != nil {
		return err
	}
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}, Timeout: 10 * time.Second}
	// A short warm-up, so that neither measurement pays for cold connections and caches.
	if _, err := load(ctx, client, addr, o.rate, 2*time.Second, accounts, []string{"/savings", "/carbon", "/ping"}); err != nil {
		return err
	}
	reportLat, err := load(ctx, client, addr, o.rate, o.duration, accounts, []string{"/savings", "/carbon"})
	if err != nil {
		return err
	}
	pingLat, err := load(ctx, client, addr, o.rate, o.duration, accounts, []string{"/ping"})
	if err != nil {
		return err
	}
	rp, pp := p99(reportLat), p99(pingLat)
	progress("reports: %d requests, p50 %.2f ms; ping: %d requests, p50 %.2f ms", len(reportLat), quantile(reportLat, 0.5), len(pingLat), quantile(pingLat, 0.5))
	fmt.Printf("reports: p99 %.2f ms at %d rps over %d rows\n", rp, o.rate, events)
	fmt.Printf("baseline: p99 %.2f ms for SELECT 1 at %d rps; reports at %.1fx the baseline\n", pp, o.rate, rp/pp)
	return nil
}

// serve answers the two reports and the ping on a local port.
func serve(svc *reports.Service, d *scratchdb.Database, q reports.Query) (*http.Server, string, error) {
	mux := http.NewServeMux()
	write := func(w http.ResponseWriter, v any, err error) {
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("/savings", func(w http.ResponseWriter, r *http.Request) {
		v, err := svc.Savings(r.Context(), r.URL.Query().Get("account"), q)
		write(w, v, err)
	})
	mux.HandleFunc("/carbon", func(w http.ResponseWriter, r *http.Request) {
		v, err := svc.Carbon(r.Context(), r.URL.Query().Get("account"), q)
		write(w, v, err)
	})
	mux.HandleFunc("/ping", func(w http.ResponseWriter, r *http.Request) {
		var one int
		err := d.Pool.QueryRow(r.Context(), "SELECT 1").Scan(&one)
		write(w, map[string]int{"one": one}, err)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return srv, "http://" + ln.Addr().String(), nil
}

// load sends rate requests a second for d, open loop (each at its time, whether or not the
// ones before have answered), cycling through paths on random accounts, and returns each
// request's latency in milliseconds. Any failed request fails the run.
func load(ctx context.Context, client *http.Client, addr string, rate int, d time.Duration, accounts, paths []string) ([]float64, error) {
	n := int(d.Seconds() * float64(rate))
	interval := time.Second / time.Duration(rate)
	lat := make([]float64, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(wait):
			}
		}
		url := addr + paths[i%len(paths)] + "?account=" + accounts[rand.IntN(len(accounts))]
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.Now()
			res, err := client.Get(url)
			if err == nil {
				var body json.RawMessage
				err = json.NewDecoder(res.Body).Decode(&body)
				res.Body.Close()
				if err == nil && res.StatusCode != http.StatusOK {
					err = fmt.Errorf("%s: status %d", url, res.StatusCode)
				}
			}
			if err != nil {
				errs <- err
				return
			}
			lat[i] = float64(time.Since(t).Microseconds()) / 1000
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return lat, nil
}

func p99(ms []float64) float64 { return quantile(ms, 0.99) }

// quantile is the nearest-rank quantile of the latencies.
func quantile(ms []float64, q float64) float64 {
	s := slices.Clone(ms)
	slices.Sort(s)
	i := int(float64(len(s))*q+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}
