package batch

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/gpumarket/gpumarket/services/batch/s3fake"
)

// fakeS3 serves the S3 protocol in the test's process, with an empty bucket "batches" (s3fake); it returns
// a store config for it and a client that looks into the bucket behind the store's back.
func fakeS3(t *testing.T) (S3Config, *minio.Client) {
	t.Helper()
	endpoint := s3fake.Start(t, "batches")
	cfg := S3Config{Endpoint: endpoint, Bucket: "batches", Prefix: "files/", AccessKey: "test-access", SecretKey: "test-secret",
		Region: "us-east-1", PartSize: MinS3PartSize, CacheDir: filepath.Join(t.TempDir(), "cache")}
	host, _, err := S3Endpoint(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	client, err := minio.New(host, &minio.Options{Creds: credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""), Region: cfg.Region})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, client
}

func newTestS3Store(t *testing.T) (*S3Store, *minio.Client) {
	t.Helper()
	cfg, client := fakeS3(t)
	store, err := NewS3Store(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return store, client
}

// bucketState lists the bucket's objects and incomplete multipart uploads.
func bucketState(t *testing.T, c *minio.Client) (objects, uploads []string) {
	t.Helper()
	ctx := context.Background()
	for o := range c.ListObjects(ctx, "batches", minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		objects = append(objects, o.Key)
	}
	for u := range c.ListIncompleteUploads(ctx, "batches", "", true) {
		if u.Err != nil {
			t.Fatal(u.Err)
		}
		uploads = append(uploads, u.Key)
	}
	return objects, uploads
}

// TestStorage holds both stores to the contract of Storage: a file is seen whole once committed
// and never before, an aborted one leaves nothing, reads at an offset, removal.
func TestStorage(t *testing.T) {
	type store struct {
		name string
		open func(t *testing.T) (Storage, func() (stored []string))
	}
	for _, st := range []store{
		{"local directory", func(t *testing.T) (Storage, func() []string) {
			dir := t.TempDir()
			s, err := NewLocalDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			return s, func() []string {
				list, err := os.ReadDir(dir)
				if err != nil {
					t.Fatal(err)
				}
				var names []string
				for _, e := range list {
					names = append(names, e.Name())
				}
				return names
			}
		}},
		{"s3", func(t *testing.T) (Storage, func() []string) {
			s, c := newTestS3Store(t)
			return s, func() []string {
				objects, uploads := bucketState(t, c)
				return append(objects, uploads...)
			}
		}},
	} {
		t.Run(st.name, func(t *testing.T) {
			store, stored := st.open(t)
			// Three parts of 5 MiB and a little, written in small pieces as an upload arrives.
			var body bytes.Buffer
			for i := 0; body.Len() < 2*MinS3PartSize+1000; i++ {
				fmt.Fprintf(&body, `{"custom_id":"line-%06d","body":%q}`+"\n", i, strings.Repeat("x", 200))
			}
			up, err := store.Create("file-a")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(up, slowReader{bytes.NewReader(body.Bytes()[:1<<20])}); err != nil {
				t.Fatal(err)
			}
			if _, err := up.Write(body.Bytes()[1<<20:]); err != nil {
				t.Fatal(err)
			}
			if _, err := store.Open("file-a"); err == nil {
				t.Fatal("a file can be opened before it is committed")
			}
			if err := up.Commit(); err != nil {
				t.Fatal(err)
			}
			up.Abort() // after Commit, does nothing

			f, err := store.Open("file-a")
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(f)
			if err != nil || !bytes.Equal(got, body.Bytes()) {
				t.Fatalf("read back %d bytes (%v), stored %d", len(got), err, body.Len())
			}
			line := make([]byte, 20)
			at := int64(body.Len() - 300)
			if _, err := f.ReadAt(line, at); err != nil || !bytes.Equal(line, body.Bytes()[at:at+20]) {
				t.Fatalf("ReadAt %d: %q, %v", at, line, err)
			}
			f.Close()

			// An aborted upload, after a whole part went up, leaves no object and no parts.
			ab, err := store.Create("file-b")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ab.Write(body.Bytes()[:MinS3PartSize+10]); err != nil {
				t.Fatal(err)
			}
			ab.Abort()
			if err := ab.Commit(); err != nil { // after Abort, does nothing
				t.Fatal(err)
			}
			if _, err := store.Open("file-b"); err == nil {
				t.Fatal("an aborted file can be opened")
			}
			if got := stored(); len(got) != 1 || !strings.HasSuffix(got[0], "file-a") {
				t.Fatalf("stored after an abort: %v, want file-a alone", got)
			}

			if err := store.Remove("file-a"); err != nil {
				t.Fatal(err)
			}
			if err := store.Remove("file-a"); err != nil {
				t.Fatalf("removing a file already gone: %v", err)
			}
			if _, err := store.Open("file-a"); err == nil {
				t.Fatal("a removed file can be opened")
			}
			if got := stored(); len(got) != 0 {
				t.Fatalf("stored after removal: %v", got)
			}
			if _, err := store.Create("../x"); err == nil {
				t.Fatal("an id with a path was taken")
			}
		})
	}
}

// TestS3StoreKeysAndCache: objects lie under the prefix, a file is downloaded once however many
// read it at once, and the cache keeps within its bound by dropping the copy used longest ago.
func TestS3StoreKeysAndCache(t *testing.T) {
	cfg, client := fakeS3(t)
	cfg.CacheBytes = 2500 // room for two files of 1,000 bytes, not three
	store, err := NewS3Store(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"file-1", "file-2", "file-3"} {
		up, err := store.Create(id)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := up.Write([]byte(strings.Repeat(id[len(id)-1:], 1000))); err != nil {
			t.Fatal(err)
		}
		if err := up.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	objects, _ := bucketState(t, client)
	if strings.Join(objects, ",") != "files/file-1,files/file-2,files/file-3" {
		t.Fatalf("objects %v, want each under files/", objects)
	}

	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := store.Open("file-1")
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			b := make([]byte, 1)
			if _, err := f.ReadAt(b, 999); err != nil || b[0] != '1' {
				errs <- fmt.Errorf("read %q, %v", b, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	cached := func() []string {
		list, err := os.ReadDir(cfg.CacheDir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range list {
			names = append(names, e.Name())
		}
		return names
	}
	if got := cached(); strings.Join(got, ",") != "file-1" {
		t.Fatalf("cache after eight opens of one file: %v", got)
	}
	// A copy in the cache is read without the store: with the object gone behind the store's
	// back, the file still opens.
	if err := client.RemoveObject(context.Background(), "batches", "files/file-1", minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"file-1", "file-2", "file-1", "file-3"} {
		f, err := store.Open(id)
		if err != nil {
			t.Fatalf("open %s: %v", id, err)
		}
		f.Close()
	}
	// file-2 was used longest ago when file-3 came in.
	if got := cached(); strings.Join(got, ",") != "file-1,file-3" {
		t.Fatalf("cache %v, want file-1 and file-3", got)
	}
	if err := store.Remove("file-3"); err != nil {
		t.Fatal(err)
	}
	if got := cached(); strings.Join(got, ",") != "file-1" {
		t.Fatalf("cache after removing file-3: %v", got)
	}
	// A store opened again starts with an empty cache.
	if _, err := NewS3Store(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if got := cached(); len(got) != 0 {
		t.Fatalf("cache of a new store: %v", got)
	}
}

// TestS3StoreRefusesWrongSettings: a start with a wrong setting stops with what is wrong.
func TestS3StoreRefusesWrongSettings(t *testing.T) {
	good, _ := fakeS3(t)
	for _, tc := range []struct {
		name string
		edit func(*S3Config)
		want string
	}{
		{"no scheme", func(c *S3Config) { c.Endpoint = strings.TrimPrefix(c.Endpoint, "http://") }, "is not a URL"},
		{"a path", func(c *S3Config) { c.Endpoint += "/batches" }, "is not a URL"},
		{"no bucket", func(c *S3Config) { c.Bucket = "" }, "needs a bucket"},
		{"a missing bucket", func(c *S3Config) { c.Bucket = "other" }, `has no bucket "other"`},
		{"no secret", func(c *S3Config) { c.SecretKey = "" }, "needs an access key and a secret key"},
		{"a prefix without its slash", func(c *S3Config) { c.Prefix = "files" }, "is not a folder"},
		{"a prefix from the root", func(c *S3Config) { c.Prefix = "/files/" }, "is not a folder"},
		{"a part under S3's least", func(c *S3Config) { c.PartSize = 1 << 20 }, "part size"},
		{"nothing listening", func(c *S3Config) { c.Endpoint = "http://127.0.0.1:1" }, "cannot be reached"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			tc.edit(&cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := NewS3Store(ctx, cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}
