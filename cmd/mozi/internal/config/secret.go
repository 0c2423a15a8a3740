package config

import "log/slog"

// Secret holds a value that must never appear in a log line, an error, a
// prompt or a printed configuration. Value returns it for the one place
// that needs it.
type Secret string

const redacted = "[redacted]"

// Value returns the secret itself.
func (s Secret) Value() string { return string(s) }

// String hides the value.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString hides the value from %#v.
func (s Secret) GoString() string { return s.String() }

// LogValue hides the value from slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalText hides the value from encoders (JSON, YAML).
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }
