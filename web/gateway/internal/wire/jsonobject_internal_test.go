package wire

import (
	"bytes"
	"encoding/json"
	"testing"
)

// jsonObjectCases are bodies whose members ReadObject must read as encoding/json reads
// them into a map: names escaped or repeated, values holding braces, quotes and escapes,
// space anywhere, and bodies that are not objects at all.
var jsonObjectCases = []string{
	`{}`,
	` { } `,
	`{"model":"m","max_tokens":8}`,
	"{\n\t\"model\" :\r\n \"m\" , \"n\" : 2 \n}",
	`{"max_tokens":8,"max_tokens":4000}`,
	`{"mo\u0064el":"hidden","model":"plain"}`,
	`{"model":"plain","mo\u0064el":"escaped last"}`,
	`{"a":{"model":"inner"},"model":"outer"}`,
	`{"messages":[{"role":"user","content":"} ] { [ \" \\ \u00e9"}],"model":"m"}`,
	`{"x":"a\"b","y":[1,2,[3,{"z":null}]],"t":true,"f":false,"n":null,"e":-1.5e+3}`,
	"{\"na\xffme\":1,\"model\":\"m\"}",
	`{"usage":{"prompt_tokens":16,"completion_tokens":8},"usage":null}`,
	`[1,2]`, `"model"`, `null`, `12`, ``, `{`, `{"a":}`, `{"a":1,}`, `{"a" 1}`, `{"a":1}{"b":2}`, `{"a":"\x01"}`,
}

func TestReadObjectReadsMembersAsEncodingJSONDoes(t *testing.T) {
	for _, body := range jsonObjectCases {
		checkJSONObject(t, []byte(body))
	}
}

func FuzzReadObject(f *testing.F) {
	for _, body := range jsonObjectCases {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkJSONObject(t, body) })
}

func checkJSONObject(t *testing.T, body []byte) {
	t.Helper()
	var want map[string]json.RawMessage
	wantOK := json.Unmarshal(body, &want) == nil && want != nil
	obj, ok := ReadObject(body)
	if ok != wantOK {
		t.Fatalf("%q: read as an object %v, encoding/json %v", body, ok, wantOK)
	}
	if !ok {
		return
	}
	got := obj.Members()
	if len(got) != len(want) {
		t.Fatalf("%q: %d members, encoding/json %d", body, len(got), len(want))
	}
	for name, w := range want {
		g, found := obj.Get(name)
		if !found || !bytes.Equal(g, w) || !bytes.Equal(got[name], w) {
			t.Fatalf("%q: member %q is %q, encoding/json %q", body, name, g, w)
		}
	}
}
