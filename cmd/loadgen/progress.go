package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gpumarket/gpumarket/cmd/loadgen/load"
)

// isTerminal reports whether f is a character device, where a progress bar can redraw itself.
// golang.org/x/term would say it more precisely, but it is not a dependency of the module.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progressBar redraws one line: requests finished out of those asked, sent, failed, time.
type progressBar struct {
	w     io.Writer
	drawn bool
}

const barWidth = 30

// draw redraws the bar; load.Run calls it from one goroutine.
func (b *progressBar) draw(p load.Progress) {
	done := p.Completed + p.Failed
	filled := barWidth * done / max(p.Requests, 1)
	fmt.Fprintf(b.w, "\r[%s%s] %d/%d done, %d sent, %d failed, %.1f s\033[K",
		strings.Repeat("=", filled), strings.Repeat(" ", barWidth-filled),
		done, p.Requests, p.Sent, p.Failed, p.Elapsed.Seconds())
	b.drawn = true
}

// finish ends the bar's line, leaving its last state on screen. A nil bar does nothing.
func (b *progressBar) finish() {
	if b != nil && b.drawn {
		fmt.Fprintln(b.w)
	}
}
