package devenv

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/testlog"

	"github.com/jackc/pgx/v5"
)

func TestDatabaseURLIsUsedAsItIs(t *testing.T) {
	const dbURL = "postgres://app:s3cret@db.example.com:5432/prod?sslmode=require"
	for name, ensure := range map[string]func(context.Context, string, string, *slog.Logger) (string, error){
		"EnsurePostgres":     EnsurePostgres,
		"EnsureTestPostgres": EnsureTestPostgres,
	} {
		t.Run(name, func(t *testing.T) {
			log, logs := testLogger(t)
			dataDir := t.TempDir()

			got, err := ensure(t.Context(), dbURL, dataDir, log)
			if err != nil {
				t.Fatal(err)
			}
			if got != dbURL {
				t.Errorf("url = %q, want DATABASE_URL %q", got, dbURL)
			}
			if entries, _ := os.ReadDir(dataDir); len(entries) != 0 {
				t.Errorf("dataDir has %d entries, want none: nothing is created when DATABASE_URL is set", len(entries))
			}
			if strings.Contains(logs.String(), "s3cret") {
				t.Errorf("the log shows the password:\n%s", logs)
			}
			if !strings.Contains(logs.String(), "db.example.com") {
				t.Errorf("the log does not say which server is used:\n%s", logs)
			}
		})
	}
}

func TestFreePortSkipsATakenPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	takenPort := taken.Addr().(*net.TCPAddr).Port

	port, err := freePort("127.0.0.1", takenPort)
	if err != nil {
		t.Fatal(err)
	}
	if port <= takenPort {
		t.Fatalf("freePort(%d) = %d, want a port above the taken one", takenPort, port)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("port %d from freePort cannot be listened on: %v", port, err)
	}
	ln.Close()
}

