package devenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

const (
	// localPort is where a developer's own PostgreSQL usually listens.
	localPort = 5432
	// privatePort is the first port tried for the private cluster: next to, never on, the usual one.
	privatePort = 5433
	// pgLibDir is where Debian and Ubuntu install each PostgreSQL major version: <pgLibDir>/<version>/bin.
	pgLibDir = "/usr/lib/postgresql"
	// superuser owns the private cluster's files when this process runs as root, because initdb and pg_ctl
	// refuse to run as root. The Debian postgresql package creates this system user.
	superuser = "postgres"
)

var errNoPostgres = errors.New("no PostgreSQL binaries installed")

// serverURL is the URL of database on the server at 127.0.0.1:port, as user postgres without a password.
func serverURL(port int, database string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", port, database)
}

// probe reports why the server at 127.0.0.1:port does not let user postgres in without a password, or nil if
// it does.
func probe(ctx context.Context, port int) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, serverURL(port, adminDatabase))
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// ensureDatabase creates database name on the server at 127.0.0.1:port unless it exists.
func ensureDatabase(ctx context.Context, port int, name string) (created bool, err error) {
	defer wrap(&err, "create database %s on port %d", name, port)

	conn, err := pgx.Connect(ctx, serverURL(port, adminDatabase))
	if err != nil {
		return false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))

	var exists bool
	err = conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists)
	if err != nil || exists {
		return false, err
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // duplicate_database: another process just made it
		return false, nil
	}
	return err == nil, err
}

// cluster is the private PostgreSQL cluster under a data directory.
type cluster struct {
	dir     string     // the cluster's data directory, also its Unix socket directory
	logFile string     // the server's log, beside the cluster
	owner   *user.User // the system user initdb and pg_ctl run as; nil to run them as this process's user
	bin     string     // the directory of initdb and pg_ctl
}

// startPrivateCluster makes sure the private cluster under dataDir runs and answers, and returns its port. It
// initialises the cluster on first use and installs PostgreSQL with apt-get when no binaries are found.
func startPrivateCluster(ctx context.Context, dataDir string, log *slog.Logger) (port int, err error) {
	defer wrap(&err, "private cluster under %s", dataDir)

	// initdb and pg_ctl run from another working directory, maybe as another user: paths must be absolute.
	if dataDir, err = filepath.Abs(dataDir); err != nil {
		return 0, err
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return 0, err
	}
	// `make run` and `make test` may start at once; one of them sets the cluster up, the other reuses it.
	unlock, err := lockFile(ctx, filepath.Join(dataDir, "postgres.lock"), log)
	if err != nil {
		return 0, err
	}
	defer unlock()

	c := &cluster{dir: filepath.Join(dataDir, "postgres"), logFile: filepath.Join(dataDir, "postgres.log")}
	if port, ok := c.running(ctx); ok {
		log.Info("PostgreSQL: reusing the private cluster that is already running", "dir", c.dir, "port", port)
		return port, nil
	}

	version, err := c.version()
	if err != nil {
		return 0, err
	}
	if c.bin, err = binaries(ctx, version, log); err != nil {
		return 0, err
	}
	if os.Geteuid() == 0 {
		if c.owner, err = user.Lookup(superuser); err != nil {
			return 0, fmt.Errorf("running as root, initdb and pg_ctl must run as system user %s, "+
				"which the postgresql package normally creates: %w", superuser, err)
		}
	}
	if err := c.prepare(ctx); err != nil {
		return 0, err
	}

	if version == "" {
		log.Info("PostgreSQL: initialising a new private cluster", "dir", c.dir, "binaries", c.bin)
		err := c.run(ctx, log, "initdb", "-D", c.dir, "-U", superuser, "--auth=trust", "-E", "UTF8", "--no-locale")
		if err != nil {
			return 0, err
		}
	}

	if port, err = freePort("127.0.0.1", privatePort); err != nil {
		return 0, err
	}
	if port != privatePort {
		log.Warn(fmt.Sprintf("PostgreSQL: port %d is taken; the private cluster listens on 127.0.0.1:%d instead",
			privatePort, port))
	}
	serverOpts := fmt.Sprintf("-p %d -k '%s' -c listen_addresses=127.0.0.1", port, c.dir)
	if err := c.run(ctx, log, "pg_ctl", "start", "-w", "-D", c.dir, "-l", c.logFile, "-o", serverOpts); err != nil {
		return 0, fmt.Errorf("%w (the server's log is %s)", err, c.logFile)
	}
	log.Info("PostgreSQL: started the private cluster; it keeps running after this process exits",
		"dir", c.dir, "port", port, "log", c.logFile, "stop_with", c.commandLine("pg_ctl", "stop", "-D", c.dir))
	return port, nil
}

