package money

import "testing"

func TestParseMicroUSD(t *testing.T) {
	cases := []struct {
		in   string
		want MicroUSD
		bad  bool
	}{
		{"0.149", 149_000, false},
		{"$2", 2_000_000, false},
		{" 12.5 ", 12_500_000, false},
		{".5", 500_000, false},
		{"0.000001", 1, false},
		{"0.0000001", 0, true},
		{"-1", 0, true},
		{"1e3", 0, true},
		{"abc", 0, true},
		{"", 0, true},
		{"99999999999", 0, true},
	}
	for _, c := range cases {
		got, err := ParseMicroUSD(c.in)
		if c.bad {
			if err == nil {
				t.Errorf("ParseMicroUSD(%q) = %d, want an error", c.in, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseMicroUSD(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
}

func TestMicroUSDString(t *testing.T) {
	for m, want := range map[MicroUSD]string{149_000: "$0.149", 2_000_000: "$2.00", 125: "$0.000125", -1_500_000: "$-1.50", 0: "$0.00"} {
		if got := m.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int64(m), got, want)
		}
	}
}

func TestMicroUSDJSON(t *testing.T) {
	var m MicroUSD
	if err := m.UnmarshalJSON([]byte(`0.3003`)); err != nil || m != 300_300 {
		t.Fatalf("number: %d %v", m, err)
	}
	if err := m.UnmarshalJSON([]byte(`"1.25"`)); err != nil || m != 1_250_000 {
		t.Fatalf("string: %d %v", m, err)
	}
	b, _ := m.MarshalJSON()
	if string(b) != `"1.25"` {
		t.Fatalf("marshal: %s", b)
	}
}
