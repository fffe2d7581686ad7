package templates

import "strconv"

// WebhooksPage is an account's webhook endpoints, the form to add one, and the latest
// deliveries with their attempts. Created is set only on the answer to the form that added an
// endpoint: its secret is shown there once and never again.
type WebhooksPage struct {
	Page
	Endpoints  []WebhookEndpointRow
	Deliveries []WebhookDeliveryRow
	EventTypes []WebhookEventType // what the account's endpoints may subscribe to
	Form       Form
	Created    *CreatedWebhook
}

// WebhookEventType is an event type as the form offers it.
type WebhookEventType struct {
	Name        string
	Description string
	Checked     bool
}

// WebhookEndpointRow is an endpoint as its owner sees it: never the secret.
type WebhookEndpointRow struct {
	ID          string
	URL         string
	Description string
	Events      string // "all events", or the types joined by commas
	SecretHint  string // "whsec_AbCd", the start of the secret
	Status      string // enabled or disabled
	Enabled     bool
	Created     string
}

// CreatedWebhook is an endpoint just added, with its signing secret.
type CreatedWebhook struct {
	URL    string
	Secret string
}

// WebhookDeliveryRow is one event sent to one endpoint.
type WebhookDeliveryRow struct {
	ID        string
	EventID   string // the webhook-id
	EventType string
	Endpoint  string // its URL
	Status    string // pending, delivered, failed
	Last      string // the last answer's status code, "no answer" or "not sent yet"
	Next      string // when a pending delivery is tried again, or ""
	Created   string
	CanReplay bool
	Attempts  []WebhookAttemptRow
}

// AttemptsLabel is how many attempts the delivery made: "1 attempt", "3 attempts".
func (d WebhookDeliveryRow) AttemptsLabel() string {
	if len(d.Attempts) == 1 {
		return "1 attempt"
	}
	return strconv.Itoa(len(d.Attempts)) + " attempts"
}

// WebhookAttemptRow is one attempt of a delivery.
type WebhookAttemptRow struct {
	At       string
	Status   string // the status code, or "no answer"
	Duration string
	Error    string
	Body     string // the answer's first 4 KB
	Replay   bool
}
