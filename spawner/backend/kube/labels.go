package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// labelValue makes s a valid label value (at most 63 characters of
// [A-Za-z0-9-_.], alphanumeric at both ends). It is deterministic, so
// that Sweep can compare a ledger's lease owner with a Job's label; a value
// that had to change keeps a hash of the original, so that two owners
// differing only in what was cut stay apart.
func labelValue(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '-'
		}
	}
	v := strings.Trim(string(b), "-_.")
	if v == s && len(v) <= 63 {
		return v
	}
	sum := sha256.Sum256([]byte(s))
	h := hex.EncodeToString(sum[:4])
	if len(v) > 54 {
		v = strings.TrimRight(v[:54], "-_.")
	}
	if v == "" {
		return h
	}
	return v + "-" + h
}
