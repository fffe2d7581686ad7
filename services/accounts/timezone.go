package accounts

import (
	"context"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/services"
)

// SetTimeZone sets the IANA zone the pages write the user's moments in (docs/page-text.md). The
// name must be one the zone database knows ("Europe/Oslo", "America/New_York", "UTC"); "Local"
// is refused, as it would mean the server's zone.
func (s *Service) SetTimeZone(ctx context.Context, userID, zone string) (err error) {
	defer services.Wrap(&err, "accounts.SetTimeZone(%s)", userID)
	zone = strings.TrimSpace(zone)
	if zone == "" {
		zone = "UTC"
	}
	if _, lerr := time.LoadLocation(zone); lerr != nil || zone == "Local" || len(zone) > 64 {
		return &services.Error{Code: services.CodeInvalid, Message: "Unknown time zone.",
			Fields: map[string]string{"time_zone": "Choose a zone such as UTC, Europe/Oslo or America/New_York."}}
	}
	tag, err := s.pool.Exec(ctx, `UPDATE users SET time_zone = $2 WHERE id = $1`, userID, zone)
	if isInvalidText(err) || (err == nil && tag.RowsAffected() == 0) {
		return services.Errorf(services.CodeNotFound, "No such user.")
	}
	return err
}
