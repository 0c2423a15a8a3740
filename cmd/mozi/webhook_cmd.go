package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/moziplus/mozi/cmd/mozi/internal/config"
	"github.com/moziplus/mozi/repository/gitea"
)

// repoList collects repeated --repo flags.
type repoList []string

func (r *repoList) String() string { return strings.Join(*r, ",") }
func (r *repoList) Set(v string) error {
	*r = append(*r, v)
	return nil
}

func runWebhook(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] != "install" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return runWebhookInstall(ctx, e, args)
		}
		return usagef("usage: mozi webhook install [--repo OWNER/NAME…] [--org ORG] [--url URL]")
	}
	return runWebhookInstall(ctx, e, args[1:])
}

func runWebhookInstall(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "webhook")
	configPath := fs.String("config", "", "configuration file")
	var repos repoList
	fs.Var(&repos, "repo", "repository OWNER/NAME (repeatable; default: gitea.repos)")
	org := fs.String("org", "", "install one organization-wide webhook instead")
	url := fs.String("url", "", "URL Gitea posts to (default: webhook.public_url)")
	if err := parseFlags(e, fs, args); err != nil {
		return err
	}
	cfg, err := config.Load(*configPath, e.getenv)
	if err != nil {
		return err
	}
	target := *url
	if target == "" {
		target = cfg.Webhook.PublicURL
	}
	switch {
	case cfg.Gitea.URL == "" || cfg.Gitea.Token == "":
		return errors.New("webhook install needs gitea.url and a token (MOZI_GITEA_TOKEN) of a user who administers the repositories")
	case target == "":
		return usagef("where should Gitea send deliveries? pass --url http://HOST:PORT/webhooks/gitea or set webhook.public_url")
	case !strings.HasPrefix(target, "http://") && !strings.HasPrefix(target, "https://"):
		return usagef("--url %q is not an http(s) URL", target)
	case len(cfg.Webhook.Secrets) == 0:
		return errors.New("no webhook secret configured: set MOZI_WEBHOOK_SECRET (or MOZI_WEBHOOK_SECRET_FILE) first, so Gitea signs what it sends")
	}
	var scopes []gitea.HookScope
	if *org != "" {
		scopes = append(scopes, gitea.HookScope{Org: *org})
	}
	if len(repos) == 0 && *org == "" {
		repos = cfg.Gitea.Repos
	}
	for _, r := range repos {
		if owner, name, ok := strings.Cut(r, "/"); !ok || owner == "" || name == "" {
			return usagef("--repo %q is not OWNER/NAME", r)
		}
		scopes = append(scopes, gitea.HookScope{Repo: r})
	}
	if len(scopes) == 0 {
		return usagef("name the repositories: --repo OWNER/NAME (or list them in gitea.repos), or --org ORG")
	}
	g, err := newGiteaClient(cfg, slog.New(slog.DiscardHandler), nil, nil)
	if err != nil {
		return err
	}
	// The events to ask for depend on the forge: doctor judges the hook
	// by the same list.
	forge, err := g.DetectForge(ctx)
	if err != nil {
		return fmt.Errorf("webhook install: %w", err)
	}
	if forge.Forgejo {
		fmt.Fprintf(e.stdout, "%s: %s\n", forge, forgejoCINote(cfg))
	}
	failed := 0
	for _, s := range scopes {
		h, replaced, err := g.InstallHook(ctx, forge, s, target, cfg.Webhook.Secrets[0].Value())
		if err != nil {
			fmt.Fprintf(e.stderr, "mozi: %s: %v\n", s, err)
			failed++
			continue
		}
		verb := "created"
		if len(replaced) > 0 {
			// Gitea cannot change a hook's secret in place.
			verb = fmt.Sprintf("created, replacing webhook %s", joinIDs(replaced))
		}
		fmt.Fprintf(e.stdout, "%s: webhook %d %s → %s (json, signed, %d events)\n", s, h.ID, verb, target, len(h.Events))
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d webhooks not installed", failed, len(scopes))
	}
	return nil
}

// joinIDs lists webhook ids: 3, 7.
func joinIDs(ids []int64) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(parts, ", ")
}