func TestFindBinDirPicksTheVersion(t *testing.T) {
	root := t.TempDir()
	for _, v := range []string{"9.6", "13", "15"} {
		bin := filepath.Join(root, v, "bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bin, "initdb"), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A version directory without initdb (only the client, say) does not count.
	if err := os.MkdirAll(filepath.Join(root, "16", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		version     string
		wantVersion string
		wantErr     string
	}{
		{version: "", wantVersion: "15"},
		{version: "13", wantVersion: "13"},
		{version: "9.6", wantVersion: "9.6"},
		{version: "16", wantErr: "install package postgresql-16"},
	}
	for _, tt := range tests {
		dir, found, err := findBinDir(root, tt.version)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("findBinDir(%q) error = %v, want one that says %q", tt.version, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("findBinDir(%q): %v", tt.version, err)
			continue
		}
		if want := filepath.Join(root, tt.wantVersion, "bin"); dir != want || found != tt.wantVersion {
			t.Errorf("findBinDir(%q) = %s, %s; want %s, %s", tt.version, dir, found, want, tt.wantVersion)
		}
	}

	if _, _, err := findBinDir(t.TempDir(), ""); err == nil || !strings.Contains(err.Error(), errNoPostgres.Error()) {
		t.Errorf("findBinDir(empty root) error = %v, want %v", err, errNoPostgres)
	}
}

func TestLocalServerGetsTheDatabase(t *testing.T) {
	if err := probe(t.Context(), localPort); err != nil {
		t.Skipf("no PostgreSQL on 127.0.0.1:5432 lets user postgres in without a password, so the local-server "+
			"path cannot be tested here: %v", err)
	}

	t.Run("creates a missing database once", func(t *testing.T) {
		name := fmt.Sprintf("devenv_test_%d", os.Getpid())
		dropDatabase(t, localPort, name)
		t.Cleanup(func() { dropDatabase(t, localPort, name) })

		created, err := ensureDatabase(t.Context(), localPort, name)
		if err != nil || !created {
			t.Fatalf("first ensureDatabase = %v, %v; want created", created, err)
		}
		created, err = ensureDatabase(t.Context(), localPort, name)
		if err != nil || created {
			t.Fatalf("second ensureDatabase = %v, %v; want it found, not created", created, err)
		}
		assertDatabase(t, serverURL(localPort, name), name)
	})

	for _, tt := range []struct {
		ensure   func(context.Context, string, string, *slog.Logger) (string, error)
		database string
	}{
		{EnsurePostgres, "gpumarket"},
		{EnsureTestPostgres, "postgres"},
	} {
		t.Run(tt.database, func(t *testing.T) {
			log, _ := testLogger(t)
			dataDir := t.TempDir()
			got, err := tt.ensure(t.Context(), "", dataDir, log)
			if err != nil {
				t.Fatal(err)
			}
			if want := serverURL(localPort, tt.database); got != want {
				t.Errorf("url = %q, want %q", got, want)
			}
			assertDatabase(t, got, tt.database)
			if entries, _ := os.ReadDir(dataDir); len(entries) != 0 {
				t.Errorf("dataDir has %d entries, want none: the local server needs no private cluster", len(entries))
			}
		})
	}
}

// TestPrivateClusterStartsAndIsReused runs the path a fresh machine takes, from installed binaries on: it never
// installs PostgreSQL.
func TestPrivateClusterStartsAndIsReused(t *testing.T) {
	if testing.Short() {
		t.Skip("initialising a cluster takes seconds")
	}
	if _, _, err := findBinDir(pgLibDir, ""); err != nil {
		t.Skipf("tests do not install PostgreSQL: %v", err)
	}
	if os.Geteuid() == 0 {
		if _, err := user.Lookup(superuser); err != nil {
			t.Skipf("running as root needs system user %s: %v", superuser, err)
		}
	}
	log, logs := testLogger(t)
	dataDir := t.TempDir()
	// As root, the cluster runs as user postgres, which must reach it; t.TempDir makes its directory and the one
	// above for its user only.
	for _, dir := range []string{filepath.Dir(dataDir), dataDir} {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	port, err := startPrivateCluster(ctx, dataDir, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopCluster(t, dataDir) })
	if port < privatePort {
		t.Errorf("port = %d, want %d or above", port, privatePort)
	}
	if !strings.Contains(logs.String(), "initialising a new private cluster") {
		t.Errorf("the log does not say a cluster was initialised:\n%s", logs)
	}

	created, err := ensureDatabase(ctx, port, appDatabase)
	if err != nil || !created {
		t.Fatalf("ensureDatabase on the new cluster = %v, %v; want created", created, err)
	}
	assertDatabase(t, serverURL(port, appDatabase), appDatabase)

	again, err := startPrivateCluster(ctx, dataDir, log)
	if err != nil {
		t.Fatal(err)
	}
	if again != port {
		t.Errorf("second start: port = %d, want the running cluster's %d", again, port)
	}
	if !strings.Contains(logs.String(), "reusing the private cluster") {
		t.Errorf("the log does not say the running cluster was reused:\n%s", logs)
	}
}

func stopCluster(t *testing.T, dataDir string) {
	t.Helper()
	c := &cluster{dir: filepath.Join(dataDir, "postgres")}
	version, err := c.version()
	if err != nil {
		t.Error(err)
		return
	}
	if c.bin, _, err = findBinDir(pgLibDir, version); err != nil {
		t.Error(err)
		return
	}
	if os.Geteuid() == 0 {
		c.owner, _ = user.Lookup(superuser)
	}
	log, _ := testLogger(t)
	if err := c.run(context.Background(), log, "pg_ctl", "stop", "-m", "immediate", "-w", "-D", c.dir); err != nil {
		t.Errorf("stop the test cluster: %v", err)
	}
}

func assertDatabase(t *testing.T, url, database string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	defer conn.Close(context.Background())
	var got string
	if err := conn.QueryRow(t.Context(), "SELECT current_database()").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != database {
		t.Errorf("%s connects to database %q, want %q", url, got, database)
	}
}

func dropDatabase(t *testing.T, port int, name string) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), serverURL(port, adminDatabase))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatal(err)
	}
}

// testLogger is testlog.New: a logger the test can read, shown when it fails.
func testLogger(t *testing.T) (*slog.Logger, *testlog.Buffer) { return testlog.New(t) }
