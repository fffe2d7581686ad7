// Package devenv provides the PostgreSQL that `make run` and `make test` use on a developer's machine or in CI,
// so that a fresh Debian or Ubuntu machine needs no manual setup.
//
// It owns the choice of server, made in this order and logged so the developer can tell which one is in use:
//
//  1. DATABASE_URL, when set (the caller passes it in), is used as it is: nothing is created or started.
//  2. A server on 127.0.0.1:5432 that accepts user postgres without a password (trust authentication).
//  3. A private cluster under <dataDir>/postgres, run from the system's PostgreSQL binaries (installed with
//     apt-get when there are none) on 127.0.0.1, port 5433 or the next free one. It keeps running after the
//     process exits and is reused by the next run; the log says how to stop it.
//
// In cases 2 and 3 the database that the caller asked for is created when missing. Production never goes through
// this package: it sets DATABASE_URL.
package devenv

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
)

// Database names that the two entry points ensure.
const (
	appDatabase   = "gpumarket"
	adminDatabase = "postgres"
)

// EnsurePostgres finds or provides the PostgreSQL that `make run` uses and returns the URL of database gpumarket
// on it. databaseURL (the platform's DATABASE_URL), when set, is used as it is; dataDir holds the private
// cluster, when one is needed.
func EnsurePostgres(ctx context.Context, databaseURL, dataDir string, log *slog.Logger) (url string, err error) {
	return ensurePostgres(ctx, databaseURL, dataDir, appDatabase, log)
}

// EnsureTestPostgres finds or provides a PostgreSQL the same way as EnsurePostgres, but returns the URL of the
// admin database postgres, through which tests create a fresh database per package.
func EnsureTestPostgres(ctx context.Context, databaseURL, dataDir string, log *slog.Logger) (url string, err error) {
	return ensurePostgres(ctx, databaseURL, dataDir, adminDatabase, log)
}

func ensurePostgres(ctx context.Context, databaseURL, dataDir, database string, log *slog.Logger) (_ string, err error) {
	defer wrap(&err, "devenv: ensure PostgreSQL database %s", database)

	if databaseURL != "" {
		log.Info("PostgreSQL: using DATABASE_URL as it is", "url", redacted(databaseURL))
		return databaseURL, nil
	}

	port := localPort
	if probeErr := probe(ctx, localPort); probeErr != nil {
		log.Info("PostgreSQL: no server on 127.0.0.1:5432 lets user postgres in without a password; "+
			"using a private cluster instead", "reason", probeErr)
		if port, err = startPrivateCluster(ctx, dataDir, log); err != nil {
			return "", err
		}
	}

	created, err := ensureDatabase(ctx, port, database)
	if err != nil {
		return "", err
	}
	u := serverURL(port, database)
	log.Info("PostgreSQL: ready", "url", u, "database_created", created)
	return u, nil
}

// redacted returns a DATABASE_URL fit for a log line: without its password, or not at all when it is in the
// keyword/value form, which may carry one anywhere.
func redacted(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		return "(set, in keyword/value form: not shown)"
	}
	return u.Redacted()
}

// wrap prefixes a non-nil *errp with the operation it went through.
func wrap(errp *error, format string, args ...any) {
	if *errp != nil {
		*errp = fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), *errp)
	}
}
