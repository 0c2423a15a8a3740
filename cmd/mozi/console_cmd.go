package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/moziplus/mozi/cmd/mozi/internal/config"
	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/webhook/console"
)

func runConsole(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] != "register" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return runConsoleRegister(ctx, e, args)
		}
		return usagef("usage: mozi console register [--redirect-url URL] [--name NAME]")
	}
	return runConsoleRegister(ctx, e, args[1:])
}

// runConsoleRegister creates the console's OAuth2 application in Gitea
// and prints its client id and secret: Gitea shows the secret only once,
// so this is the one place it appears (the terminal, never a log line).
func runConsoleRegister(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "console")
	configPath := fs.String("config", "", "configuration file")
	redirect := fs.String("redirect-url", "", "where Gitea sends users back (default: console.public_url + /auth/callback)")
	name := fs.String("name", "mozi console", "the application's name in Gitea")
	if err := parseFlags(e, fs, args); err != nil {
		return err
	}
	cfg, err := config.Load(*configPath, e.getenv)
	if err != nil {
		return err
	}
	target := *redirect
	if target == "" && cfg.Console.PublicURL != "" {
		target = strings.TrimSuffix(cfg.Console.PublicURL, "/") + "/auth/callback"
	}
	switch {
	case cfg.Gitea.URL == "" || cfg.Gitea.Token == "":
		return errors.New("console register needs gitea.url and a token (MOZI_GITEA_TOKEN): the application belongs to its user")
	case target == "":
		return usagef("where should Gitea send users back? pass --redirect-url https://HOST/auth/callback or set console.public_url")
	case !strings.HasPrefix(target, "http://") && !strings.HasPrefix(target, "https://"):
		return usagef("--redirect-url %q is not an http(s) URL", target)
	}
	app, err := console.Register(ctx, &http.Client{Timeout: cfg.Gitea.Timeout}, cfg.Gitea.URL, cfg.Gitea.Token.Value(), *name, target)
	if err != nil {
		return err
	}
	secretEnv := cfg.Console.OAuth.ClientSecretEnv
	if secretEnv == "" {
		secretEnv = config.DefaultConsoleSecretEnv
	}
	fmt.Fprintf(e.stdout, "registered %q in Gitea (application %d), redirect %s\n\n", app.Name, app.ID, target)
	fmt.Fprintf(e.stdout, "console:\n  oauth:\n    client_id: %s\n\n", app.ClientID)
	fmt.Fprintf(e.stdout, "client secret (shown once, Gitea will not show it again; put it in $%s or the file $%s_FILE names):\n%s\n",
		secretEnv, secretEnv, app.ClientSecret)
	return nil
}

// startConsole serves the web console on its own address when configured;
// the returned stop drains it. Off (a no-op stop) when console.listen is
// empty.
func startConsole(e *env, cfg *config.Config, store *repository.Store, logger *slog.Logger) (func(context.Context), error) {
	if !cfg.Console.Enabled() {
		return func(context.Context) {}, nil
	}
	secret, err := cfg.Console.ClientSecret(e.getenv)
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	if secret == "" {
		return nil, fmt.Errorf("console: no OAuth2 client secret: set $%s (mozi console register prints it)",
			cmpOr(cfg.Console.OAuth.ClientSecretEnv, config.DefaultConsoleSecretEnv))
	}
	srv, err := console.New(console.Config{Store: store, GiteaURL: cfg.Gitea.URL, PublicURL: cfg.Console.PublicURL,
		ClientID: cfg.Console.OAuth.ClientID, ClientSecret: secret.Value(), AnonymousRead: cfg.Console.AnonymousRead,
		SessionTTL: cfg.Console.TTL(), Agents: consoleAgents(cfg), SpawnsPerAgentPerDay: cfg.Dispatcher.SpawnsPerAgentPerDay,
		Logger: logger.With("component", "console")})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Console.Listen)
	if err != nil {
		return nil, fmt.Errorf("console: listen on %s: %w", cfg.Console.Listen, err)
	}
	// Live streams end when their request's context does: cancelled first
	// at shutdown, so draining does not wait for them.
	streams, endStreams := context.WithCancel(context.Background())
	hs := &http.Server{Handler: recoverer(logger)(srv.Handler()), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return streams },
		ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("console server stopped", "error", err)
		}
	}()
	logger.Info("console serving", "listen", ln.Addr().String(), "public_url", cfg.Console.PublicURL,
		"anonymous_read", cfg.Console.AnonymousRead)
	return func(ctx context.Context) {
		endStreams()
		if err := hs.Shutdown(ctx); err != nil {
			_ = hs.Close()
		}
	}, nil
}

// consoleAgents are the agents' limits the console's agents page shows.
func consoleAgents(cfg *config.Config) []console.AgentLimits {
	out := make([]console.AgentLimits, 0, len(cfg.Agents))
	for _, a := range cfg.Agents {
		out = append(out, console.AgentLimits{Login: a.Login, MaxConcurrency: a.MaxConcurrency,
			MaxCostUSD: a.MaxCostUSD, MaxTokens: a.MaxTokens, Disabled: a.Disabled})
	}
	return out
}
