package spawner

import (
	"bytes"
	"io"
	"sync"
)

// The output filters every run's output goes through, whatever backend
// ran it: the log file (never failing), the redactor, the tail kept with
// the attempt and the usage meter (usage.go).

// logWriter writes the attempt's log and never fails: a log that cannot be
// written (disk full) must not end the copy of the agent's output, which
// would kill the agent with SIGPIPE and blind the tail and the usage
// meter. Every write is still tried, so the log has what could be written;
// the first error is kept for the attempt.
type logWriter struct {
	f     io.Writer
	first error
}

func (l *logWriter) Write(p []byte) (int, error) {
	if _, err := l.f.Write(p); err != nil && l.first == nil {
		l.first = err
	}
	return len(p), nil
}

func (l *logWriter) err() error { return l.first }

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// redacted replaces a secret in the output.
const redacted = "[redacted]"

// minSecret is the shortest value redacted: a shorter one protects nothing
// and would blank out ordinary output.
const minSecret = 4

// redactor replaces secrets in a stream with [redacted]. A write may end
// in the middle of a secret (the pipe hands the output over in arbitrary
// pieces), so what could be the start of one is held back until the next
// write, or Flush, decides.
type redactor struct {
	w       io.Writer
	secrets [][]byte
	longest int
	pending []byte
}

func newRedactor(w io.Writer, secrets []string) *redactor {
	r := &redactor{w: w}
	for _, s := range secrets {
		if len(s) >= minSecret {
			r.secrets = append(r.secrets, []byte(s))
			r.longest = max(r.longest, len(s))
		}
	}
	return r
}

func (r *redactor) Write(p []byte) (int, error) {
	if len(r.secrets) == 0 {
		return r.w.Write(p)
	}
	r.pending = append(r.pending, p...)
	r.redact(false)
	return len(p), nil
}

// Flush writes what was held back; the stream is over.
func (r *redactor) Flush() { r.redact(true) }

func (r *redactor) redact(final bool) {
	buf := r.pending
	var out []byte
	for len(buf) > 0 {
		at, n := r.match(buf)
		if !final {
			if h := r.partial(buf); h >= 0 && h <= at {
				// buf[h:] may still become a secret (a longer one than
				// what matches at h, maybe): wait for more.
				out = append(out, buf[:h]...)
				buf = buf[h:]
				break
			}
		}
		out = append(out, buf[:at]...)
		if n == 0 {
			buf = buf[at:]
			break
		}
		out = append(out, redacted...)
		buf = buf[at+n:]
	}
	r.pending = append(r.pending[:0], buf...)
	if len(out) > 0 {
		_, _ = r.w.Write(out)
	}
}

// match finds the first secret in buf, the longest one where several
// start at the same place: where it is and its length (len(buf), 0: none).
func (r *redactor) match(buf []byte) (at, n int) {
	at = len(buf)
	for _, s := range r.secrets {
		i := bytes.Index(buf[:min(len(buf), at+len(s))], s)
		if i >= 0 && (i < at || i == at && len(s) > n) {
			at, n = i, len(s)
		}
	}
	return at, n
}

// partial is where the earliest end of buf that is the beginning of a
// secret (but not all of it) starts; -1: nowhere.
func (r *redactor) partial(buf []byte) int {
	for i := max(0, len(buf)-r.longest+1); i < len(buf); i++ {
		for _, s := range r.secrets {
			if len(s) > len(buf)-i && bytes.HasPrefix(s, buf[i:]) {
				return i
			}
		}
	}
	return -1
}

// tail keeps the last n bytes written.
type tail struct {
	n   int
	buf []byte
}

func newTail(n int) *tail { return &tail{n: n} }

func (t *tail) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.n {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.n:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	b := t.buf
	if len(b) > t.n {
		b = b[len(b)-t.n:]
	}
	for len(b) > 0 && b[0]&0xC0 == 0x80 { // start on a rune
		b = b[1:]
	}
	return string(b)
}
