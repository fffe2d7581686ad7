package accounts

import (
	"context"
	"testing"
)

func TestNamesAndEmailsByID(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	ada, err := s.SignUp(ctx, SignUpInput{Email: "ada@example.com", Password: "correct horse", Role: RoleProvider, AccountName: "Fjord"})
	if err != nil {
		t.Fatal(err)
	}
	bo, err := s.SignUp(ctx, SignUpInput{Email: "bo@example.com", Password: "correct horse", Role: RoleDeveloper, AccountName: "Lattice"})
	if err != nil {
		t.Fatal(err)
	}
	const unknown = "00000000-0000-0000-0000-000000000000"

	names, err := NamesByID(ctx, s.pool, []string{ada.AccountID, bo.AccountID, ada.AccountID, unknown, ""})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 2 || names[ada.AccountID] != "Fjord" || names[bo.AccountID] != "Lattice" {
		t.Fatalf("NamesByID = %v", names)
	}
	emails, err := EmailsByID(ctx, s.pool, []string{bo.ID, unknown})
	if err != nil {
		t.Fatal(err)
	}
	if len(emails) != 1 || emails[bo.ID] != "bo@example.com" {
		t.Fatalf("EmailsByID = %v", emails)
	}
	if none, err := NamesByID(ctx, s.pool, nil); err != nil || len(none) != 0 {
		t.Fatalf("NamesByID(nil) = %v, %v", none, err)
	}
}
