package templates

// KeysPage is a developer's API keys and the form to create one. Created is set only on the
// answer to the form that made a key: its secret is shown there once and never again.
type KeysPage struct {
	Page
	Keys    []KeyRow
	Form    Form
	Tiers   []Option
	Created *CreatedKey
}

// KeyRow is an API key as its owner sees it: never the secret.
type KeyRow struct {
	ID           string
	Name         string
	Prefix       string // "gm_AbC123", the start of the secret, to tell keys apart
	DefaultTier  string // "none" when the gateway's default applies
	MonthlyLimit string // "$25.00", or "none"
	Created      string
	LastUsed     string // "never" until the gateway first sees the key
	Status       string // live or revoked
	Live         bool
}

// CreatedKey is a key just created, with its secret and how to call the gateway with it.
type CreatedKey struct {
	Name    string
	Secret  string
	BaseURL string // the gateway's OpenAI-compatible base URL, ending in /v1
	Model   string // a model on offer, for the examples
}

// CurlExample is a chat completion with curl. It is written here, not in the template,
// because templ folds the line breaks of literal text, and a shell command needs them.
func (k CreatedKey) CurlExample() string {
	return "export GPUMARKET_API_KEY=" + k.Secret + "\n" +
		"curl " + k.BaseURL + "/chat/completions \\\n" +
		"  -H \"Authorization: Bearer $GPUMARKET_API_KEY\" \\\n" +
		"  -H \"Content-Type: application/json\" \\\n" +
		"  -d '{\"model\": \"" + k.Model + "\", \"messages\": [{\"role\": \"user\", \"content\": \"Hello\"}]}'"
}

// SDKExample is the same call with OpenAI's Python SDK, pointed at the gateway.
func (k CreatedKey) SDKExample() string {
	return `import os
from openai import OpenAI

client = OpenAI(base_url="` + k.BaseURL + `", api_key=os.environ["GPUMARKET_API_KEY"])
reply = client.chat.completions.create(
    model="` + k.Model + `",
    messages=[{"role": "user", "content": "Hello"}],
)
print(reply.choices[0].message.content)`
}
