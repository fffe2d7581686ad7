package services

import "strings"

// CSVText defuses text that another party chose (a provider's name, a model's, a memo, a
// legal name) for a CSV cell: a spreadsheet runs a cell that starts like a formula, so such
// text gets a leading quote. Figures the platform wrote itself (amounts, counts, times) go
// into cells as they are.
func CSVText(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
