package main

import (
	"io"
	"log/slog"

	"github.com/moziplus/mozi/cmd/mozi/internal/config"
)

func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level)) // validated by config
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// newCLILogger is for short commands: their output is the answer, so only
// warnings and errors are logged unless debug logging was asked for.
func newCLILogger(c config.Log, w io.Writer) *slog.Logger {
	if c.Level != "debug" && c.Level != "error" {
		c.Level = "warn"
	}
	return newLogger(c, w)
}
