package templates

// UsageStreamPage is the admins' view of the per-rig limits on the usage stream.
type UsageStreamPage struct {
	Page
	Watched bool   // false where this process does not watch the stream
	Limits  string // the limits in force, in a sentence
	Checked string // when the stream was last read
	Error   string // why that failed, if it did
	Pending string // events the stream holds unmetered, and of how many rigs
	Rigs    []StreamRigRow
}

// StreamRigRow is a rig at its limit, over its rate or shut out.
type StreamRigRow struct {
	ProviderID, OfferingID string
	// Provider and Offering name them; "" when the platform has no such account or offering.
	Provider, Offering string
	Pending            string
	AtLimit            bool
	Rate               string // events per second
	OverRate           bool
	ShutOutUntil       string // "" when not shut out
}
