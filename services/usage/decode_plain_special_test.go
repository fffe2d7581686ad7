package usage

import "testing"

// TestSpecial holds the eight-byte scan of plainString to the byte-by-byte rule: a quote, a
// backslash or a control character anywhere among the eight, beside any other bytes.
func TestSpecial(t *testing.T) {
	for _, fill := range []byte{'a', 0x7f, 0x80, 0xff, ' ', '!', '#', '[', ']'} {
		for k := range 8 {
			for b := range 256 {
				s := []byte{fill, fill, fill, fill, fill, fill, fill, fill}
				s[k] = byte(b)
				want := b == '"' || b == '\\' || b < 0x20
				if got := special(string(s)); got != want {
					t.Fatalf("special(%q) = %v, want %v", s, got, want)
				}
			}
		}
	}
}
