package web

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// readyz asks every dependency, each with a short deadline, and says which failed.
func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	checks := map[string]string{}
	status := http.StatusOK
	for _, rc := range s.ready {
		if err := rc.Check(ctx); err != nil {
			checks[rc.Name] = err.Error()
			status = http.StatusServiceUnavailable
		} else {
			checks[rc.Name] = "ok"
		}
	}
	state := "ready"
	if status != http.StatusOK {
		state = "not ready"
	}
	return c.JSON(status, map[string]any{"status": state, "checks": checks})
}

func (s *Server) metrics() echo.HandlerFunc {
	s.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return echo.WrapHandler(promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{Registry: s.registry}))
}

type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newHTTPMetrics(reg *prometheus.Registry) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpumarket_http_requests_total", Help: "HTTP requests by route, method and status.",
		}, []string{"route", "method", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gpumarket_http_request_duration_seconds", Help: "HTTP request latency by route and method.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route", "method"}),
	}
	reg.MustRegister(m.requests, m.duration)
	return m
}

// middleware counts every request under its route pattern (never the raw path, which would
// make a metric per offering id).
func (m *httpMetrics) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		method := c.Request().Method
		m.requests.WithLabelValues(route, method, strconv.Itoa(c.Response().Status)).Inc()
		m.duration.WithLabelValues(route, method).Observe(time.Since(start).Seconds())
		return nil
	}
}

// accessLog writes one structured line per request.
func (s *Server) accessLog(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		level := slog.LevelInfo
		if c.Response().Status >= 500 {
			level = slog.LevelError
		}
		if c.Path() == "/healthz" || c.Path() == "/metrics" || c.Path() == "/static/*" {
			level = slog.LevelDebug
		}
		s.log.Log(c.Request().Context(), level, "http",
			"method", c.Request().Method, "path", c.Request().URL.Path, "route", c.Path(),
			"status", c.Response().Status, "took", time.Since(start),
			"request_id", c.Response().Header().Get(echo.HeaderXRequestID))
		return nil
	}
}
