package spawner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/task"
)

// Pauser records the usage limits agents hit (repository.Store).
type Pauser interface {
	PauseCredential(ctx context.Context, p repository.Pause) (int, error)
}

// DefaultMaxResumesPerDay is how many times a day the agents of one
// credential resume by themselves at a usage limit's reset.
const DefaultMaxResumesPerDay = 3

// providerKeys are the variables a CLI takes its provider credential from:
// agents whose first one found holds the same value share an account.
var providerKeys = []string{"CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN",
	"CODEX_API_KEY", "OPENAI_API_KEY"}

// credential names the provider account agent a runs on, never its
// secret: its configured name; else a hash prefix of its provider key
// (from its env or the variables it passes); else the agent alone.
func credential(login string, a Agent, getenv func(string) string) string {
	if a.Credential != "" {
		return a.Credential
	}
	for _, k := range providerKeys {
		v, ok := a.Env[k]
		if !ok && slices.Contains(a.PassEnv, k) {
			v = getenv(k)
		}
		if v != "" {
			sum := sha256.Sum256([]byte(k + "=" + v))
			return "key:" + hex.EncodeToString(sum[:6])
		}
	}
	return "agent:" + login
}

// sharing lists the agents on credential c, in login order.
func (s *Spawner) sharing(c string) []string {
	var logins []string
	for login, a := range s.cfg.Agents {
		if credential(login, a, s.cfg.Getenv) == c {
			logins = append(logins, login)
		}
	}
	slices.Sort(logins)
	return logins
}

// pause records that the run of t hit a usage limit: every agent on the
// same credential waits for the reset (or a backoff when the CLI gave
// none). Past the daily cap of unattended resumes the reset becomes
// task.HeldForAPerson. It returns r with the reset the task waits for.
func (s *Spawner) pause(ctx context.Context, log *slog.Logger, t task.Task, r Result, now time.Time) Result {
	counted := !r.Reset.IsZero() && r.Reset.After(now)
	if !counted {
		r.Reset = now.Add(task.Backoff(t.Holds+1, s.cfg.HoldBase, s.cfg.HoldMax))
	}
	c := credential(t.Agent, s.cfg.Agents[t.Agent], s.cfg.Getenv)
	agents := s.sharing(c)
	if !slices.Contains(agents, t.Agent) {
		agents = append(agents, t.Agent)
	}
	capped := false
	if s.cfg.Pauses != nil {
		resumes, err := s.cfg.Pauses.PauseCredential(context.WithoutCancel(ctx), repository.Pause{Credential: c,
			Agents: agents, Until: r.Reset, Reason: r.Err, Counted: counted})
		switch {
		case err != nil:
			// The task itself still waits for the reset; the agents that
			// share its credential find the limit by themselves.
			log.Warn("usage limit not recorded for the agents sharing the credential", "error", err)
		case counted && resumes > s.cfg.MaxResumesPerDay:
			capped = true
			r.Err = fmt.Sprintf("%s; %d unattended resumes today, over the daily cap of %d: held until a person runs mozi task resume %d",
				r.Err, resumes, s.cfg.MaxResumesPerDay, t.ID)
			if _, err := s.cfg.Pauses.PauseCredential(context.WithoutCancel(ctx), repository.Pause{Credential: c,
				Agents: agents, Until: task.HeldForAPerson, Reason: r.Err}); err != nil {
				log.Warn("usage limit cap not recorded for the agents sharing the credential", "error", err)
			}
		}
	}
	if capped {
		r.Reset = task.HeldForAPerson
	}
	return r
}
