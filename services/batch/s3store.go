package batch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Store keeps batch files as objects of an S3-compatible bucket, each under Prefix plus its id,
// so every web and gateway process sees the same files (docs/batches.md, "The S3 store").
//
// An upload streams into a multipart upload of unknown size, one part in memory at a time. S3
// makes an object visible only when its multipart upload is completed, and the upload is completed
// only when the upload's reader ends, which is when Commit closes it: before Commit no reader can
// see the object, even in part, so no temporary key and copy are needed. Abort ends the reader
// with an error instead; minio-go then aborts the multipart upload, which deletes its parts. An
// upload cut off by a crash stays an incomplete multipart upload, never an object, until the
// bucket's expiry of incomplete uploads removes it (docs/batches.md).
//
// Reads go through a cache on local disk (readCache): the scheduler reads a batch's lines one at
// a time by offset, and a ranged GET per line would cost a round trip each.
type S3Store struct {
	client   *minio.Client
	bucket   string
	prefix   string
	partSize uint64
	cache    *readCache
}

var _ Storage = (*S3Store)(nil)

// S3 store defaults.
const (
	// DefaultS3PartSize is the part an upload buffers and sends at a time: a 200 MB file goes up in
	// 24 parts, with 8 MiB of memory per upload in flight.
	DefaultS3PartSize = 8 << 20
	// MinS3PartSize is S3's smallest part but the last.
	MinS3PartSize = 5 << 20
	// DefaultS3CacheBytes bounds the read cache: ten files of the largest size.
	DefaultS3CacheBytes = 10 * MaxFileBytes
	// DefaultS3Prefix is where the files lie in the bucket when no prefix is set.
	DefaultS3Prefix = "batch-files/"
)

// S3Config says where the store's bucket is and how to reach it.
type S3Config struct {
	// Endpoint is the store's URL: https://s3.eu-west-1.amazonaws.com, http://minio:9000. The
	// scheme says whether TLS is used; there is no path.
	Endpoint  string
	Bucket    string
	Prefix    string // "" means DefaultS3Prefix; a prefix ends with "/"
	Region    string // "" lets the client ask the store
	AccessKey string
	SecretKey string
	// PartSize is the multipart part size, at least MinS3PartSize; zero means DefaultS3PartSize.
	PartSize int64
	// CacheDir holds the read cache; it is emptied when the store opens. CacheBytes bounds it;
	// zero means DefaultS3CacheBytes.
	CacheDir   string
	CacheBytes int64
}

// S3Endpoint reads an endpoint URL into the client's host and whether it uses TLS.
func S3Endpoint(endpoint string) (host string, secure bool, err error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || (u.Path != "" && u.Path != "/") ||
		u.RawQuery != "" || u.User != nil {
		return "", false, fmt.Errorf("the S3 endpoint %q is not a URL such as https://s3.eu-west-1.amazonaws.com or http://minio:9000 (scheme and host, no path)", endpoint)
	}
	return u.Host, u.Scheme == "https", nil
}

