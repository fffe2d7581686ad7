package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Config is everything the platform reads from its environment. Secrets come only from here.
type Config struct {
	DatabaseURL string
	NATSURL     string
	Addr        string
	DataDir     string
	NATSPort    int
	SessionKey  []byte
}

func configFromEnv() (Config, error) {
	c := Config{
		DatabaseURL: os.Getenv("DATABASE_URL"),
		NATSURL:     os.Getenv("NATS_URL"),
		Addr:        envOr("GPUMARKET_ADDR", ":8080"),
		DataDir:     envOr("GPUMARKET_DATA_DIR", ".data"),
		NATSPort:    4222,
		SessionKey:  []byte(os.Getenv("GPUMARKET_SESSION_KEY")),
	}
	if v := os.Getenv("GPUMARKET_NATS_PORT"); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil || p < 0 || p > 65535 {
			return c, fmt.Errorf("GPUMARKET_NATS_PORT=%q is not a port number", v)
		}
		c.NATSPort = p
	}
	abs, err := filepath.Abs(c.DataDir)
	if err != nil {
		return c, err
	}
	c.DataDir = abs
	return c, nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func (c Config) requireServe() error {
	var missing []string
	if c.DatabaseURL == "" {
		missing = append(missing, "DATABASE_URL")
	}
	if len(c.SessionKey) < 32 {
		missing = append(missing, "GPUMARKET_SESSION_KEY (at least 32 bytes)")
	}
	if len(missing) > 0 {
		return errors.New("set " + strings.Join(missing, " and ") + "; or run `gpumarket dev` (make run) for a local platform")
	}
	return nil
}

// devSessionKey reads the development session key from the data directory, making one the
// first time, so that sessions survive a restart of `make run`. Production sets
// GPUMARKET_SESSION_KEY instead.
func devSessionKey(dataDir string) ([]byte, error) {
	path := filepath.Join(dataDir, "session.key")
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) >= 32 {
		return []byte(strings.TrimSpace(string(b))), nil
	}
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return nil, err
	}
	key := hex.EncodeToString(buf)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		return nil, err
	}
	return []byte(key), nil
}
