package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/gpumarket/gpumarket/services/carbon"
	"github.com/gpumarket/gpumarket/services/demo"
)

// A provider sets a rig's site and PUE on the listing form; an empty PUE is the site's default, said as such, and
// editing keeps both.
func TestListingFormSetsSiteAndPUE(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	fjord, err := e.accounts.UserByEmail(ctx, "provider@example.com")
	if err != nil {
		t.Fatal(err)
	}
	client, token := loginBrowser(t, e, "provider@example.com")
	doc := getPage(t, client, e.srv.URL+"/provider/rigs/new")
	if doc.Find(`select#site option`).Length() != 3 || !strings.Contains(doc.Find(`input#pue`).Parent().Text(), "default 1.0 (home)") {
		t.Fatalf("the new rig's form has no site choice or PUE hint: %q", doc.Find(`input#pue`).Parent().Text())
	}

	form := rigForm()
	form.Set("_csrf", token)
	form.Set("site", "datacentre")
	wantStatus(t, postForm(t, client, e.srv.URL+"/provider/rigs", form), http.StatusSeeOther)
	own, err := e.catalog.ListOwn(ctx, fjord.AccountID)
	if err != nil {
		t.Fatal(err)
	}
	o := own[0]
	if o.Site != carbon.SiteDatacentre || o.StatedPUE != nil {
		t.Fatalf("listed at %s with PUE %v, want a data centre and no stated PUE", o.Site, o.StatedPUE)
	}
	edit := getPage(t, client, e.srv.URL+"/provider/rigs/"+o.ID+"/edit")
	if v, _ := edit.Find(`select#site option[selected]`).Attr("value"); v != "datacentre" {
		t.Errorf("the edit form's site %q, want datacentre", v)
	}
	if hint := edit.Find(`input#pue`).Parent().Text(); !strings.Contains(hint, "default 1.3 (data centre)") {
		t.Errorf("the edit form's PUE hint %q", hint)
	}
	rigs := getPage(t, client, e.srv.URL+"/provider/rigs")
	row := rigs.Find(`[data-offering-id="` + o.ID + `"]`)
	if got := row.Find(testID("site-pue")).Text(); got != "data centre, PUE default 1.3 (data centre)" {
		t.Errorf("the rigs page says %q", got)
	}

	// Stating a PUE, then saving the edit form as it comes back: both kept.
	form.Set("pue", "1.12")
	wantStatus(t, postForm(t, client, e.srv.URL+"/provider/rigs/"+o.ID, form), http.StatusSeeOther)
	edit = getPage(t, client, e.srv.URL+"/provider/rigs/"+o.ID+"/edit")
	again := url.Values{"_csrf": {token}}
	edit.Find("form[data-testid=listing-form] input").Each(func(_ int, s *goquery.Selection) {
		if name, ok := s.Attr("name"); ok && name != "_csrf" {
			v, _ := s.Attr("value")
			again.Set(name, v)
		}
	})
	edit.Find("form[data-testid=listing-form] select").Each(func(_ int, s *goquery.Selection) {
		name, _ := s.Attr("name")
		v, _ := s.Find("option[selected]").Attr("value")
		again.Set(name, v)
	})
	wantStatus(t, postForm(t, client, e.srv.URL+"/provider/rigs/"+o.ID, again), http.StatusSeeOther)
	if o, err = e.catalog.Own(ctx, fjord.AccountID, o.ID); err != nil || o.Site != carbon.SiteDatacentre || o.StatedPUE == nil || *o.StatedPUE != 1.12 {
		t.Fatalf("after two edits: %s, PUE %v, %v; want a data centre at 1.12", o.Site, o.StatedPUE, err)
	}

	form.Set("pue", "0.9")
	res, err := client.PostForm(e.srv.URL+"/provider/rigs/"+o.ID, form)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	bad, _ := goqueryFrom(res)
	if res.StatusCode != http.StatusUnprocessableEntity || bad.Find(testID("error-pue")).Length() != 1 {
		t.Errorf("a PUE of 0.9: status %d, error beside pue %d", res.StatusCode, bad.Find(testID("error-pue")).Length())
	}
}

// The provider's JSON API takes site and pue and answers with the PUE the rig's figures use.
func TestAPIListingSiteAndPUE(t *testing.T) {
	t.Parallel()
	e := setup(t)
	owner := e.token(t, "provider@example.com", demo.Password)
	type rig struct {
		ID        string   `json:"id"`
		Site      string   `json:"site"`
		StatedPUE *float64 `json:"stated_pue"`
		PUE       float64  `json:"pue"`
		PUEStated bool     `json:"pue_stated"`
	}
	body := rigJSON()
	body["site"], body["pue"] = "home", 1.05
	var r rig
	wantStatus(t, e.call(t, owner, http.MethodPost, "/api/provider/offerings", body, &r), http.StatusCreated)
	if r.Site != "home" || r.StatedPUE == nil || *r.StatedPUE != 1.05 || r.PUE != 1.05 || !r.PUEStated {
		t.Fatalf("created %+v, want home at a stated 1.05", r)
	}
	body["site"], body["pue"] = "datacentre", nil
	id := r.ID
	r = rig{} // stated_pue is left out when none is stated
	wantStatus(t, e.call(t, owner, http.MethodPut, "/api/provider/offerings/"+id, body, &r), http.StatusOK)
	if r.Site != "datacentre" || r.StatedPUE != nil || r.PUE != 1.3 || r.PUEStated {
		t.Fatalf("updated %+v, want a data centre at its default 1.3", r)
	}
	body["site"], body["pue"] = "garage", 4
	var out apiErrorJSON
	wantStatus(t, e.call(t, owner, http.MethodPost, "/api/provider/offerings", body, &out), http.StatusUnprocessableEntity)
	wantFields(t, out, "pue", "site")
}