// NewS3Store connects to the bucket and checks that it is there and that the credentials may
// read it; it fails with what is wrong, so a wrong setting stops the start.
func NewS3Store(ctx context.Context, cfg S3Config) (*S3Store, error) {
	host, secure, err := S3Endpoint(cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	if cfg.Bucket == "" {
		return nil, errors.New("the S3 store needs a bucket")
	}
	if cfg.AccessKey == "" || cfg.SecretKey == "" {
		return nil, errors.New("the S3 store needs an access key and a secret key")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultS3Prefix
	}
	if !strings.HasSuffix(cfg.Prefix, "/") || strings.HasPrefix(cfg.Prefix, "/") || path.Clean(cfg.Prefix) != strings.TrimSuffix(cfg.Prefix, "/") {
		return nil, fmt.Errorf("the S3 prefix %q is not a folder such as batch-files/ (no leading slash, one trailing slash)", cfg.Prefix)
	}
	if cfg.PartSize == 0 {
		cfg.PartSize = DefaultS3PartSize
	}
	if cfg.PartSize < MinS3PartSize || cfg.PartSize > MaxFileBytes {
		return nil, fmt.Errorf("the S3 part size %d is not between %d (S3's least) and %d bytes", cfg.PartSize, MinS3PartSize, MaxFileBytes)
	}
	if cfg.CacheBytes == 0 {
		cfg.CacheBytes = DefaultS3CacheBytes
	}
	client, err := minio.New(host, &minio.Options{
		Creds:  credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure: secure,
		Region: cfg.Region,
	})
	if err != nil {
		return nil, fmt.Errorf("the S3 store at %s: %w", cfg.Endpoint, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	ok, err := client.BucketExists(ctx, cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("the S3 bucket %q at %s cannot be reached (check the endpoint, region and keys): %w", cfg.Bucket, cfg.Endpoint, err)
	}
	if !ok {
		return nil, fmt.Errorf("the S3 store at %s has no bucket %q: create it, or name another", cfg.Endpoint, cfg.Bucket)
	}
	cache, err := newReadCache(cfg.CacheDir, cfg.CacheBytes)
	if err != nil {
		return nil, err
	}
	return &S3Store{client: client, bucket: cfg.Bucket, prefix: cfg.Prefix, partSize: uint64(cfg.PartSize), cache: cache}, nil
}

// String names the store for the log.
func (s *S3Store) String() string {
	return fmt.Sprintf("s3 %s bucket %s prefix %s", s.client.EndpointURL(), s.bucket, s.prefix)
}

func (s *S3Store) key(id string) (string, error) {
	if err := checkID(id); err != nil {
		return "", err
	}
	return s.prefix + id, nil
}

// Create starts the multipart upload of the file id; the object appears on Commit.
func (s *S3Store) Create(id string) (Upload, error) {
	key, err := s.key(id)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	u := &s3Upload{pw: pw, result: make(chan error, 1)}
	go func() {
		// The upload outlives the request that started it only until Commit or Abort, which
		// wait for it; its own calls time out with the client's transport.
		_, err := s.client.PutObject(context.Background(), s.bucket, key, pr, -1,
			minio.PutObjectOptions{PartSize: s.partSize, ContentType: "application/jsonl"})
		// A write after the upload stopped fails with why, rather than wait for a reader.
		pr.CloseWithError(err)
		u.result <- err
	}()
	return u, nil
}

var errUploadAborted = errors.New("the upload was aborted")

// s3Upload feeds PutObject through a pipe: each Write is read into the part being filled, and
// waits while a full part is sent.
type s3Upload struct {
	pw     *io.PipeWriter
	result chan error
	done   bool
}

func (u *s3Upload) Write(p []byte) (int, error) { return u.pw.Write(p) }

// Commit ends the reader, so PutObject sends the last part and completes the upload.
func (u *s3Upload) Commit() error {
	if u.done {
		return nil
	}
	u.done = true
	u.pw.Close()
	return <-u.result
}

// Abort ends the reader with an error: PutObject aborts the multipart upload and its parts go.
func (u *s3Upload) Abort() {
	if u.done {
		return
	}
	u.done = true
	u.pw.CloseWithError(errUploadAborted)
	<-u.result
}

// Open reads the file id from the cache, downloading it there first when it is not.
func (s *S3Store) Open(id string) (ReadAtCloser, error) {
	key, err := s.key(id)
	if err != nil {
		return nil, err
	}
	return s.cache.open(id, func(w io.Writer) error {
		obj, err := s.client.GetObject(context.Background(), s.bucket, key, minio.GetObjectOptions{})
		if err != nil {
			return err
		}
		defer obj.Close()
		_, err = io.Copy(w, obj)
		return err
	})
}

// Remove deletes the object and its cached copy; an object already gone is no error (S3 answers
// a delete of a missing key with success).
func (s *S3Store) Remove(id string) error {
	key, err := s.key(id)
	if err != nil {
		return err
	}
	if err := s.client.RemoveObject(context.Background(), s.bucket, key, minio.RemoveObjectOptions{}); err != nil {
		return err
	}
	s.cache.forget(id)
	return nil
}
