package main

import (
	"cmp"
	"log/slog"
	"path/filepath"

	"github.com/gpumarket/gpumarket/services/downloads"
)

// agentDownloads is the shelf of the agent's binaries this process publishes at /downloads/, hashed now so that
// the first Connect page does not wait for it, and logged: an operator sees at start which architectures a
// provider can download (docs/agent-distribution.md).
func agentDownloads(cfg Config, log *slog.Logger) (*downloads.Shelf, error) {
	shelf := downloads.New(cmp.Or(cfg.DownloadsDir, filepath.Join(cfg.DataDir, "downloads")))
	if !cfg.Roles.Web {
		return shelf, nil
	}
	bins, err := shelf.Published()
	if err != nil {
		return nil, err
	}
	if len(bins) == 0 {
		log.Warn("no agent binaries to publish at /downloads/: the Connect page shows providers how to build the agent "+
			"instead; put gpuagent-linux-amd64 and gpuagent-linux-arm64 there (GPUMARKET_DOWNLOADS_DIR)", "dir", shelf.Dir())
		return shelf, nil
	}
	for _, b := range bins {
		log.Info("publishing the agent at /downloads/", "file", b.Name, "sha256", b.SHA256, "dir", shelf.Dir())
	}
	return shelf, nil
}