// running returns the port of the cluster's server when its postmaster.pid names one and a server answers there.
func (c *cluster) running(ctx context.Context) (port int, ok bool) {
	pid, err := os.ReadFile(filepath.Join(c.dir, "postmaster.pid"))
	if err != nil {
		return 0, false
	}
	// Line 4 of postmaster.pid is the port (see PostgreSQL's pidfile.h).
	lines := strings.Split(string(pid), "\n")
	if len(lines) < 4 {
		return 0, false
	}
	port, err = strconv.Atoi(strings.TrimSpace(lines[3]))
	if err != nil {
		return 0, false
	}
	return port, probe(ctx, port) == nil
}

// version returns the major version that initialised the cluster, or "" when there is no cluster yet.
func (c *cluster) version() (string, error) {
	v, err := os.ReadFile(filepath.Join(c.dir, "PG_VERSION"))
	if err == nil {
		return strings.TrimSpace(string(v)), nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	entries, err := os.ReadDir(c.dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if len(entries) > 0 {
		return "", fmt.Errorf("%s is neither empty nor a PostgreSQL cluster (no PG_VERSION): move it away", c.dir)
	}
	return "", nil
}

// binaries returns the directory of the PostgreSQL binaries for the cluster: the version that initialised it, or
// the highest installed for a new one. It installs PostgreSQL when none is.
func binaries(ctx context.Context, version string, log *slog.Logger) (string, error) {
	bin, found, err := findBinDir(pgLibDir, version)
	if errors.Is(err, errNoPostgres) {
		if err := installPostgres(ctx, log); err != nil {
			return "", err
		}
		bin, found, err = findBinDir(pgLibDir, version)
	}
	if err != nil {
		return "", err
	}
	log.Debug("PostgreSQL: found binaries", "dir", bin, "version", found)
	return bin, nil
}

// findBinDir returns <root>/<version>/bin, holding initdb, for the given major version, or for the highest
// installed one when version is "".
func findBinDir(root, version string) (dir, found string, err error) {
	initdbs, err := filepath.Glob(filepath.Join(root, "*", "bin", "initdb"))
	if err != nil {
		return "", "", err
	}
	best := -1.0
	var installed []string
	for _, initdb := range initdbs {
		v := filepath.Base(filepath.Dir(filepath.Dir(initdb)))
		n, err := strconv.ParseFloat(v, 64) // "15", or "9.6" before PostgreSQL 10
		if err != nil {
			continue
		}
		installed = append(installed, v)
		if (version == "" && n > best) || v == version {
			best, found, dir = n, v, filepath.Dir(initdb)
		}
	}
	switch {
	case len(installed) == 0:
		return "", "", fmt.Errorf("%w under %s", errNoPostgres, root)
	case dir == "":
		return "", "", fmt.Errorf("the cluster was initialised by PostgreSQL %s, which is not installed "+
			"(installed: %s): install package postgresql-%s, or delete the cluster to start afresh",
			version, strings.Join(installed, ", "), version)
	}
	return dir, found, nil
}

// installPostgres installs the distribution's PostgreSQL with apt-get, through sudo when not root.
func installPostgres(ctx context.Context, log *slog.Logger) error {
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("no PostgreSQL under %s and no apt-get to install it: "+
			"install PostgreSQL 15 or later, or set DATABASE_URL", pgLibDir)
	}
	root := os.Geteuid() == 0
	if _, err := exec.LookPath("sudo"); err != nil && !root {
		return fmt.Errorf("no PostgreSQL under %s, and installing it needs root: "+
			"run `apt-get install postgresql` as root, or set DATABASE_URL", pgLibDir)
	}
	msg := "PostgreSQL: not installed; installing it with `apt-get update && apt-get install -y postgresql` " +
		"(a minute or two)"
	if !root {
		msg += "; sudo may ask for your password"
	}
	log.Info(msg)
	for _, step := range [][]string{{"update"}, {"install", "-y", "postgresql"}} {
		argv := append([]string{"env", "DEBIAN_FRONTEND=noninteractive", "apt-get"}, step...)
		if !root {
			argv = append([]string{"sudo"}, argv...)
		}
		log.Info("PostgreSQL: running " + strings.Join(argv, " "))
		if err := runLogged(log, "apt-get", exec.CommandContext(ctx, argv[0], argv[1:]...)); err != nil {
			return fmt.Errorf("install PostgreSQL: %w", err)
		}
	}
	return nil
}

// prepare creates the cluster directory and the log file, and when running as root, hands them to the owner and
// checks that the owner can reach them.
func (c *cluster) prepare(ctx context.Context) error {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(c.logFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if c.owner == nil {
		return nil
	}
	uid, _ := strconv.Atoi(c.owner.Uid)
	gid, _ := strconv.Atoi(c.owner.Gid)
	if err := os.Chown(c.logFile, uid, gid); err != nil {
		return err
	}
	err = filepath.WalkDir(c.dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, gid)
	})
	if err != nil {
		return err
	}
	if exec.CommandContext(ctx, "runuser", "-u", superuser, "--", "test", "-w", c.dir).Run() != nil {
		return fmt.Errorf("system user %s cannot write %s: make each directory above it searchable by others "+
			"(chmod o+x), put the checkout elsewhere, or set DATABASE_URL", superuser, c.dir)
	}
	return nil
}

