package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/moziplus/mozi/cmd/mozi/internal/config"
	"github.com/moziplus/mozi/webhook"
	"github.com/moziplus/mozi/webhook/recording"
)

func runReplay(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "replay")
	configPath := fs.String("config", "", "configuration file (gives the secret and the listen address)")
	target := fs.String("url", "", "webhook URL (default http://LISTEN/webhooks/gitea from the configuration)")
	keepIDs := fs.Bool("keep-ids", false, "send the recorded delivery ids instead of new ones (mozi then answers 200 duplicate)")
	delay := fs.Duration("delay", 0, "pause between deliveries")
	settle := fs.Bool("settle", false, "after each delivery, wait until mozi has processed it and every agent it started has finished (needs the database: --data-dir or database.url as for mozi tasks)")
	settleTimeout := fs.Duration("settle-timeout", 2*time.Minute, "with --settle, how long one delivery may take to settle")
	dataDir := fs.String("data-dir", "", "with --settle, the state directory of the embedded database")
	if err := parseFlags(e, fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usagef("replay needs recorded deliveries: FILE.json (with FILE.headers.json beside it) or directories of them")
	}
	cfg, err := config.Load(*configPath, e.getenv)
	if err != nil {
		return err
	}
	if len(cfg.Webhook.Secrets) == 0 {
		return fmt.Errorf("replay signs deliveries with the webhook secret, and none is configured (webhook.secrets or MOZI_WEBHOOK_SECRET)")
	}
	secret := cfg.Webhook.Secrets[0].Value()
	url := *target
	if url == "" {
		host, port, _ := net.SplitHostPort(cfg.Listen)
		if host == "" || host == "0.0.0.0" || host == "::" {
			host = "127.0.0.1"
		}
		url = "http://" + net.JoinHostPort(host, port) + webhook.Path
	}
	files, err := expandFixtures(fs.Args())
	if err != nil {
		return err
	}
	var waiter *settler
	if *settle {
		if waiter, err = openSettler(ctx, e, cfg, *dataDir, *settleTimeout); err != nil {
			return err
		}
		defer waiter.close()
	}
	client := &http.Client{Timeout: 30 * time.Second}
	var failed int
	for i, path := range files {
		if i > 0 && *delay > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(*delay):
			}
		}
		f, err := recording.LoadFile(path)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		override := map[string]string{}
		if !*keepIDs {
			override = recording.WithDelivery(newDeliveryID())
		}
		sig := webhook.Sign(f.Body, secret)
		override["X-Gitea-Signature"], override["X-Forgejo-Signature"], override["X-Gogs-Signature"] = sig, sig, sig
		override["X-Hub-Signature-256"] = "sha256=" + sig
		override["X-Hub-Signature"] = "" // SHA-1 of the old secret: drop it
		req, err := f.Request(url, override)
		if err != nil {
			return err
		}
		req = req.WithContext(ctx)
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("post %s to %s: %w", f.Name, url, err)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		fmt.Fprintf(e.stdout, "%-70s %d %s\n", f.Name, resp.StatusCode, strings.TrimSpace(string(body)))
		if resp.StatusCode >= 300 {
			failed++
			continue
		}
		if waiter != nil {
			if err := waiter.wait(ctx, f.Name); err != nil {
				return err
			}
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d deliveries were not accepted", failed, len(files))
	}
	return nil
}

// expandFixtures turns arguments into recorded delivery bodies, in order:
// a directory stands for its *.json files but the headers.
func expandFixtures(args []string) ([]string, error) {
	var out []string
	for _, arg := range args {
		st, err := os.Stat(arg)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			out = append(out, arg)
			continue
		}
		matches, err := filepath.Glob(filepath.Join(arg, "*.json"))
		if err != nil {
			return nil, err
		}
		sort.Strings(matches)
		for _, m := range matches {
			if !strings.HasSuffix(m, ".headers.json") {
				out = append(out, m)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no recorded deliveries in %s", strings.Join(args, " "))
	}
	return out, nil
}

// newDeliveryID is a random UUID, like Gitea's delivery ids.
func newDeliveryID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
