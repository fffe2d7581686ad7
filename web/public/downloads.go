package public

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/deploy"
	"github.com/gpumarket/gpumarket/services/downloads"
)

// /downloads/: what a provider fetches onto a rig, public and without a login (docs/agent-distribution.md):
// gpuagent's binaries (package downloads), their SHA256SUMS, and the systemd unit that runs the agent. Only these
// names are served; there is no listing, and no part of a request's path reaches the file system.
//
// Every answer carries its hash as ETag and Cache-Control: no-cache, so a cache may keep a binary but asks each
// time whether it is still the one published: a new agent on the platform is what the next download gets, and
// what SHA256SUMS and the Connect page name.

func (s *Server) download(c echo.Context) error {
	name := c.Param("name")
	switch name {
	case downloads.SumsName:
		bins, err := s.publishedAgents()
		if err != nil {
			return err
		}
		if len(bins) == 0 {
			return notPublished(c, "The agent's binaries are not available for download on this server: its operator has not published them.")
		}
		return serveText(c, name, "", downloads.Sums(bins))
	case deploy.AgentUnitName:
		return serveText(c, name, "inline", deploy.AgentUnit)
	}
	arch, ok := downloads.ArchOf(name)
	if !ok {
		return notPublished(c, "There is no download of that name. This server publishes "+strings.Join(publishedNames(), ", ")+".")
	}
	if s.downloads == nil {
		return notPublished(c, name+" is not available for download on this server: its operator has not published it.")
	}
	f, bin, err := s.downloads.Open(arch)
	if errors.Is(err, downloads.ErrNotPublished) {
		return notPublished(c, name+" is not available for download on this server: its operator has not published it.")
	}
	if err != nil {
		return err
	}
	defer f.Close()
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, "application/octet-stream")
	h.Set(echo.HeaderContentDisposition, `attachment; filename="`+name+`"`)
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", `"`+bin.SHA256+`"`)
	http.ServeContent(c.Response(), c.Request(), name, bin.ModTime, f)
	return nil
}

// publishedAgents are the agent's binaries this server publishes; none without a downloads directory.
func (s *Server) publishedAgents() ([]downloads.Binary, error) {
	if s.downloads == nil {
		return nil, nil
	}
	return s.downloads.Published()
}

// serveText answers a small text file, with the given Content-Disposition ("" for none).
func serveText(c echo.Context, name, disposition, body string) error {
	sum := sha256.Sum256([]byte(body))
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, "text/plain; charset=utf-8")
	if disposition != "" {
		h.Set(echo.HeaderContentDisposition, disposition+`; filename="`+name+`"`)
	}
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
	http.ServeContent(c.Response(), c.Request(), name, time.Time{}, strings.NewReader(body))
	return nil
}

// notPublished is a plain 404 that a person reading curl's output understands.
func notPublished(c echo.Context, msg string) error {
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.String(http.StatusNotFound, msg+"\n")
}

// publishedNames are the names /downloads/ may serve.
func publishedNames() []string {
	var names []string
	for _, arch := range downloads.Arches {
		names = append(names, downloads.AgentName(arch))
	}
	return append(names, downloads.SumsName, deploy.AgentUnitName)
}
