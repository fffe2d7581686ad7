package services

import "testing"

func TestCSVTextDefusesFormulas(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`=HYPERLINK("http://evil.example")`, `'=HYPERLINK("http://evil.example")`},
		{"+1+1", "'+1+1"},
		{"-2+3", "'-2+3"},
		{"@SUM(A1:A9)", "'@SUM(A1:A9)"},
		{"\t=1", "'\t=1"},
		{"\r=1", "'\r=1"},
		{"Acme = 1", "Acme = 1"},
		{"Łódź Analytics", "Łódź Analytics"},
		{"", ""},
	} {
		if got := CSVText(c.in); got != c.want {
			t.Errorf("CSVText(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
