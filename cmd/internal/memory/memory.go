// Package memory is the Go runtime's memory policy of mozi serve, which
// mozi-bench applies too so that what it measures in process runs as it
// runs there.
package memory

import (
	"log/slog"
	"runtime/debug"
	"strconv"
)

// DefaultGCPercent is the GC target mozi sets unless GOGC is: mozi's live
// heap is small, but every webhook delivery allocates its body, so Go's
// default (100) collects very often under load (docs/performance.md:
// 3367 → 4287 deliveries/s).
const DefaultGCPercent = 400

// DefaultLimit is the soft memory limit mozi sets unless GOMEMLIMIT or
// memory_limit says otherwise. GOGC=400 alone lets the heap grow to five
// times the live data before a collection; near the limit the collector
// works harder instead, so a burst of huge deliveries does not take the
// heap, and the memory the process keeps from the system, to hundreds of
// megabytes. mozi's live data stays far below it.
const DefaultLimit = 256 << 20

// MinLimit is the least memory_limit accepted: under it the collector
// would run nearly all the time.
const MinLimit = 64 << 20

// Policy is what Tune set.
type Policy struct {
	GCPercent    string // GOGC's value
	Limit        string // the soft memory limit, GOMEMLIMIT's syntax
	FromEnv      []string
	LimitInBytes int64
}

// LogValue logs the policy as one group.
func (p Policy) LogValue() slog.Value {
	attrs := []slog.Attr{slog.String("gogc", p.GCPercent), slog.String("memory_limit", p.Limit)}
	if len(p.FromEnv) > 0 {
		attrs = append(attrs, slog.Any("from_environment", p.FromEnv))
	}
	return slog.GroupValue(attrs...)
}

// Tune sets GOGC to DefaultGCPercent unless GOGC is set, and the soft
// memory limit to limit bytes (0: DefaultLimit) unless GOMEMLIMIT is set:
// the runtime has applied those already.
func Tune(getenv func(string) string, limit int64) Policy {
	p := Policy{GCPercent: getenv("GOGC"), Limit: getenv("GOMEMLIMIT")}
	if p.GCPercent == "" {
		debug.SetGCPercent(DefaultGCPercent)
		p.GCPercent = "400"
	} else {
		p.FromEnv = append(p.FromEnv, "GOGC")
	}
	if p.Limit == "" {
		if limit <= 0 {
			limit = DefaultLimit
		}
		debug.SetMemoryLimit(limit)
		p.Limit = formatLimit(limit)
	} else {
		p.FromEnv = append(p.FromEnv, "GOMEMLIMIT")
	}
	p.LimitInBytes = debug.SetMemoryLimit(-1)
	return p
}

// formatLimit writes a limit as GOMEMLIMIT would (256MiB).
func formatLimit(n int64) string {
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}
