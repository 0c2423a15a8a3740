package console

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// The user's Gitea token is stored sealed (AES-256-GCM) under a key
// derived from the OAuth2 client secret, so a dump of console_sessions
// gives out no user's token: its reader would need mozi's secret too.
// The session's id hash is the additional data, so a sealed token copied
// to another row does not open there. Rotating the client secret signs
// every user out, which is what a rotation is for.

// sealedPrefix marks the format, so that another can follow.
const sealedPrefix = "v1:"

// tokenInfo is the HKDF context: this key is for nothing else.
const tokenInfo = "mozi console: users' Gitea tokens at rest, v1"

// errUnsealable is a stored token this mozi cannot open: sealed under
// another client secret, damaged, or of a session from before sealing.
var errUnsealable = errors.New("the session's token cannot be opened")

// newSealer derives the token key from the client secret; without one
// (a console under test), from a random secret of this process.
func newSealer(clientSecret string) (cipher.AEAD, error) {
	secret := []byte(clientSecret)
	if len(secret) == 0 {
		secret = make([]byte, 32)
		_, _ = rand.Read(secret) // crypto/rand.Read never fails (Go 1.24+)
	}
	key, err := hkdf.Key(sha256.New, secret, nil, tokenInfo, 32)
	if err != nil {
		return nil, fmt.Errorf("console: derive the token key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("console: token cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("console: token cipher: %w", err)
	}
	return aead, nil
}

// sealToken seals a user's token for the session whose id hash is idHash.
func sealToken(aead cipher.AEAD, idHash []byte, token string) string {
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(token)+aead.Overhead())
	_, _ = rand.Read(nonce)
	return sealedPrefix + base64.RawStdEncoding.EncodeToString(aead.Seal(nonce, nonce, []byte(token), idHash))
}

// openToken opens what sealToken sealed for the same session.
func openToken(aead cipher.AEAD, idHash []byte, sealed string) (string, error) {
	enc, ok := strings.CutPrefix(sealed, sealedPrefix)
	if !ok {
		return "", errUnsealable
	}
	b, err := base64.RawStdEncoding.DecodeString(enc)
	if err != nil || len(b) < aead.NonceSize() {
		return "", errUnsealable
	}
	token, err := aead.Open(nil, b[:aead.NonceSize()], b[aead.NonceSize():], idHash)
	if err != nil {
		return "", errUnsealable
	}
	return string(token), nil
}
