package templates

// ConfirmPage asks for an action once more, with what it will do.
type ConfirmPage struct {
	Page
	Title string
	// Stale, when set, says why an earlier confirmation was not acted on.
	Stale        string
	Consequences []string
	// Items lists the documents of an action on many (or the one of an action on one), with
	// their party and amount; Total is their sum, "" for none.
	Items                   []ConfirmItem
	PartyLabel, AmountLabel string
	Total                   string
	// Button is the confirm button's text; "" offers no button (nothing can be done). Danger
	// marks an action that destroys or cannot be undone: its button is drawn as such.
	Button string
	Danger bool
	Action string
	// Hidden are the fields the action was posted with, posted again.
	Hidden []HiddenField
	Token  string
	Back   string
}

// ConfirmItem is one document of a confirmation.
type ConfirmItem struct {
	ID, Label, Party, Amount string
}

// HiddenField is a form's field posted as it was.
type HiddenField struct {
	Name, Value string
}
