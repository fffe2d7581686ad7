// Package mail queues the platform's e-mail in PostgreSQL and sends it through SMTP: a message
// is queued in the transaction of what it tells of, so that it is queued once and only when that
// happened, and it survives a restart until it is sent (docs/email.md).
package mail

// Attachment is a file sent with a message, such as an invoice's PDF.
type Attachment struct {
	Name        string // the file's name as the reader sees it, "INV-2026-000123.pdf"
	ContentType string // "application/pdf"
	Data        []byte
}

// Message is one e-mail to queue.
type Message struct {
	// Key names what the message tells of ("invite:<id>", "alert:<id>"): a message whose key is
	// already queued is not queued again, so that a retried caller sends one e-mail.
	Key     string
	To      []string
	Subject string
	// Text is the plain-text body every message has; HTML, when set, is its alternative.
	Text        string
	HTML        string
	Attachments []Attachment
}
