package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const tokenA = "3cab16c93a1384c5c38ac9419078e53ea6b08c368c48b8f3093db13cddec7e65"
const tokenB = "254e2296d2214000ef2cfb0280cf611d09446dc014aad45d728746736f962bcb"

func write(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReadTokensTakesTheNamedColumn(t *testing.T) {
	path := write(t, "tokens.csv", "lang,token\nen,"+tokenA+"\nde,<"+strings.ToUpper(tokenB[:8])+" "+tokenB[8:]+">\n")
	tokens, err := readTokens(path, "token")
	if err != nil {
		t.Fatal(err)
	}
	if len(tokens) != 2 || tokens[0] != tokenA || tokens[1] != tokenB {
		t.Fatalf("got %q", tokens)
	}
}

func TestReadTokensWithoutHeaderTakesTheFirstColumn(t *testing.T) {
	tokens, err := readTokens(write(t, "tokens.csv", tokenA+"\n\n"+tokenB+"\n"), "token")
	if err != nil || len(tokens) != 2 {
		t.Fatalf("got %q, %v", tokens, err)
	}
}

func TestReadTokensRefusesABadRowWithItsLine(t *testing.T) {
	path := write(t, "tokens.csv", "token\n"+tokenA+"\n"+tokenA[:63]+"\n")
	_, err := readTokens(path, "token")
	var input inputError
	if !errors.As(err, &input) || !strings.Contains(err.Error(), path+":3:") {
		t.Fatalf("got %v", err)
	}
}

func TestReadTokensRefusesAnEmptyFile(t *testing.T) {
	if _, err := readTokens(write(t, "tokens.csv", "token\n"), "token"); err == nil {
		t.Fatal("an empty file was taken")
	}
}

func TestReadProviderTokenFromAMintedFileOrAJWTAlone(t *testing.T) {
	jwt := "eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJUIn0.c2ln"
	minted := write(t, "token.json", `{"issuedAt":1,"keyID":"K","teamID":"T","token":"`+jwt+`"}`)
	if token, err := readProviderToken(minted); err != nil || token != jwt {
		t.Fatalf("got %q, %v", token, err)
	}
	if token, err := readProviderToken(write(t, "token.txt", jwt+"\n")); err != nil || token != jwt {
		t.Fatalf("got %q, %v", token, err)
	}
	if _, err := readProviderToken(write(t, "bad.json", `{"token":""}`)); err == nil {
		t.Fatal("a file without a token was taken")
	}
}

func TestParseOptionsRefusesTwoAuthenticationsOrNone(t *testing.T) {
	base := []string{"-tokens", "t", "-payload", "p", "-topic", "x", "-gateway", "127.0.0.1:1"}
	cases := [][]string{
		base,
		append(append([]string{}, base...), "-cert", "c", "-key", "k", "-provider-token", "j"),
		append(append([]string{}, base...), "-cert", "c"),
		append(append([]string{}, base...), "-provider-token", "j", "-provider-token-file", "f"),
		{"-tokens", "t", "-payload", "p", "-topic", "x", "-gateway", "nohost", "-provider-token", "j"},
	}
	for _, arguments := range cases {
		var usage usageError
		if _, err := parseOptions(arguments); !errors.As(err, &usage) {
			t.Errorf("%q: got %v", arguments, err)
		}
	}
	if _, err := parseOptions(append(append([]string{}, base...), "-provider-token", "j")); err != nil {
		t.Fatal(err)
	}
}

func TestTransportReasonNamesADialFailure(t *testing.T) {
	if reason := transportReason(dialError{errors.New("connection refused")}); reason != "transport: dial" {
		t.Fatalf("got %q", reason)
	}
}
