package web

import (
	"github.com/gpumarket/gpumarket/services/documents"
	"github.com/gpumarket/gpumarket/templates"
)

// documentLinks are the toolbar links of a document's page; "" leaves one out.
type documentLinks struct {
	Back, PDF, CSV string
}

// documentPage fills a document's print-ready page from its sheet, the layout the PDF is
// drawn from, so that the page and the PDF show the same figures. A handler makes the sheet
// with documents.Document.Sheet, which refuses a document that does not add up.
func documentPage(s documents.Sheet, links documentLinks) templates.DocumentPage {
	p := templates.DocumentPage{
		Title: s.Title, Number: s.Number, Status: s.Status, Marker: s.Marker,
		Facts:   documentFacts(s.Facts),
		Seller:  documentParty(s.Seller),
		Buyer:   documentParty(s.Buyer),
		Columns: s.Columns,
		Notes:   s.Notes,
		Summary: documentFacts(s.Summary),
		Footer:  s.Footer,
		BackURL: links.Back, PDFURL: links.PDF, CSVURL: links.CSV,
	}
	for _, l := range s.Lines {
		p.Lines = append(p.Lines, templates.DocumentLine{
			Description: l.Description, Detail: l.Detail,
			InputTokens: l.InputTokens, OutputTokens: l.OutputTokens,
			InputPrice: l.InputPrice, OutputPrice: l.OutputPrice,
			Amount: l.Amount,
		})
	}
	for _, t := range s.Totals {
		p.Totals = append(p.Totals, templates.DocumentTotal{Label: t.Label, Value: t.Value, Strong: t.Strong})
	}
	return p
}

func documentFacts(fs []documents.Figure) []templates.Fact {
	out := make([]templates.Fact, 0, len(fs))
	for _, f := range fs {
		out = append(out, templates.Fact{Label: f.Label, Value: f.Value})
	}
	return out
}

func documentParty(b documents.PartyBlock) templates.DocumentParty {
	return templates.DocumentParty{Label: b.Label, Name: b.Name, Lines: b.Lines}
}
