package web_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/mail"
)

// sentMail is the web tests' outbox: it keeps each message it is given in memory, where a test
// reads the links they carry. Unlike the platform's outbox it keeps a message even when its
// transaction rolls back; the tests that read it look only at invitations that were made.
type sentMail struct {
	mu       sync.Mutex
	messages []mail.Message
}

var _ accounts.Outbox = (*sentMail)(nil)

// Enqueue records the message.
func (o *sentMail) Enqueue(_ context.Context, _ pgx.Tx, m mail.Message) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.messages = append(o.messages, m)
	return nil
}

// to is the last message queued to the address.
func (o *sentMail) to(t *testing.T, email string) mail.Message {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := len(o.messages) - 1; i >= 0; i-- {
		for _, a := range o.messages[i].To {
			if a == email {
				return o.messages[i]
			}
		}
	}
	t.Fatalf("no e-mail to %s among %d queued", email, len(o.messages))
	return mail.Message{}
}

// inviteLink is the invitation link the last e-mail to the address carries, as a path on the site.
func (o *sentMail) inviteLink(t *testing.T, email string) string {
	t.Helper()
	text := o.to(t, email).Text
	i := strings.Index(text, accounts.InvitationPath)
	if i < 0 {
		t.Fatalf("no invitation link in %q", text)
	}
	return strings.Fields(text[i:])[0]
}
