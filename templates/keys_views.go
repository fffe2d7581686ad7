package templates

// KeysPage is a developer's API keys and the form to create one. Created is set only on the
// answer to the form that made a key: its secret is shown there once and never again.
type KeysPage struct {
	Page
	Keys    []KeyRow
	Form    Form
	Tiers   []Option
	Prefers []Option
	Periods []Option
	Created *CreatedKey
	// LimitError is set when a row's form could not change its key's limit.
	LimitError *KeyLimitError
}

// KeyLimitError is a limit a key's row could not take, and why.
type KeyLimitError struct {
	KeyID   string
	Value   string
	Message string
}

// LimitValue is what a row's limit field holds: what was refused, or the key's limit.
func (p KeysPage) LimitValue(k KeyRow) string {
	if p.LimitError != nil && p.LimitError.KeyID == k.ID {
		return p.LimitError.Value
	}
	return k.LimitUSD
}

// LimitProblem is why a row's limit was refused, or "".
func (p KeysPage) LimitProblem(k KeyRow) string {
	if p.LimitError != nil && p.LimitError.KeyID == k.ID {
		return p.LimitError.Message
	}
	return ""
}

// KeyRow is an API key as its owner sees it: never the secret.
type KeyRow struct {
	ID          string
	Name        string
	Prefix      string // "gm_AbC123", the start of the secret, to tell keys apart
	DefaultTier string // "none" when the gateway's default applies
	Prefers     string // "carbon" when the key routes by carbon, else ""
	Limit       string // "$25.00 per day", or "none"
	LimitUSD    string // "25.00", or "" for none: the limit form's value
	Period      string // day, week or month: the limit's period, or the one it would have
	// Spent is what the key was billed in the period, Remaining its limit less that ("—" without
	// a limit), Resets when the period ends.
	Spent, Remaining, Resets string
	Created                  string
	LastUsed                 string // "never" until the gateway first sees the key
	Status                   string // live or revoked
	Live                     bool
}

// CreatedKey is a key just created, with its secret and how to call the gateway with it.
type CreatedKey struct {
	Name    string
	Secret  string
	BaseURL string // the gateway's OpenAI-compatible base URL, ending in /v1
	Model   string // a model the gateway serves now, for the examples; "" when none is
}

// exampleModel is the model the examples name, or a stand-in when none is on offer, which
// the page then explains.
func (k CreatedKey) exampleModel() string {
	if k.Model == "" {
		return "<a model from GET /v1/models>"
	}
	return k.Model
}

// CurlExample is a chat completion with curl. It is written here, not in the template,
// because templ folds the line breaks of literal text, and a shell command needs them.
func (k CreatedKey) CurlExample() string {
	return "export GPUMARKET_API_KEY=" + k.Secret + "\n" +
		"curl " + k.BaseURL + "/chat/completions \\\n" +
		"  -H \"Authorization: Bearer $GPUMARKET_API_KEY\" \\\n" +
		"  -H \"Content-Type: application/json\" \\\n" +
		"  -d '{\"model\": \"" + k.exampleModel() + "\", \"messages\": [{\"role\": \"user\", \"content\": \"Hello\"}]}'"
}

// SDKExample is the same call with OpenAI's Python SDK, pointed at the gateway.
func (k CreatedKey) SDKExample() string {
	return `import os
from openai import OpenAI

client = OpenAI(base_url="` + k.BaseURL + `", api_key=os.environ["GPUMARKET_API_KEY"])
reply = client.chat.completions.create(
    model="` + k.exampleModel() + `",
    messages=[{"role": "user", "content": "Hello"}],
)
print(reply.choices[0].message.content)`
}
