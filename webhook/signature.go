package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
)

var (
	errNoSignature  = errors.New("missing X-Gitea-Signature (or X-Forgejo-Signature)")
	errBadSignature = errors.New("signature does not match any configured secret")
)

// verifySignature checks the hex HMAC-SHA256 of body against every secret
// (several during a rotation), in constant time per secret.
func verifySignature(body []byte, signature string, secrets [][]byte) error {
	if signature == "" {
		return errNoSignature
	}
	got, err := hex.DecodeString(signature)
	if err != nil || len(got) != sha256.Size {
		return errBadSignature
	}
	for _, secret := range secrets {
		mac := hmac.New(sha256.New, secret)
		mac.Write(body)
		if hmac.Equal(got, mac.Sum(nil)) {
			return nil
		}
	}
	return errBadSignature
}

// Sign returns the X-Gitea-Signature of body under secret (mozi replay
// and tests sign with it).
func Sign(body []byte, secret string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}