// run runs one of the cluster's PostgreSQL programs as the cluster's owner.
func (c *cluster) run(ctx context.Context, log *slog.Logger, program string, args ...string) error {
	argv := c.argv(program, args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = "/" // the owner may not be allowed into this process's working directory
	return runLogged(log, program, cmd)
}

// commandLine is how a person runs program on the cluster, for the log.
func (c *cluster) commandLine(program string, args ...string) string {
	return strings.Join(c.argv(program, args...), " ")
}

func (c *cluster) argv(program string, args ...string) []string {
	argv := append([]string{filepath.Join(c.bin, program)}, args...)
	if c.owner != nil {
		argv = append([]string{"runuser", "-u", c.owner.Username, "--"}, argv...)
	}
	return argv
}

// runLogged runs cmd, logging each line of its output at debug level as the output of program; its error carries
// the last lines.
func runLogged(log *slog.Logger, program string, cmd *exec.Cmd) error {
	out := &outputLog{log: log, program: program}
	cmd.Stdout, cmd.Stderr = out, out
	err := cmd.Run()
	out.flush()
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, strings.Join(out.tail, "\n"))
	}
	return nil
}

// outputLog is an io.Writer that logs a program's output line by line and keeps the last lines.
type outputLog struct {
	log     *slog.Logger
	program string
	partial []byte
	tail    []string
}

const outputTailLines = 20

func (o *outputLog) Write(p []byte) (int, error) {
	o.partial = append(o.partial, p...)
	for {
		i := bytes.IndexByte(o.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		o.line(string(o.partial[:i]))
		o.partial = o.partial[i+1:]
	}
}

func (o *outputLog) flush() {
	if len(o.partial) > 0 {
		o.line(string(o.partial))
		o.partial = nil
	}
}

func (o *outputLog) line(s string) {
	if strings.TrimSpace(s) == "" {
		return
	}
	o.log.Debug(s, "program", o.program)
	o.tail = append(o.tail, s)
	if len(o.tail) > outputTailLines {
		o.tail = o.tail[1:]
	}
}

// freePort returns the first port from from on that can be listened on at host.
func freePort(host string, from int) (int, error) {
	for port := from; port < from+100 && port <= 65535; port++ {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err == nil {
			return port, ln.Close()
		}
	}
	return 0, fmt.Errorf("no free port on %s in %d-%d", host, from, from+99)
}

// lockFile takes an exclusive lock on path, waiting for another holder until ctx ends. unlock releases it.
func lockFile(ctx context.Context, path string, log *slog.Logger) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for waited := false; ; waited = true {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if !waited {
			log.Info("PostgreSQL: waiting for another process that is setting up the private cluster", "lock", path)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
