package money

import "testing"

// A count agrees with its noun: one thing is singular, every other count (zero and more than
// one) plural, grouped by thousands.
func TestCounted(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{0: "0 requests", 1: "1 request", 2: "2 requests", 1204: "1,204 requests"} {
		if got := Counted(n, "request", "requests"); got != want {
			t.Errorf("Counted(%d) = %q, want %q", n, got, want)
		}
	}
}
