package catcher

import (
	"html/template"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// routes serves the list of caught messages (/), one message (/messages/{n}) with its links
// clickable, and its source (/messages/{n}/raw).
func (c *Catcher) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		var rows []listRow
		for _, m := range c.Messages() {
			p, err := Parse(m.Raw)
			if err != nil {
				p.Subject = "(unreadable: " + err.Error() + ")"
			}
			rows = append(rows, listRow{Caught: m, Parsed: p})
		}
		slices.Reverse(rows)
		render(w, listPage, rows)
	})
	mux.HandleFunc("GET /messages/{n}", func(w http.ResponseWriter, r *http.Request) {
		m, ok := c.message(r.PathValue("n"))
		if !ok {
			http.NotFound(w, r)
			return
		}
		p, err := Parse(m.Raw)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnprocessableEntity)
			return
		}
		render(w, messagePage, messageView{Caught: m, Parsed: p, Body: linkify(p.Text)})
	})
	mux.HandleFunc("GET /messages/{n}/raw", func(w http.ResponseWriter, r *http.Request) {
		m, ok := c.message(r.PathValue("n"))
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "message/rfc822")
		_, _ = w.Write(m.Raw)
	})
	return mux
}

func (c *Catcher) message(n string) (Caught, bool) {
	i, err := strconv.Atoi(n)
	all := c.Messages()
	if err != nil || i < 1 || i > len(all) {
		return Caught{}, false
	}
	return all[i-1], true
}

type listRow struct {
	Caught
	Parsed
}

type messageView struct {
	Caught
	Parsed
	Body template.HTML
}

var urlPattern = regexp.MustCompile(`https?://[^\s<>"]+`)

// linkify escapes a text body and makes its web addresses links.
func linkify(text string) template.HTML {
	var b strings.Builder
	last := 0
	for _, loc := range urlPattern.FindAllStringIndex(text, -1) {
		b.WriteString(template.HTMLEscapeString(text[last:loc[0]]))
		u := template.HTMLEscapeString(text[loc[0]:loc[1]])
		b.WriteString(`<a href="` + u + `">` + u + `</a>`)
		last = loc[1]
	}
	b.WriteString(template.HTMLEscapeString(text[last:]))
	return template.HTML(b.String())
}

func render(w http.ResponseWriter, t *template.Template, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	if err := t.Execute(w, data); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

const style = `<style>
body{font:15px/1.5 system-ui,sans-serif;margin:0 auto;max-width:960px;padding:1rem;color:#1b1f24}
table{border-collapse:collapse;width:100%}td,th{text-align:left;padding:.4rem;border-bottom:1px solid #ddd;vertical-align:top}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f8fa;padding:1rem;border-radius:6px}
dt{font-weight:600}dd{margin:0 0 .5rem}a{color:#0b5cad}.muted{color:#667}
@media (max-width:600px){.wide{display:none}}
</style>`

var listPage = template.Must(template.New("list").Parse(`<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1"><title>Caught mail</title>` + style + `</head><body>
<h1>Caught mail</h1>
<p class="muted">The platform's e-mail on this machine: nothing here left it. Newest first; reload for new mail.</p>
{{if .}}<table><thead><tr><th>Subject</th><th>To</th><th class="wide">Received</th></tr></thead><tbody>
{{range .}}<tr data-testid="caught"><td><a href="/messages/{{.N}}">{{.Subject}}</a>{{if .Attachments}} <span class="muted">({{len .Attachments}} attached)</span>{{end}}</td>
<td>{{range $i, $t := .Caught.To}}{{if $i}}, {{end}}{{$t}}{{end}}</td><td class="wide">{{.ReceivedAt.Format "2006-01-02 15:04:05"}} UTC</td></tr>
{{end}}</tbody></table>{{else}}<p>No mail yet.</p>{{end}}
</body></html>`))

var messagePage = template.Must(template.New("message").Parse(`<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1"><title>{{.Subject}}</title>` + style + `</head><body>
<p><a href="/">All caught mail</a></p>
<h1>{{.Subject}}</h1>
<dl><dt>From</dt><dd>{{.Parsed.From}}</dd><dt>To</dt><dd>{{range $i, $t := .Caught.To}}{{if $i}}, {{end}}{{$t}}{{end}}</dd>
<dt>Message-ID</dt><dd>{{.MessageID}}</dd>
{{if .Attachments}}<dt>Attached</dt><dd>{{range .Attachments}}{{.Name}} ({{.ContentType}}, {{len .Data}} bytes) {{end}}</dd>{{end}}</dl>
<pre data-testid="body">{{.Body}}</pre>
<p><a href="/messages/{{.N}}/raw">Source</a></p>
</body></html>`))
