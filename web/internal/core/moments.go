package core

import (
	"sync"
	"time"
	// The zone database is in the binary, so that a user's zone loads on a host without one.
	_ "time/tzdata"

	"github.com/labstack/echo/v4"
)

// Every moment a page shows says its zone (docs/page-text.md, "Moments"): it is written in the
// zone its reader chose (a user's TimeZone, UTC until they choose another) with the zone's
// abbreviation after it, "2026-03-01 14:05 CET". Moments a form reads back (finance's
// schedules) stay in UTC and say so.

// Layouts of a moment, before its zone.
const (
	ToMinute = "2006-01-02 15:04"
	ToSecond = time.DateTime
)

// zones caches the locations loaded by name: the zone database is read once per zone.
var zones sync.Map

// LoadZone is the location of an IANA zone name, or an error for a name the zone database does
// not know. "" and "UTC" are UTC.
func LoadZone(name string) (*time.Location, error) {
	if name == "" || name == "UTC" {
		return time.UTC, nil
	}
	if l, ok := zones.Load(name); ok {
		return l.(*time.Location), nil
	}
	l, err := time.LoadLocation(name)
	if err != nil {
		return nil, err
	}
	zones.Store(name, l)
	return l, nil
}

// Zone is the location the request's reader sees moments in: the signed-in user's zone, UTC
// for a visitor or a zone that no longer loads.
func Zone(c echo.Context) *time.Location {
	sess, ok := CurrentSession(c)
	if !ok {
		return time.UTC
	}
	l, err := LoadZone(sess.User.TimeZone)
	if err != nil {
		return time.UTC
	}
	return l
}

// Moment writes t to the minute in the reader's zone, with the zone: "2026-03-01 14:05 UTC".
func Moment(c echo.Context, t time.Time) string { return MomentIn(Zone(c), t, ToMinute) }

// MomentSeconds writes t to the second in the reader's zone, with the zone.
func MomentSeconds(c echo.Context, t time.Time) string { return MomentIn(Zone(c), t, ToSecond) }

// MomentIn writes t by layout in loc, followed by the zone's abbreviation (UTC, CET, CEST; an
// offset such as "+03" where the zone has none).
func MomentIn(loc *time.Location, t time.Time, layout string) string {
	return t.In(loc).Format(layout + " MST")
}
