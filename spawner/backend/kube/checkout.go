package kube

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/moziplus/mozi/spawner/backend"
)

// checkoutScript is the init step: clone the repository into the
// workspace and check out what the run works on. The token reaches git
// only through a credential helper reading $GITEA_TOKEN (set from the
// Secret), so it is in no argv, no URL and no log; the helper stays in the
// clone's config for the agent's pushes, as in the local backend's
// worktrees. Its last line on failure says why, for Exit.Why.
const checkoutScript = `set -eu
helper='!f() { test "$1" = get || exit 0; echo "username=${GITEA_USER:-mozi-agent}"; echo "password=${GITEA_TOKEN:-}"; }; f'
g() { git -c credential.helper= -c "credential.helper=$helper" "$@"; }
cd ` + workspaceDir + `
if ! g clone --quiet --no-checkout "$MOZI_REMOTE" . 2>/tmp/clone.err; then
	cat /tmp/clone.err >&2
	echo "cannot clone $MOZI_REMOTE" >&2
	exit 2
fi
git config credential.helper "$helper"
has() { git rev-parse --verify --quiet "refs/remotes/origin/$1" >/dev/null; }
case "$MOZI_MODE" in
new)
	if has "$MOZI_BRANCH"; then
		git checkout --quiet -B "$MOZI_BRANCH" --track "origin/$MOZI_BRANCH"
	else
		git checkout --quiet -b "$MOZI_BRANCH" --no-track origin/HEAD
	fi ;;
existing)
	if ! has "$MOZI_BRANCH"; then
		echo "branch $MOZI_BRANCH is not on the remote" >&2
		exit 3
	fi
	git checkout --quiet -B "$MOZI_BRANCH" --track "origin/$MOZI_BRANCH" ;;
detached)
	if [ -z "$MOZI_REF" ]; then
		git checkout --quiet --detach origin/HEAD
	elif has "$MOZI_REF"; then
		git checkout --quiet --detach "origin/$MOZI_REF"
	elif git rev-parse --verify --quiet "$MOZI_REF^{commit}" >/dev/null; then
		git checkout --quiet --detach "$MOZI_REF"
	elif g fetch --quiet origin "$MOZI_REF" 2>/dev/null; then
		git checkout --quiet --detach FETCH_HEAD
	else
		echo "ref $MOZI_REF is not on the remote" >&2
		exit 3
	fi ;;
esac
`

func checkoutMode(m backend.Mode) string {
	switch m {
	case backend.ExistingBranch:
		return "existing"
	case backend.Detached:
		return "detached"
	default:
		return "new"
	}
}

// checkoutContainer is the init step for run r; tokenEnv are the
// environment entries (from the Secret) git's credential helper reads.
func (b *Backend) checkoutContainer(r backend.Run, image string, tokenEnv []corev1.EnvVar) corev1.Container {
	env := []corev1.EnvVar{
		{Name: "MOZI_REMOTE", Value: b.cfg.RemoteURL(r.Repo)},
		{Name: "MOZI_MODE", Value: checkoutMode(r.Checkout.Mode)},
		{Name: "MOZI_BRANCH", Value: r.Checkout.Branch},
		{Name: "MOZI_REF", Value: r.Checkout.Ref},
		// No prompt for credentials: a refused token fails the clone.
		{Name: "GIT_TERMINAL_PROMPT", Value: "0"},
		{Name: "HOME", Value: "/tmp"},
	}
	env = append(env, tokenEnv...)
	return corev1.Container{
		Name:            checkoutContainerName,
		Image:           cmpImage(b.cfg.CheckoutImage, image),
		ImagePullPolicy: b.cfg.PullPolicy,
		Command:         []string{"/bin/sh", "-c", checkoutScript},
		Env:             env,
		VolumeMounts:    []corev1.VolumeMount{{Name: workspaceVolume, MountPath: workspaceDir}},
	}
}

func cmpImage(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
