package templates

// MembersPage is an account's members and its pending invitations.
type MembersPage struct {
	Page
	AccountName string
	AccountKind string
	// Manages says the viewer may invite, change and remove members; Owner that it may also make
	// and change owners.
	Manages     bool
	Owner       bool
	Members     []MemberRow
	Invitations []InvitationRow
	Roles       []Option // the roles the viewer may give
	Form        Form     // the invitation form
	// Sent is the email an invitation was just sent to.
	Sent string
}

// MemberRow is one member of the account.
type MemberRow struct {
	UserID string
	Email  string
	Role   string
	Since  string
	You    bool
	// Changeable says the viewer may change this member's role and remove them.
	Changeable bool
}

// InvitationRow is one pending invitation.
type InvitationRow struct {
	ID        string
	Email     string
	Role      string
	InvitedBy string
	Expires   string
}

// RemoveMemberPage asks what becomes of a member's API keys before removing them.
type RemoveMemberPage struct {
	Page
	Member MemberRow
	// LiveKeys is how many live API keys the member created; Others the members who could take them.
	LiveKeys     int
	LiveKeysText string // "1 live API key", "2 live API keys"
	Others       []Option
	Form         Form
	// Confirm are the fields that make the form this removal's confirmation.
	Confirm []HiddenField
}

// InvitationPage is an invitation as its link opens it: to accept with the login's password, or by
// making a login; Refused, when set, says why the link no longer works.
type InvitationPage struct {
	Page
	Token       string
	AccountName string
	Email       string
	Role        string
	InvitedBy   string
	HasLogin    bool
	// SignedInAs says the visitor is signed in as the invited email: accepting needs no password.
	SignedInAs bool
	Refused    string
	Form       Form
}
