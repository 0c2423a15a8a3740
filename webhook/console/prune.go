package console

import "context"

// pruneBatch bounds the expired sessions one sign-in or sign-out deletes.
// Each sign-in adds one session and prunes up to this many, so expired
// rows (and the tokens they hold) never pile up, and no request waits on
// a long delete.
const pruneBatch = 500

// prune deletes expired sessions. A failure costs only a few stale rows,
// which the next sign-in prunes: the user's request goes on.
func (s *Server) prune(ctx context.Context) {
	n, err := s.store.PruneConsoleSessions(ctx, pruneBatch)
	if err != nil {
		s.log.Warn("expired console sessions not pruned", "error", err)
		return
	}
	if n > 0 {
		s.log.Debug("expired console sessions pruned", "sessions", n)
	}
}
