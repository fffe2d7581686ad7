package batch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
)

// TestFilesOnS3 runs the files and a batch through the Service on the S3 store: an upload of
// several parts, listed, read back and deleted; another account sees none of it; a batch's lines
// are read from the object and its output file is written to the bucket and read back.
func TestFilesOnS3(t *testing.T) {
	ctx := context.Background()
	pool := dbtest.New(t)
	acc, owner := testDeveloper(t, pool, "s3-owner@example.com", "S3 Co")
	other, err := acc.EnsureUser(ctx, "s3-other@example.com", "a long password here", accounts.RoleDeveloper, "Other Co")
	if err != nil {
		t.Fatal(err)
	}
	store, client := newTestS3Store(t)
	clk := &clock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	svc := NewService(Config{Pool: pool, Storage: store, Now: clk.now})

	// A file of 12,000 lines, about 11 MB: three parts of 5 MiB.
	var body bytes.Buffer
	for i := range 12_000 {
		id := fmt.Sprintf("ok-%05d", i)
		if i%1000 == 7 {
			id = fmt.Sprintf("bad-%05d", i)
		}
		fmt.Fprintf(&body, `{"custom_id":%q,"method":"POST","url":"/v1/chat/completions","body":{"model":"m","max_tokens":8,"messages":[{"role":"user","content":%q}]}}`+"\n",
			id, id+strings.Repeat("w", 800))
	}
	st, err := svc.Stage(owner.AccountID, "big.jsonl", slowReader{bytes.NewReader(body.Bytes())})
	if err != nil {
		t.Fatal(err)
	}
	if objects, _ := bucketState(t, client); len(objects) != 0 {
		t.Fatalf("a staged upload is an object before its commit: %v", objects)
	}
	in, err := svc.Commit(ctx, st, PurposeBatch)
	if err != nil {
		t.Fatal(err)
	}
	if in.Bytes != int64(body.Len()) || in.Bytes < 2*MinS3PartSize {
		t.Fatalf("stored %d bytes, sent %d (want more than two parts)", in.Bytes, body.Len())
	}
	obj, err := client.StatObject(ctx, "batches", "files/"+in.ID, minio.StatObjectOptions{})
	if err != nil || obj.Size != in.Bytes {
		t.Fatalf("object files/%s: %d bytes, %v", in.ID, obj.Size, err)
	}

	// An upload refused for its purpose leaves no object and no parts.
	st2, err := svc.Stage(owner.AccountID, "x.jsonl", strings.NewReader("{}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Commit(ctx, st2, "fine-tune"); err == nil {
		t.Fatal("a purpose other than batch was taken")
	}
	if objects, uploads := bucketState(t, client); len(objects) != 1 || len(uploads) != 0 {
		t.Fatalf("after a refused upload: objects %v, incomplete uploads %v", objects, uploads)
	}

	page, err := svc.Files(ctx, owner.AccountID, FileQuery{})
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != in.ID {
		t.Fatalf("owner's files %+v, %v", page.Data, err)
	}
	_, r, err := svc.Content(ctx, owner.AccountID, in.ID)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(r)
	r.Close()
	if !bytes.Equal(got, body.Bytes()) {
		t.Fatalf("content: %d bytes, want %d as sent", len(got), body.Len())
	}
	// The other account sees none of it.
	if page, err := svc.Files(ctx, other.AccountID, FileQuery{}); err != nil || len(page.Data) != 0 {
		t.Fatalf("other account's files %+v, %v", page.Data, err)
	}
	for _, call := range []func() error{
		func() error { _, err := svc.File(ctx, other.AccountID, in.ID); return err },
		func() error { _, _, err := svc.Content(ctx, other.AccountID, in.ID); return err },
		func() error { return svc.DeleteFile(ctx, other.AccountID, in.ID) },
	} {
		if err := call(); services.ErrorCode(err) != services.CodeNotFound {
			t.Fatalf("another account's file: %v, want not found", err)
		}
	}

	// A batch of it: checked from the object, every line read from it, the output written back.
	b, err := svc.Create(ctx, CreateInput{AccountID: owner.AccountID, APIKeyID: "key", InputFileID: in.ID,
		Endpoint: "/v1/chat/completions", CompletionWindow: CompletionWindow})
	if err != nil {
		t.Fatal(err)
	}
	sch := NewScheduler(SchedulerConfig{Service: svc, Gateway: answerBy{}, Offered: func(string) bool { return true },
		Prices: func(context.Context) (catalog.PriceBook, error) {
			return catalog.PriceBook{catalog.TierBatch: {{Tier: catalog.TierBatch, Input: 100_000, Output: 200_000}}}, nil
		},
		Balance: func(context.Context, string) (money.BigPico, error) {
			return money.BigPicoOf(1000 * money.PicoPerUSD), nil
		}})
	if ok, err := sch.validateOne(ctx); !ok || err != nil {
		t.Fatalf("validate: %v %v", ok, err)
	}
	// Not all 12,000 lines are sent: a run of lines at the start, the middle and the end is, and
	// the rest are marked done directly, as answered.
	for range 40 {
		l, ok, err := sch.claim(ctx)
		if err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
		if err := sch.run(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `UPDATE batch_lines SET status = 'done', status_code = 200, response = '{}', finished_at = now()
		WHERE batch_id = $1 AND status = 'pending' AND line < 11990`, b.ID); err != nil {
		t.Fatal(err)
	}
	for {
		l, ok, err := sch.claim(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if err := sch.run(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if err := sch.advance(ctx); err != nil {
		t.Fatal(err)
	}
	b, err = svc.Batch(ctx, owner.AccountID, b.ID)
	if err != nil || b.Status != StatusCompleted || b.OutputFileID == nil || b.ErrorFileID == nil {
		t.Fatalf("batch %+v, %v", b, err)
	}
	// The lines sent were read from the object at their offsets: each answer names its line's
	// custom_id, so the error file holds the bad lines among those sent, in order.
	_, r, err = svc.Content(ctx, owner.AccountID, *b.ErrorFileID)
	if err != nil {
		t.Fatal(err)
	}
	errLines, _ := io.ReadAll(r)
	r.Close()
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(string(errLines)), "\n") {
		var ol outputLine
		if err := json.Unmarshal([]byte(line), &ol); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ol.CustomID)
	}
	if strings.Join(ids, ",") != "bad-00007" {
		t.Fatalf("error file custom ids %v, want the one bad line among those sent", ids)
	}
	outFile, r, err := svc.Content(ctx, owner.AccountID, *b.OutputFileID)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(r)
	r.Close()
	if n := strings.Count(string(out), "\n"); n != 12_000-1 || int64(len(out)) != outFile.Bytes {
		t.Fatalf("output file: %d lines, %d bytes (row says %d)", n, len(out), outFile.Bytes)
	}
	if !strings.Contains(string(out), `"custom_id":"ok-11999"`) {
		t.Fatal("the last line's answer is not in the output file")
	}
	if _, err := client.StatObject(ctx, "batches", "files/"+*b.OutputFileID, minio.StatObjectOptions{}); err != nil {
		t.Fatalf("the output file is not an object of the bucket: %v", err)
	}

	// Deleted: gone from the bucket and the list, and not found.
	if err := svc.DeleteFile(ctx, owner.AccountID, in.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := client.StatObject(ctx, "batches", "files/"+in.ID, minio.StatObjectOptions{}); err == nil {
		t.Fatal("a deleted file's object is still in the bucket")
	}
	if _, _, err := svc.Content(ctx, owner.AccountID, in.ID); services.ErrorCode(err) != services.CodeNotFound {
		t.Fatalf("a deleted file's content: %v", err)
	}
}
