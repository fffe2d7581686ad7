package web

import (
	"context"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gpumarket/gpumarket/web/internal/core"
	"github.com/gpumarket/gpumarket/web/internal/httpx"
)

func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// readyz asks every dependency, each with a short deadline, and says which failed, by name.
// Why goes to the log only: an error's text can name hosts, users and paths.
func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	checks := map[string]string{}
	failed := []string{}
	for _, rc := range s.ready {
		if err := rc.Check(ctx); err != nil {
			checks[rc.Name] = "failed"
			failed = append(failed, rc.Name)
			s.core.Log.Warn("readiness check failed", "dependency", rc.Name, "err", err)
		} else {
			checks[rc.Name] = "ok"
		}
	}
	if len(failed) > 0 {
		return c.JSON(http.StatusServiceUnavailable, map[string]any{"status": "not ready", "checks": checks, "failed": failed})
	}
	return c.JSON(http.StatusOK, map[string]any{"status": "ready", "checks": checks, "failed": failed})
}

// metrics is the Prometheus handler: behind the metrics token when one is configured.
func (s *Server) metrics() http.Handler {
	s.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	h := promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{Registry: s.registry})
	if s.metricsToken == "" {
		return h
	}
	want := []byte(s.metricsToken)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(httpx.BearerToken(r)), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
			http.Error(w, "Send the metrics token as a bearer token.", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// MetricsHandler serves the Prometheus metrics, for a listener of their own
// (GPUMARKET_METRICS_ADDR): with a metrics token configured, it asks for it there too.
func (s *Server) MetricsHandler() http.Handler { return s.metricsHandler }

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

// accessLog writes one structured line per request. What a client chose (the path) is
// clipped, so that no request makes a long line.
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
		if !s.core.Log.Enabled(c.Request().Context(), level) {
			return nil // the line's attributes are not even made
		}
		s.core.Log.Log(c.Request().Context(), level, "http",
			"method", core.Clip(c.Request().Method, 16), "path", core.Clip(c.Request().URL.Path, maxLoggedPath), "route", c.Path(),
			"status", c.Response().Status, "took", time.Since(start),
			"request_id", c.Response().Header().Get(echo.HeaderXRequestID))
		return nil
	}
}

// maxLoggedPath is how much of a request's path the access log keeps.
const maxLoggedPath = 256
