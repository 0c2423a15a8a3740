package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/moziplus/mozi/spawner/backend"
)

// apiError wraps err from the API server with what was being done, and
// with backend.ErrUnavailable where the cluster cannot take the run now:
// it did not answer, is overloaded, or a quota is full.
func apiError(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", what, ctx.Err())
	}
	if unavailable(err) {
		return fmt.Errorf("%s: %w: %w", what, backend.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func unavailable(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		// No answer from the API server (refused, reset, timed out).
		return true
	}
	switch {
	case apierrors.IsServiceUnavailable(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err),
		apierrors.IsTooManyRequests(err), apierrors.IsInternalError(err):
		return true
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota"):
		return true
	}
	return false
}
